//! Streamable HTTP spoken by hand, for tests that must send what no client would (a token on a
//! stranger's session, a body with a repeated member) or read the answer's headers.

use serde_json::{Value, json};

/// The `initialize` request of revision 2025-11-25, id 1, from a client named `raw`.
pub fn initialize_request() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

/// A POST of `body` to an MCP endpoint, with the headers the transport requires, a bearer
/// token and a session id when given, and the 2025-11-25 version header once a session is open.
pub fn post(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: impl Into<String>,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.into());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    request
}

/// The `Mcp-Session-Id` an answer carries.
///
/// # Panics
/// When the answer carries none: the test expected a session to open.
pub fn session_id(answer: &reqwest::Response) -> String {
    answer
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("a session id in the answer ({})", answer.status()))
        .to_owned()
}

/// Opens a session at `url` with a raw `initialize` (not yet followed by
/// `notifications/initialized`) and returns its id.
///
/// # Panics
/// When the server does not answer 200 with a session id.
pub async fn open_session(http: &reqwest::Client, url: &str, token: Option<&str>) -> String {
    let answer = post(http, url, token, None, initialize_request().to_string())
        .send()
        .await
        .expect("an answer to initialize");
    assert_eq!(answer.status(), 200, "initialize");
    session_id(&answer)
}

/// The WebSocket URL served beside an HTTP endpoint: `http://H/mcp` → `ws://H/ws`.
pub fn ws_url(url: &str) -> String {
    url.replace("http://", "ws://").replace("/mcp", "/ws")
}
