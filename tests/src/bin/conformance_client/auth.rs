//! The `auth/*` scenarios: the first request goes without a token; its 401 challenge starts
//! `tidewire_auth`'s OAuth client (discovery, registration, PKCE, with a front channel that
//! follows the mock authorization server's immediate redirect), and the scenario's calls run
//! with the token it got.
//!
//! The transports do not yet re-authorize by themselves on a 401 or 403 in the middle of a
//! session, so the scenarios that need it (step-up, retry-limit, authorization-server
//! migration) are expected failures.

use serde_json::{Value, json};
use tidewire_auth::client::{Credentials, HeadlessRedirect, OAuthClient, OAuthConfig};
use tidewire_auth::parse_challenges;
use tidewire_client::{Client, Era};
use tidewire_core::schema::Implementation;
use tidewire_http::client::{StatelessHttpClient, StreamableHttpClient};

/// The redirect URI registered; the mock never visits it.
const REDIRECT_URI: &str = "http://localhost:3000/callback";
/// This client's metadata document URL, where a server accepts one as a client id.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// A client of the MCP endpoint `url` holding the token its challenge led to (or none, if
/// it asked for none).
pub(crate) async fn connect(url: &str, modern: bool) -> Result<Client, String> {
    let oauth = OAuthClient::new(config()).map_err(|e| e.to_string())?;
    let token = match challenge(url, modern).await? {
        None => None,
        Some(header) => {
            let challenge = parse_challenges(&header)
                .into_iter()
                .find(|c| c.is("bearer"));
            let token = oauth
                .authorize(url, challenge.as_ref())
                .await
                .map_err(|e| format!("authorization: {e}"))?;
            Some(token.access_token)
        }
    };
    let info = Implementation::new("tidewire-conformance-client", env!("CARGO_PKG_VERSION"));
    let connected = if modern {
        let mut transport = StatelessHttpClient::new(url);
        if let Some(token) = &token {
            transport = transport.bearer(token);
        }
        let transport = transport.connect().await.map_err(|e| e.to_string())?;
        Client::builder(info)
            .era(Era::Modern)
            .connect(transport)
            .await
    } else {
        let mut transport = StreamableHttpClient::new(url);
        if let Some(token) = &token {
            transport = transport.bearer(token);
        }
        let transport = transport.connect().await.map_err(|e| e.to_string())?;
        Client::builder(info)
            .era(Era::Legacy)
            .connect(transport)
            .await
    };
    connected.map_err(|e| format!("connecting with the token: {e}"))
}

/// The OAuth client, with the pre-registered credentials the scenario's context gives.
fn config() -> OAuthConfig {
    let mut config = OAuthConfig::new(
        "tidewire-conformance-client",
        REDIRECT_URI,
        HeadlessRedirect::new(),
    );
    config.client_metadata_url = Some(CLIENT_METADATA_URL.to_owned());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    if let Some(id) = context.get("client_id").and_then(Value::as_str) {
        let secret = context
            .get("client_secret")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let issuer = context
            .get("issuer")
            .and_then(Value::as_str)
            .map(str::to_owned);
        config.pre_registered = Some((Credentials::pre_registered(id, secret), issuer));
    }
    config
}

/// The first request of the wire, sent without a token: the `WWW-Authenticate` of its 401, or
/// `None` when it needs no token.
async fn challenge(url: &str, modern: bool) -> Result<Option<String>, String> {
    let (version, body) = if modern {
        (
            "2026-07-28",
            json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "tidewire-conformance-client", "version": "1"}}}}),
        )
    } else {
        (
            "2025-11-25",
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "tidewire-conformance-client", "version": "1"}}}),
        )
    };
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header(
            "mcp-method",
            if modern {
                "server/discover"
            } else {
                "initialize"
            },
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("the first request: {e}"))?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(Some(
        response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    ))
}
