//! The resource server's side of authorization: `tidewire_auth::BearerLayer` in front of the
//! Streamable HTTP endpoint. Without a token the answer is 401 with a challenge naming the
//! protected-resource metadata; with too few scopes 403 naming them; with a valid token the
//! call goes through in both eras (and over legacy HTTP+SSE) and the handler sees who it acts
//! for; a session belongs to the principal that opened it.

use serde_json::json;
use tidewire_auth::{
    BearerLayer, ProtectedResourceMetadata, StaticTokens, VerifiedToken, parse_challenges,
};
use tidewire_client::{Client, Era};
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_http::client::{StatelessHttpClient, StreamableHttpClient};
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_server::{Context, NoArgs, Server};
use tidewire_sse::client::SseClient;
use tidewire_sse::server::{LegacySse, SseConfig};
use tidewire_tests::LIMIT;

/// Serves a `whoami` tool behind the layer, and the metadata document beside it; the URL of
/// the endpoint.
async fn protected() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let url = format!("http://{addr}/mcp");
    let metadata =
        ProtectedResourceMetadata::new(url.clone(), "http://127.0.0.1:1").scopes(["mcp:use"]);
    let tokens = StaticTokens::new()
        .with("alice-token", VerifiedToken::new("alice", ["mcp:use"]))
        .with("narrow-token", VerifiedToken::new("bob", ["mcp:other"]))
        .with("bob-token", VerifiedToken::new("bob", ["mcp:use"]));
    let server = Server::builder(Implementation::new("protected", "1.0"))
        .tool(
            "whoami",
            "Says who the call acts for",
            |_: NoArgs, ctx: Context| async move {
                Ok(CallToolResult::text(ctx.principal().unwrap_or("nobody")))
            },
        )
        .build();
    let document = serde_json::to_string(&metadata).expect("JSON");
    let layer = BearerLayer::new(tokens, &metadata).require_scopes(["mcp:use"]);
    let sse = LegacySse::new(SseConfig::default(), server.clone())
        .router("/sse", "/messages")
        .layer(layer.clone());
    let mcp = StreamableHttp::new(HttpConfig::default(), server)
        .router("/mcp")
        .layer(layer)
        .merge(sse);
    let app = mcp.route(
        &metadata.path(),
        axum::routing::get(move || {
            let document = document.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], document) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn whoami(client: &Client) -> String {
    client
        .call_tool("whoami", json!({}))
        .await
        .expect("whoami")
        .first_text()
        .expect("text")
        .to_owned()
}

#[tokio::test]
async fn no_token_is_challenged_too_few_scopes_forbidden_and_a_valid_one_reaches_the_handler() {
    tokio::time::timeout(LIMIT, async {
        let url = protected().await;
        let http = reqwest::Client::new();
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let post = |token: Option<&'static str>| {
            let mut request = http
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(initialize.to_string());
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            request.send()
        };

        let none = post(None).await.expect("answered");
        assert_eq!(none.status(), 401);
        let header = none
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .expect("a challenge")
            .to_owned();
        let challenge = &parse_challenges(&header)[0];
        let metadata_url = challenge
            .param("resource_metadata")
            .expect("the metadata URL");
        assert_eq!(challenge.param("scope"), Some("mcp:use"));
        let document = http
            .get(metadata_url)
            .send()
            .await
            .expect("the metadata document")
            .bytes()
            .await
            .expect("its body");
        let document: serde_json::Value = serde_json::from_slice(&document).expect("JSON");
        assert_eq!(document["resource"], json!(url));

        let narrow = post(Some("narrow-token")).await.expect("answered");
        assert_eq!(narrow.status(), 403);
        let forged = post(Some("forged")).await.expect("answered");
        assert_eq!(forged.status(), 401);

        let session = StreamableHttpClient::new(&url)
            .bearer("alice-token")
            .connect()
            .await
            .expect("transport");
        let client = Client::builder(Implementation::new("t", "1"))
            .era(Era::Legacy)
            .connect(session)
            .await
            .expect("a session with the token");
        assert_eq!(whoami(&client).await, "alice");
        client.close().await;

        let stateless = StatelessHttpClient::new(&url)
            .bearer("alice-token")
            .connect()
            .await
            .expect("transport");
        let client = Client::builder(Implementation::new("t", "1"))
            .era(Era::Modern)
            .connect(stateless)
            .await
            .expect("the stateless revision with the token");
        assert_eq!(whoami(&client).await, "alice");
        client.close().await;

        let sse_url = url.replace("/mcp", "/sse");
        let legacy = SseClient::new(&sse_url)
            .bearer("alice-token")
            .connect()
            .await
            .expect("transport");
        let client = Client::builder(Implementation::new("t", "1"))
            .connect(legacy)
            .await
            .expect("legacy HTTP+SSE with the token");
        assert_eq!(whoami(&client).await, "alice");
        client.close().await;
        let refused = SseClient::new(&sse_url).connect().await;
        assert!(refused.is_err(), "no token, no stream");
    })
    .await
    .expect("within the limit");
}

/// A session belongs to the principal that opened it: another principal's request naming it
/// is answered as if it did not exist, and the owner goes on using it.
#[tokio::test]
async fn a_session_is_bound_to_the_principal_that_opened_it() {
    tokio::time::timeout(LIMIT, async {
        let url = protected().await;
        let http = reqwest::Client::new();
        let send = |token: &'static str, session: Option<String>, body: serde_json::Value| {
            let mut request = http
                .post(&url)
                .bearer_auth(token)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-11-25")
                .body(body.to_string());
            if let Some(session) = session {
                request = request.header("mcp-session-id", session);
            }
            request.send()
        };
        let opened = send(
            "alice-token",
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .await
        .expect("initialize");
        assert_eq!(opened.status(), 200);
        let session = opened
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let stolen = send("bob-token", Some(session.clone()), initialized.clone())
            .await
            .expect("answered");
        assert_eq!(
            stolen.status(),
            404,
            "another principal cannot use the session"
        );
        let owned = send("alice-token", Some(session.clone()), initialized)
            .await
            .expect("answered");
        assert_eq!(owned.status(), 202, "the owner can");
        let ended = http
            .delete(&url)
            .bearer_auth("bob-token")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .expect("answered");
        assert_eq!(ended.status(), 404, "nor end it");

        // Legacy HTTP+SSE: the stream's session takes posts only from the one that opened it.
        let mut stream = http
            .get(url.replace("/mcp", "/sse"))
            .bearer_auth("alice-token")
            .send()
            .await
            .expect("the stream");
        let mut seen = String::new();
        while !seen.contains("sessionId=") || !seen.contains("\n\n") {
            let chunk = stream
                .chunk()
                .await
                .expect("read")
                .expect("the endpoint event");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        let endpoint = seen
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .expect("the endpoint")
            .trim()
            .to_owned();
        let post_url = url.replace("/mcp", &endpoint);
        let post = |token: &'static str| {
            http.post(&post_url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
                .send()
        };
        assert_eq!(post("bob-token").await.expect("answered").status(), 404);
        assert_eq!(post("alice-token").await.expect("answered").status(), 202);
    })
    .await
    .expect("within the limit");
}
