//! The OAuth client end to end, against the test authorization server and a tidewire server
//! behind `BearerLayer`: a token is refreshed before it expires and its rotated refresh token
//! is saved first (a later run needs no login); a revoked token is refreshed once, and when the
//! refresh token is revoked too the flow runs again; a tool with its own scope makes the client
//! step up.

use std::sync::Arc;

use serde_json::json;
use tidewire_auth::client::{
    FileStore, Grant, HeadlessRedirect, OAuthClient, OAuthConfig, OAuthSession, TokenStore,
};
use tidewire_auth::{
    BearerLayer, Introspection, JwtVerifier, ProtectedResourceMetadata, TokenVerifier,
};
use tidewire_client::{Client, Era};
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_http::client::StreamableHttpConnector;
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_server::{Context, NoArgs, Server};
use tidewire_tests::LIMIT;
use tidewire_tests::authorization_server::{INTROSPECTION_CLIENT, TestAuthorizationServer};

/// How the protected server checks tokens.
enum Check {
    Jwks,
    Introspection,
}

/// Serves `whoami` (scope `mcp:use`, as every request) and `admin` (also `mcp:admin`) behind
/// the layer, for tokens of `auth`; the endpoint's URL.
async fn protected(auth: &TestAuthorizationServer, check: Check) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let metadata =
        ProtectedResourceMetadata::new(url.clone(), auth.issuer.clone()).scopes(vec!["mcp:use"]);
    let verifier: Box<dyn FnOnce(&ProtectedResourceMetadata) -> BearerLayer> = match check {
        Check::Jwks => {
            let verifier = JwtVerifier::from_jwks_url(auth.jwks_uri(), &auth.issuer, &url);
            Box::new(move |m| BearerLayer::new(verifier, m))
        }
        Check::Introspection => {
            let (id, secret) = INTROSPECTION_CLIENT;
            let verifier = Introspection::new(auth.introspection_endpoint(), id, secret)
                .audience(&url)
                // These tests revoke tokens and expect the next request refused.
                .cache(std::time::Duration::ZERO, 0);
            Box::new(move |m| BearerLayer::new(verifier, m))
        }
    };
    let layer = verifier(&metadata)
        .require_scopes(["mcp:use"])
        .tool_scopes("admin", ["mcp:admin"]);
    let server = Server::builder(Implementation::new("protected", "1.0"))
        .tool(
            "whoami",
            "Who the call acts for",
            |_: NoArgs, ctx: Context| async move {
                Ok(CallToolResult::text(ctx.principal().unwrap_or("nobody")))
            },
        )
        .tool(
            "admin",
            "Needs mcp:admin",
            |_: NoArgs, ctx: Context| async move {
                // The handler sees what the token granted.
                let granted = ctx.auth().is_some_and(|a| a.has_scope("mcp:admin"));
                Ok(CallToolResult::text(if granted {
                    "done"
                } else {
                    "not granted"
                }))
            },
        )
        .build();
    let document = serde_json::to_string(&metadata).expect("JSON");
    let app = StreamableHttp::new(HttpConfig::default(), server)
        .router("/mcp")
        .layer(layer)
        .route(
            &metadata.path(),
            axum::routing::get(move || async move {
                ([(http::header::CONTENT_TYPE, "application/json")], document)
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn oauth() -> OAuthClient {
    OAuthClient::new(OAuthConfig::new(
        "oauth-flow-test",
        "http://127.0.0.1:9/callback",
        HeadlessRedirect::new(),
    ))
    .expect("client")
}

async fn connect(url: &str, session: OAuthSession) -> Client {
    let transport = StreamableHttpConnector::new(url)
        .authorizer(session)
        .connect()
        .await
        .expect("transport");
    Client::builder(Implementation::new("t", "1"))
        .era(Era::Legacy)
        .connect(transport)
        .await
        .expect("connected, authorized on the way")
}

async fn call(client: &Client, tool: &str) -> String {
    client
        .call_tool(tool, json!({}))
        .await
        .expect("the call")
        .first_text()
        .expect("text")
        .to_owned()
}

fn count(grants: &[String], grant: &str) -> usize {
    grants.iter().filter(|g| *g == grant).count()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tidewire-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("tokens.json")
}

#[tokio::test]
async fn a_token_due_to_expire_is_refreshed_its_rotated_refresh_token_saved_and_reused_later() {
    tokio::time::timeout(LIMIT, async {
        // Ten-second tokens are always within the renewal margin: every request refreshes.
        let auth = TestAuthorizationServer::start(10).await;
        let url = protected(&auth, Check::Jwks).await;
        let path = scratch("rotation");
        let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(&path));
        let client = connect(&url, OAuthSession::with_store(oauth(), &url, store.clone())).await;
        assert_eq!(call(&client, "whoami").await, "alice");
        client.close().await;
        let grants = auth.grants();
        assert_eq!(count(&grants, "authorization_code"), 1, "{grants:?}");
        assert!(count(&grants, "refresh_token") >= 1, "{grants:?}");
        let saved: Grant = store.load(&url).expect("readable").expect("saved");
        assert_eq!(
            saved.token.refresh_token,
            auth.last_refresh_token(),
            "the rotated refresh token is the one kept"
        );
        assert_eq!(saved.resource.as_deref(), Some(url.as_str()));

        // A later run, with a new client and the same file: no login, only refreshes.
        let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(&path));
        let client = connect(&url, OAuthSession::with_store(oauth(), &url, store)).await;
        assert_eq!(call(&client, "whoami").await, "alice");
        client.close().await;
        let later = auth.grants();
        assert_eq!(count(&later, "authorization_code"), 1, "{later:?}");
        assert!(count(&later, "refresh_token") > count(&grants, "refresh_token"));
    })
    .await
    .expect("within the limit");
}

#[tokio::test]
async fn a_revoked_token_is_refreshed_once_and_with_its_refresh_token_revoked_the_flow_runs_again()
{
    tokio::time::timeout(LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        let url = protected(&auth, Check::Introspection).await;
        let client = connect(&url, OAuthSession::new(oauth(), &url)).await;
        assert_eq!(call(&client, "whoami").await, "alice");
        assert_eq!(auth.grants(), ["authorization_code"]);

        auth.revoke_access_tokens();
        assert_eq!(call(&client, "whoami").await, "alice");
        assert_eq!(auth.grants(), ["authorization_code", "refresh_token"]);

        auth.revoke_access_tokens();
        auth.revoke_refresh_tokens();
        assert_eq!(call(&client, "whoami").await, "alice");
        assert_eq!(
            auth.grants(),
            [
                "authorization_code",
                "refresh_token",
                "refresh_token",
                "authorization_code"
            ],
            "one refresh, refused, then a new login"
        );
        client.close().await;
    })
    .await
    .expect("within the limit");
}

#[tokio::test]
async fn a_tool_needing_more_scope_makes_the_client_step_up_and_jwks_tokens_pass() {
    tokio::time::timeout(LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        let url = protected(&auth, Check::Jwks).await;
        let session = OAuthSession::new(oauth(), &url);
        let client = connect(&url, session.clone()).await;
        assert_eq!(call(&client, "whoami").await, "alice");
        let before = session
            .grant()
            .expect("a grant")
            .token
            .scope
            .unwrap_or_default();
        assert!(!before.contains("mcp:admin"), "{before}");
        assert_eq!(call(&client, "admin").await, "done");
        let after = session
            .grant()
            .expect("a grant")
            .token
            .scope
            .unwrap_or_default();
        assert!(
            after.contains("mcp:admin") && after.contains("mcp:use"),
            "{after}"
        );
        assert_eq!(count(&auth.grants(), "authorization_code"), 2);
        client.close().await;

        // The verifier itself: a token for another resource is refused.
        let verifier =
            JwtVerifier::from_jwks_url(auth.jwks_uri(), &auth.issuer, "http://elsewhere/mcp");
        let token = session.grant().expect("grant").token.access_token;
        assert!(verifier.verify(&token).await.is_err());
    })
    .await
    .expect("within the limit");
}

/// A store that cannot keep anything.
struct Broken;

impl TokenStore for Broken {
    fn load(&self, _: &str) -> Result<Option<Grant>, tidewire_auth::client::StoreError> {
        Ok(None)
    }
    fn save(&self, _: &str, _: &Grant) -> Result<(), tidewire_auth::client::StoreError> {
        Err(tidewire_auth::client::StoreError::Full)
    }
    fn remove(&self, _: &str) -> Result<bool, tidewire_auth::client::StoreError> {
        Ok(false)
    }
    fn keys(&self) -> Result<Vec<String>, tidewire_auth::client::StoreError> {
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn a_grant_that_cannot_be_saved_is_not_used_and_says_why() {
    tokio::time::timeout(LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        let url = protected(&auth, Check::Jwks).await;
        let session = OAuthSession::with_store(oauth(), &url, Arc::new(Broken));
        let transport = StreamableHttpConnector::new(&url)
            .authorizer(session.clone())
            .connect()
            .await
            .expect("transport");
        let connected = Client::builder(Implementation::new("t", "1"))
            .era(Era::Legacy)
            .connect(transport)
            .await;
        assert!(connected.is_err(), "no token was usable");
        assert_eq!(auth.grants(), ["authorization_code"]);
        assert!(session.grant().is_none());
        let why = session.last_error().expect("a reason");
        assert!(why.contains("token store"), "{why}");
    })
    .await
    .expect("within the limit");
}
