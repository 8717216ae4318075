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
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire_tests::authorization_server::{INTROSPECTION_CLIENT, TestAuthorizationServer};
use tidewire_tests::external::PythonAuthorizationServer;

/// What the end-to-end flow needs of an authorization server: where it is, and the test
/// controls that make its tokens expire or be revoked, and show which grants it served.
trait Issuer {
    fn issuer(&self) -> String;
    fn introspection_endpoint(&self) -> String;
    async fn grants(&self) -> Vec<String>;
    async fn revoke_access_tokens(&self);
    async fn revoke_refresh_tokens(&self);
    async fn set_lifetime(&self, seconds: u64);
}

impl Issuer for TestAuthorizationServer {
    fn issuer(&self) -> String {
        self.issuer.clone()
    }
    fn introspection_endpoint(&self) -> String {
        TestAuthorizationServer::introspection_endpoint(self)
    }
    async fn grants(&self) -> Vec<String> {
        TestAuthorizationServer::grants(self)
    }
    async fn revoke_access_tokens(&self) {
        TestAuthorizationServer::revoke_access_tokens(self);
    }
    async fn revoke_refresh_tokens(&self) {
        TestAuthorizationServer::revoke_refresh_tokens(self);
    }
    async fn set_lifetime(&self, seconds: u64) {
        TestAuthorizationServer::set_lifetime(self, seconds);
    }
}

/// The Python SDK's authorization server, driven through its `/control/` routes.
impl Issuer for PythonAuthorizationServer {
    fn issuer(&self) -> String {
        self.issuer.clone()
    }
    fn introspection_endpoint(&self) -> String {
        self.url("introspect")
    }
    async fn grants(&self) -> Vec<String> {
        let answer = reqwest::get(self.url("control/grants"))
            .await
            .expect("grants");
        serde_json::from_str(&answer.text().await.expect("body")).expect("a list")
    }
    async fn revoke_access_tokens(&self) {
        control(&self.url("control/revoke-access")).await;
    }
    async fn revoke_refresh_tokens(&self) {
        control(&self.url("control/revoke-refresh")).await;
    }
    async fn set_lifetime(&self, seconds: u64) {
        control(&self.url(&format!("control/lifetime?seconds={seconds}"))).await;
    }
}

async fn control(url: &str) {
    let answer = support::http_client()
        .post(url)
        .send()
        .await
        .expect("control");
    assert!(answer.status().is_success(), "{url}: {}", answer.status());
}

fn serve(auth: &impl Issuer) -> HttpServer {
    let (id, secret) = INTROSPECTION_CLIENT;
    let issuer = auth.issuer();
    let introspection = auth.introspection_endpoint();
    HttpServer::start_with_env(
        &[
            "--auth-issuer",
            &issuer,
            "--auth-introspection",
            &introspection,
            "--auth-client-id",
            id,
            "--auth-scope",
            "mcp:use",
            "--auth-tool-scope",
            "test_simple_text=mcp:admin",
            // These tests revoke tokens and expect the next request refused: no answer kept.
            "--auth-cache",
            "0s",
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
    let connected = match era {
        Era::Modern => {
            let transport = StatelessHttpConnector::new(url).authorizer(session.clone());
            builder
                .connect(transport.connect().await.expect("transport"))
                .await
        }
        _ => {
            let transport = StreamableHttpConnector::new(url).authorizer(session.clone());
            builder
                .connect(transport.connect().await.expect("transport"))
                .await
        }
    };
    match connected {
        Ok(client) => client,
        Err(error) => panic!(
            "not connected ({era:?}): {error}; the login: {:?}",
            session.last_error()
        ),
    }
}

async fn echo(client: &Client) -> String {
    let result = client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .expect("echo");
    result.first_text().expect("text").to_owned()
}

async fn count(auth: &impl Issuer, grant: &str) -> usize {
    auth.grants().await.iter().filter(|g| *g == grant).count()
}

fn refresh_token(session: &OAuthSession) -> Option<String> {
    session.grant().expect("grant").token.refresh_token
}

/// Login, a call, revocation refreshed once, revocation with the refresh token a new login,
/// step-up for a tool's scope, and refresh before expiry with rotation, in both eras, against
/// `tidewire serve` checking tokens at `auth`'s introspection endpoint.
async fn the_whole_flow(auth: &impl Issuer) {
    let server = serve(auth);
    let refused = status_without_token(&server.url).await;
    assert_eq!(refused, 401, "no token, no access");

    for era in [Era::Legacy, Era::Modern] {
        let logins = count(auth, "authorization_code").await;
        let session = session(&server.url);
        // Login and a call.
        let client = connect(&server.url, session.clone(), era).await;
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        assert_eq!(
            count(auth, "authorization_code").await,
            logins + 1,
            "{era:?}"
        );

        // Revoked: refreshed once, and the call goes through.
        let refreshes = count(auth, "refresh_token").await;
        auth.revoke_access_tokens().await;
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        assert_eq!(count(auth, "refresh_token").await, refreshes + 1, "{era:?}");

        // Revoked with its refresh token: a new login.
        auth.revoke_access_tokens().await;
        auth.revoke_refresh_tokens().await;
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        assert_eq!(
            count(auth, "authorization_code").await,
            logins + 2,
            "{era:?}"
        );

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

        // Short tokens: each request refreshes first; the server rotates refresh tokens (an
        // old one is refused), so calls going on prove the rotated one was kept.
        auth.set_lifetime(10).await;
        auth.revoke_access_tokens().await;
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        let (refreshes, before) = (count(auth, "refresh_token").await, refresh_token(&session));
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        assert_eq!(echo(&client).await, "hi", "{era:?}");
        assert!(
            count(auth, "refresh_token").await >= refreshes + 2,
            "refreshed before expiry"
        );
        assert_ne!(refresh_token(&session), before, "rotated");
        auth.set_lifetime(3600).await;
        client.close().await;
    }
}

#[tokio::test]
async fn login_call_refresh_revocation_and_step_up_against_tidewire_serve() {
    tokio::time::timeout(support::LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        the_whole_flow(&auth).await;
    })
    .await
    .expect("within the limit");
}

/// The same against a real authorization server: the official Python SDK's, whose token
/// endpoint (PKCE, client authentication, refresh) is not ours.
#[tokio::test]
async fn the_same_flow_against_the_python_sdk_authorization_server() {
    let Some(python) = tidewire_tests::external::python_interpreter() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let auth = PythonAuthorizationServer::start(&python);
        the_whole_flow(&auth).await;
    })
    .await
    .expect("within the limit");
}

/// The status of a bare POST (no token) to `url`.
async fn status_without_token(url: &str) -> u16 {
    let transport = StreamableHttpConnector::new(url)
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

/// Runs `tidewire ARGS…` to its end: its exit code, stdout and stderr. Awaited, so the test's
/// time limit can stop it (the child is killed when the wait is dropped).
async fn tidewire(args: &[&str], token_file: &std::path::Path) -> (i32, String, String) {
    let output = tokio::process::Command::new(support::BIN)
        .args(args)
        .env("TIDEWIRE_TOKEN_FILE", token_file)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("tidewire runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_login_through_a_browser_then_calls_use_the_saved_login_until_logout() {
    use tokio::io::{AsyncBufReadExt as _, BufReader};

    tokio::time::timeout(support::LIMIT, async {
        let auth = TestAuthorizationServer::start(3600).await;
        let server = serve(&auth);
        let url = server.url.clone();
        let dir = std::env::temp_dir().join(format!("tidewire-cli-oauth-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tokens = dir.join("tokens.json");

        // Without a login and without a terminal: a clear refusal naming the way out.
        let (code, _, stderr) =
            tidewire(&["call", &url, "echo", r#"{"text":"hi"}"#], &tokens).await;
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("401") && stderr.contains("--oauth"),
            "{stderr}"
        );

        // `auth login`: the URL is printed; the "browser" (this test) follows it.
        let mut login = tokio::process::Command::new(support::BIN)
            .args(["auth", "login", &url, "--no-browser"])
            .env("TIDEWIRE_TOKEN_FILE", &tokens)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("tidewire auth login");
        let mut lines = BufReader::new(login.stderr.take().expect("stderr")).lines();
        let mut authorization_url = None;
        while let Some(line) = lines.next_line().await.expect("stderr is read") {
            if line.trim().starts_with("http://") {
                authorization_url = Some(line.trim().to_owned());
                break;
            }
        }
        let authorization_url = authorization_url.expect("the authorization URL is printed");
        assert!(authorization_url.starts_with(&format!("{}/authorize?", auth.issuer)));
        let page = reqwest::get(&authorization_url)
            .await
            .expect("the browser's round trip");
        assert_eq!(page.status(), 200, "the loopback page");
        let finished = login.wait_with_output().await.expect("login ends");
        let said = String::from_utf8_lossy(&finished.stdout).into_owned();
        assert!(finished.status.success(), "{said}");
        assert!(
            said.starts_with(&format!("logged in to {url}: issuer {}", auth.issuer)),
            "{said}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&tokens)
                .expect("saved")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let contents = std::fs::read_to_string(&tokens).expect("token file");
        assert!(!said.contains("refresh-"), "no token on the screen");

        // A call uses the saved login: no new authorization.
        let logins = count(&auth, "authorization_code").await;
        let (code, stdout, stderr) =
            tidewire(&["call", &url, "echo", r#"{"text":"hi"}"#], &tokens).await;
        assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
        assert_eq!(count(&auth, "authorization_code").await, logins);

        // The login runs out (revoked, its refresh token too): a script fails at once and says
        // how to log in again, instead of waiting for a browser.
        TestAuthorizationServer::revoke_access_tokens(&auth);
        TestAuthorizationServer::revoke_refresh_tokens(&auth);
        let (code, _, stderr) =
            tidewire(&["call", &url, "echo", r#"{"text":"hi"}"#], &tokens).await;
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("tidewire auth login"), "{stderr}");

        let (code, status, _) = tidewire(&["auth", "status"], &tokens).await;
        assert_eq!(code, 0);
        assert!(
            status.contains(&url) && status.contains("can be refreshed"),
            "{status}"
        );
        assert!(
            !contents.is_empty() && !status.contains("eyJ"),
            "no token in the status"
        );

        let (code, out, _) = tidewire(&["auth", "logout", &url], &tokens).await;
        assert_eq!(
            (code, out.trim()),
            (0, format!("logged out of {url}").as_str())
        );
        let (_, status, _) = tidewire(&["auth", "status"], &tokens).await;
        assert_eq!(status.trim(), "no logins");
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("within the limit");
}
