//! The resource server's side of authorization: `tidewire_auth::BearerLayer` in front of the
//! Streamable HTTP endpoint. Without a token the answer is 401 with a challenge naming the
//! protected-resource metadata; with too few scopes 403 naming them; with a valid token the
//! call goes through in both eras and the handler sees who it acts for.

use serde_json::json;
use tidewire_auth::{
    BearerLayer, ProtectedResourceMetadata, StaticTokens, VerifiedToken, parse_challenges,
};
use tidewire_client::{Client, Era};
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_http::client::{StatelessHttpClient, StreamableHttpClient};
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_server::{Context, NoArgs, Server};
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
        .with("narrow-token", VerifiedToken::new("bob", ["mcp:other"]));
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
    let mcp = StreamableHttp::new(HttpConfig::default(), server)
        .router("/mcp")
        .layer(BearerLayer::new(tokens, &metadata).require_scopes(["mcp:use"]));
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
    })
    .await
    .expect("within the limit");
}
