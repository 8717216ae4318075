//! `tidewire serve` as an OAuth protected resource, end to end: the test authorization server
//! grants tokens, `tidewire serve --auth-issuer … --auth-introspection …` checks them, and the
//! OAuth client of `tidewire-auth` goes through login, calls, refresh before expiry with a
//! rotated refresh token, revocation (refreshed once, then a new login) and step-up for a tool
//! that needs more scope, in both eras.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::HttpServer;
use tidewire_auth::client::{HeadlessRedirect, OAuthClient, OAuthConfig, OAuthSession};
use tidewire_client::{Client, Era};
use tidewire_core::schema::Implementation;
use tidewire_http::client::{StatelessHttpClient, StreamableHttpClient};
use tidewire_tests::authorization_server::{INTROSPECTION_CLIENT, TestAuthorizationServer};

fn serve(auth: &TestAuthorizationServer) -> HttpServer {
    let (id, secret) = INTROSPECTION_CLIENT;
    let introspection = auth.introspection_endpoint();
    HttpServer::start_with_env(
        &[
            "--auth-issuer",
            &auth.issuer,
            "--auth-introspection",
            &introspection,
            "--auth-client-id",
            id,
            "--auth-scope",
            "mcp:use",
            "--auth-tool-scope",
            "test_simple_text=mcp:admin",
        ],
        &[("TIDEWIRE_AUTH_CLIENT_SECRET", secret)],
    )
}

fn session(url: &str) -> OAuthSession {
    let oauth = OAuthClient::new(OAuthConfig::new(
        "tidewire-cli-test",
        "http://127.0.0.1:9/callback",
        HeadlessRedirect::new(),
    ))
    .expect("client");
    OAuthSession::new(oauth, url)
}

async fn connect(url: &str, session: OAuthSession, era: Era) -> Client {
    let builder = Client::builder(Implementation::new("t", "1")).era(era);
    match era {
        Era::Modern => {
            let transport = StatelessHttpClient::new(url).authorizer(session);
            builder
                .connect(transport.connect().await.expect("transport"))
                .await
        }
        _ => {
            let transport = StreamableHttpClient::new(url).authorizer(session);
            builder
                .connect(transport.connect().await.expect("transport"))
                .await
        }
    }
    .expect("connected, logged in on the way")
}

async fn echo(client: &Client) -> String {
    let result = client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .expect("echo");
    result.first_text().expect("text").to_owned()
}

fn count(auth: &TestAuthorizationServer, grant: &str) -> usize {
    auth.grants().iter().filter(|g| *g == grant).count()
}

#[tokio::test]
async fn login_call_refresh_revocation_and_step_up_against_tidewire_serve() {
    tokio::time::timeout(support::LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        let server = serve(&auth);
        let refused = status_without_token(&server.url).await;
        assert_eq!(refused, 401, "no token, no access");

        for era in [Era::Legacy, Era::Modern] {
            let logins = count(&auth, "authorization_code");
            let session = session(&server.url);
            // Login and a call.
            let client = connect(&server.url, session.clone(), era).await;
            assert_eq!(echo(&client).await, "hi", "{era:?}");
            assert_eq!(count(&auth, "authorization_code"), logins + 1, "{era:?}");

            // Revoked: refreshed once, and the call goes through.
            let refreshes = count(&auth, "refresh_token");
            auth.revoke_access_tokens();
            assert_eq!(echo(&client).await, "hi", "{era:?}");
            assert_eq!(count(&auth, "refresh_token"), refreshes + 1, "{era:?}");

            // Revoked with its refresh token: a new login.
            auth.revoke_access_tokens();
            auth.revoke_refresh_tokens();
            assert_eq!(echo(&client).await, "hi", "{era:?}");
            assert_eq!(count(&auth, "authorization_code"), logins + 2, "{era:?}");

            // A tool that needs mcp:admin: 403, step-up, the call goes through.
            let result = client
                .call_tool("test_simple_text", json!({}))
                .await
                .expect("after a step-up");
            assert!(!result.first_text().expect("text").is_empty());
            let scope = session
                .grant()
                .expect("grant")
                .token
                .scope
                .unwrap_or_default();
            assert!(
                scope.contains("mcp:admin") && scope.contains("mcp:use"),
                "{scope}"
            );

            // Short tokens: each request refreshes first, and the rotated token is the one kept.
            auth.set_lifetime(10);
            auth.revoke_access_tokens();
            assert_eq!(echo(&client).await, "hi", "{era:?}");
            let refreshes = count(&auth, "refresh_token");
            assert_eq!(echo(&client).await, "hi", "{era:?}");
            assert!(
                count(&auth, "refresh_token") > refreshes,
                "refreshed before expiry"
            );
            assert_eq!(
                session.grant().expect("grant").token.refresh_token,
                auth.last_refresh_token()
            );
            auth.set_lifetime(3600);
            client.close().await;
        }
    })
    .await
    .expect("within the limit");
}

/// The status of a bare POST (no token) to `url`.
async fn status_without_token(url: &str) -> u16 {
    let transport = StreamableHttpClient::new(url)
        .connect()
        .await
        .expect("transport");
    let connected = Client::builder(Implementation::new("t", "1"))
        .era(Era::Legacy)
        .connect(transport)
        .await;
    match connected {
        Ok(_) => 200,
        Err(error) => {
            assert!(error.to_string().contains("401"), "{error}");
            401
        }
    }
}
