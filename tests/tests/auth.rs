//! The resource server's side of authorization: `tidewire_auth::BearerLayer` in front of the
//! Streamable HTTP endpoint. Without a token the answer is 401 with a challenge naming the
//! protected-resource metadata; with too few scopes 403 naming them; with a valid token the
//! call goes through in both eras (and over legacy HTTP+SSE and WebSocket) and the handler sees
//! who it acts for; a session belongs to the principal that opened it.

use serde_json::json;
use tidewire_auth::{
    BearerLayer, ProtectedResourceMetadata, StaticTokens, VerifiedToken, parse_challenges,
};
use tidewire_client::{Client, Era};
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_server::{Context, NoArgs, Server};
use tidewire_sse::client::LegacySseConnector;
use tidewire_sse::server::{LegacySse, SseConfig};
use tidewire_tests::{LIMIT, raw};
use tidewire_ws::client::WebSocketConnector;
use tidewire_ws::server::{WebSocket, WsConfig};

/// Serves a `whoami` tool behind the layer (Streamable HTTP at `/mcp`, legacy SSE at `/sse`,
/// WebSocket at `/ws`), whose metadata document, served beside it, names `issuer` and the
/// `required` scopes; the URL of the endpoint.
async fn serve_protected(issuer: &str, tokens: StaticTokens, required: &[&str]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let metadata = ProtectedResourceMetadata::new(url.clone(), issuer).scopes(required.to_vec());
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
    let layer = BearerLayer::new(tokens, &metadata).require_scopes(required.to_vec());
    let sse = LegacySse::new(SseConfig::default(), server.clone())
        .router("/sse", "/messages")
        .layer(layer.clone());
    let ws = WebSocket::new(WsConfig::default(), server.clone())
        .router("/ws")
        .layer(layer.clone());
    let app = StreamableHttp::new(HttpConfig::default(), server)
        .router("/mcp")
        .layer(layer)
        .merge(sse)
        .merge(ws)
        .route(
            &metadata.path(),
            axum::routing::get(move || {
                let document = document.clone();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], document) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The protected server of the layer's tests: `mcp:use` required; tokens for alice and bob,
/// and a narrow one of bob's without it.
async fn protected() -> String {
    let tokens = StaticTokens::new()
        .with("alice-token", VerifiedToken::new("alice", ["mcp:use"]))
        .with("narrow-token", VerifiedToken::new("bob", ["mcp:other"]))
        .with("bob-token", VerifiedToken::new("bob", ["mcp:use"]));
    serve_protected("http://127.0.0.1:1", tokens, &["mcp:use"]).await
}

/// A client of `url` sending `token`: a session (`Era::Legacy`) or the stateless revision.
async fn with_token(url: &str, token: &str, era: Era) -> Client {
    let builder = Client::builder(Implementation::new("t", "1")).era(era);
    let connected = match era {
        Era::Modern => {
            let transport = StatelessHttpConnector::new(url)
                .bearer(token)
                .connect()
                .await;
            builder.connect(transport.expect("transport")).await
        }
        _ => {
            let transport = StreamableHttpConnector::new(url)
                .bearer(token)
                .connect()
                .await;
            builder.connect(transport.expect("transport")).await
        }
    };
    connected.expect("connected with the token")
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
        let http = tidewire_tests::http_client();
        let initialize = raw::initialize_request().to_string();
        let post = |token: Option<&'static str>| {
            raw::post(&http, &url, token, None, initialize.clone()).send()
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

        for era in [Era::Legacy, Era::Modern] {
            let client = with_token(&url, "alice-token", era).await;
            assert_eq!(whoami(&client).await, "alice", "{era:?}");
            client.close().await;
        }

        let sse_url = url.replace("/mcp", "/sse");
        let legacy = LegacySseConnector::new(&sse_url)
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
        let refused = LegacySseConnector::new(&sse_url).connect().await;
        assert!(refused.is_err(), "no token, no stream");

        let ws_url = raw::ws_url(&url);
        let socket = WebSocketConnector::new(&ws_url)
            .bearer("alice-token")
            .connect()
            .await
            .expect("the upgrade with the token");
        let client = Client::builder(Implementation::new("t", "1"))
            .connect(socket)
            .await
            .expect("WebSocket with the token");
        assert_eq!(whoami(&client).await, "alice", "WebSocket");
        client.close().await;
        assert!(
            WebSocketConnector::new(&ws_url).connect().await.is_err(),
            "no token, no upgrade"
        );
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
        let http = tidewire_tests::http_client();
        let session = raw::open_session(&http, &url, Some("alice-token")).await;
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let send =
            |token: &'static str| raw::post(&http, &url, Some(token), Some(&session), initialized);
        let stolen = send("bob-token").send().await.expect("answered");
        assert_eq!(
            stolen.status(),
            404,
            "another principal cannot use the session"
        );
        let owned = send("alice-token").send().await.expect("answered");
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

/// A small authorization server for the OAuth client: metadata (naming
/// `authorization_endpoint` when given), registration, an authorization endpoint that approves
/// at once (redirecting with `iss`, right or wrong), and
/// a token endpoint that grants `alice-token` for the right PKCE verifier. Counts token
/// requests.
async fn authorization_server(
    wrong_iss: bool,
    authorization_endpoint: Option<&str>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use axum::routing::{get, post};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let issuer = format!("http://{}", listener.local_addr().expect("address"));
    let tokens = Arc::new(AtomicUsize::new(0));
    let challenge = Arc::new(Mutex::new(String::new()));
    let metadata = json!({
        "issuer": issuer,
        "authorization_endpoint": authorization_endpoint
            .map_or_else(|| format!("{issuer}/authorize"), str::to_owned),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"],
        "authorization_response_iss_parameter_supported": true,
    })
    .to_string();
    let iss = if wrong_iss {
        "http://evil.example".to_owned()
    } else {
        issuer.clone()
    };
    let seen = challenge.clone();
    let authorize = move |uri: http::Uri| {
        let iss = iss.clone();
        let seen = seen.clone();
        async move {
            let parsed = reqwest::Url::parse(&format!("http://as{uri}")).expect("a URL");
            let q: std::collections::HashMap<String, String> =
                parsed.query_pairs().into_owned().collect();
            *seen.lock().expect("lock") = q.get("code_challenge").cloned().unwrap_or_default();
            let to = format!(
                "{}?code=the-code&state={}&iss={}",
                q.get("redirect_uri").cloned().unwrap_or_default(),
                q.get("state").cloned().unwrap_or_default(),
                iss
            );
            (http::StatusCode::FOUND, [(http::header::LOCATION, to)])
        }
    };
    let counted = tokens.clone();
    let token = move |body: String| {
        let counted = counted.clone();
        let challenge = challenge.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            let verifier = body
                .split('&')
                .find_map(|p| p.strip_prefix("code_verifier="))
                .unwrap_or_default()
                .to_owned();
            use base64::Engine as _;
            use sha2::Digest as _;
            let derived = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(verifier.as_bytes()));
            let right = derived == *challenge.lock().expect("lock")
                && body.contains("client_secret=s3cret");
            let answer = if right {
                json!({"access_token": "alice-token", "token_type": "Bearer", "expires_in": 60})
            } else {
                json!({"error": "invalid_grant"})
            };
            let status = if right { 200 } else { 400 };
            (
                http::StatusCode::from_u16(status).expect("status"),
                [(http::header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
        }
    };
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || {
                let metadata = metadata.clone();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], metadata) }
            }),
        )
        .route(
            "/register",
            post(|| async {
                (
                    http::StatusCode::CREATED,
                    [(http::header::CONTENT_TYPE, "application/json")],
                    json!({"client_id": "registered", "client_secret": "s3cret",
                           "token_endpoint_auth_method": "client_secret_post"})
                    .to_string(),
                )
            }),
        )
        .route("/authorize", get(authorize))
        .route("/token", post(token));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (issuer, tokens)
}

/// A server behind the layer whose metadata names `issuer`, taking the token that issuer's
/// test server grants; its endpoint's URL.
async fn protected_by(issuer: &str) -> String {
    let tokens = StaticTokens::new().with("alice-token", VerifiedToken::new("alice", ["mcp:use"]));
    serve_protected(issuer, tokens, &[]).await
}

/// From a 401 to a call: the challenge leads the OAuth client to the metadata, a registration,
/// the authorization request with PKCE and its `iss` checked, and the token the server takes.
/// An authorization response from the wrong issuer is refused before any token request.
#[tokio::test]
async fn the_oauth_client_goes_from_a_challenge_to_a_token_and_refuses_a_wrong_issuer() {
    use std::sync::atomic::Ordering;
    use tidewire_auth::client::{
        AuthError, HeadlessRedirect, OAuthClient, OAuthConfig, OAuthSession,
    };

    tokio::time::timeout(LIMIT, async {
        for wrong_iss in [false, true] {
            let (issuer, token_requests) = authorization_server(wrong_iss, None).await;
            let url = protected_by(&issuer).await;
            let refused = tidewire_tests::http_client()
                .post(&url)
                .send()
                .await
                .expect("answered");
            assert_eq!(refused.status(), 401);
            let header = refused
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .expect("a challenge")
                .to_owned();
            let challenge = parse_challenges(&header).remove(0);
            let oauth = OAuthClient::new(OAuthConfig::new(
                "auth-test",
                "http://127.0.0.1:9/callback",
                HeadlessRedirect::new(),
            ))
            .expect("client");
            let outcome = oauth.authorize(&url, Some(&challenge)).await;
            if wrong_iss {
                assert!(
                    matches!(outcome, Err(AuthError::Authorization(_))),
                    "{outcome:?}"
                );
                assert_eq!(token_requests.load(Ordering::SeqCst), 0);
                continue;
            }
            let token = outcome.expect("a token");
            assert_eq!(token_requests.load(Ordering::SeqCst), 1);
            let client = with_token(&url, &token.token.access_token, Era::Legacy).await;
            assert_eq!(whoami(&client).await, "alice");
            client.close().await;

            // The same flow run by the transports themselves, on their first 401, in both eras.
            for (era, requests) in [(Era::Legacy, 2), (Era::Modern, 3)] {
                let oauth = OAuthClient::new(OAuthConfig::new(
                    "auth-test",
                    "http://127.0.0.1:9/callback",
                    HeadlessRedirect::new(),
                ))
                .expect("client");
                let session = OAuthSession::new(oauth, url.clone());
                let builder = Client::builder(Implementation::new("t", "1")).era(era);
                let client = match era {
                    Era::Modern => {
                        let transport = StatelessHttpConnector::new(&url).authorizer(session);
                        builder
                            .connect(transport.connect().await.expect("transport"))
                            .await
                    }
                    _ => {
                        let transport = StreamableHttpConnector::new(&url).authorizer(session);
                        builder
                            .connect(transport.connect().await.expect("transport"))
                            .await
                    }
                }
                .expect("connected, authorized on the way");
                assert_eq!(whoami(&client).await, "alice", "{era:?}");
                assert_eq!(token_requests.load(Ordering::SeqCst), requests, "{era:?}");
                client.close().await;
            }
            // And the legacy HTTP+SSE client, whose stream's GET is the first to be refused.
            let oauth = OAuthClient::new(OAuthConfig::new(
                "auth-test",
                "http://127.0.0.1:9/callback",
                HeadlessRedirect::new(),
            ))
            .expect("client");
            let transport = LegacySseConnector::new(url.replace("/mcp", "/sse"))
                .authorizer(OAuthSession::new(oauth, url.clone()))
                .connect()
                .await
                .expect("the stream, authorized on the way");
            let client = Client::builder(Implementation::new("t", "1"))
                .connect(transport)
                .await
                .expect("connected");
            assert_eq!(whoami(&client).await, "alice", "legacy SSE");
            assert_eq!(token_requests.load(Ordering::SeqCst), 4);
            client.close().await;
        }
    })
    .await
    .expect("within the limit");
}

/// Serves `server` behind `layer` on `listener`: Streamable HTTP at `/mcp`, WebSocket at `/ws`.
fn serve_behind(listener: tokio::net::TcpListener, server: Server, layer: BearerLayer) {
    let ws = WebSocket::new(WsConfig::default(), server.clone())
        .router("/ws")
        .layer(layer.clone());
    let app = StreamableHttp::new(HttpConfig::default(), server)
        .router("/mcp")
        .layer(layer)
        .merge(ws);
    tokio::spawn(async move { axum::serve(listener, app).await });
}

/// A server whose `admin` tool needs `mcp:admin` (declared on the server and on the layer) and
/// whose `echo` needs only the layer's `mcp:use`; how many times `admin` ran.
async fn serve_scoped() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let metadata = ProtectedResourceMetadata::new(url.clone(), "http://127.0.0.1:1")
        .scopes(vec!["mcp:use", "mcp:admin"]);
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let server = Server::builder(Implementation::new("scoped", "1.0"))
        .tool("echo", "Says hello", |_: NoArgs, _: Context| async move {
            Ok(CallToolResult::text("hello"))
        })
        .tool("admin", "Needs mcp:admin", move |_: NoArgs, _: Context| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(CallToolResult::text("done")) }
        })
        .tool_scopes("admin", ["mcp:admin"])
        .build();
    let tokens = StaticTokens::new()
        .with("user-token", VerifiedToken::new("ann", ["mcp:use"]))
        .with(
            "admin-token",
            VerifiedToken::new("root", ["mcp:use", "mcp:admin"]),
        );
    let layer = BearerLayer::new(tokens, &metadata)
        .require_scopes(["mcp:use"])
        .tool_scopes("admin", ["mcp:admin"]);
    serve_behind(listener, server, layer);
    (url, ran)
}

/// Issue 26, item 1: a `tools/call` naming its tool twice slipped past the layer's scope
/// check (it read no tool) and ran the last name; over WebSocket no body was inspected at all.
/// Now such a message is no message anywhere (400), and the server checks the tool's scopes
/// from the principal on every transport (`-32003` where no 403 can be given).
#[tokio::test]
async fn a_tool_scope_holds_against_a_repeated_name_and_over_websocket() {
    use std::sync::atomic::Ordering;
    tokio::time::timeout(LIMIT, async {
        let (url, ran) = serve_scoped().await;
        let http = tidewire_tests::http_client();
        let session = raw::open_session(&http, &url, Some("user-token")).await;
        let post = |session: Option<String>, body: String| {
            raw::post(&http, &url, Some("user-token"), session.as_deref(), body).send()
        };
        let initialized = post(
            Some(session.clone()),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        )
        .await
        .expect("answered");
        assert_eq!(initialized.status(), 202);

        let plain = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"admin","arguments":{}}}"#;
        let refused = post(Some(session.clone()), plain.to_owned()).await.expect("answered");
        assert_eq!(refused.status(), 403, "the layer's step-up answer");
        for twice in [
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"admin","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"admin","name":"echo","arguments":{}}}"#,
        ] {
            let answer = post(Some(session.clone()), twice.to_owned())
                .await
                .expect("answered");
            assert_eq!(answer.status(), 400, "{twice}");
            let body: serde_json::Value =
                serde_json::from_slice(&answer.bytes().await.expect("a body")).expect("JSON");
            assert_eq!(body["error"]["code"], -32600, "{body}");
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0, "admin never ran for ann");

        let ws_url = raw::ws_url(&url);
        for (token, allowed) in [("user-token", false), ("admin-token", true)] {
            let socket = WebSocketConnector::new(&ws_url)
                .bearer(token)
                .connect()
                .await
                .expect("the upgrade");
            let client = Client::builder(Implementation::new("t", "1"))
                .connect(socket)
                .await
                .expect("WebSocket");
            let called = client.call_tool("admin", json!({})).await;
            if allowed {
                assert_eq!(called.expect("root may").first_text(), Some("done"));
            } else {
                let error = called.expect_err("ann may not");
                let remote = error.remote().expect("a protocol error");
                assert_eq!(remote.code, -32003, "{remote}");
                assert_eq!(
                    remote.data.as_ref().map(|d| &d["requiredScopes"]),
                    Some(&json!(["mcp:admin"]))
                );
            }
            client.close().await;
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1, "only root's call ran");
    })
    .await
    .expect("within the limit");
}

/// A server with a resource and a template that need `mcp:vault` (`resource_scopes`) and a
/// public resource, behind a layer requiring `mcp:use` (Streamable HTTP at `/mcp`, WebSocket
/// at `/ws`); how many times a scoped resource was read.
async fn serve_vault() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tidewire_core::schema::{ReadResourceResult, Resource, ResourceTemplate};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let metadata = ProtectedResourceMetadata::new(url.clone(), "http://127.0.0.1:1")
        .scopes(vec!["mcp:use", "mcp:vault"]);
    let read = Arc::new(AtomicUsize::new(0));
    let (plan, entry) = (read.clone(), read.clone());
    let server = Server::builder(Implementation::new("vault", "1.0"))
        .resource(
            Resource::new("public://note", "note"),
            |uri, _| async move { Ok(ReadResourceResult::text(uri, "hello")) },
        )
        .resource(Resource::new("secret://plan", "plan"), move |uri, _| {
            plan.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ReadResourceResult::text(uri, "the plan")) }
        })
        .resource_template(
            ResourceTemplate::new("vault://{name}", "vault entries"),
            move |uri, _, _| {
                entry.fetch_add(1, Ordering::SeqCst);
                async move { Ok(ReadResourceResult::text(uri, "an entry")) }
            },
        )
        .resource_scopes("secret://plan", ["mcp:vault"])
        .resource_scopes("vault://{name}", ["mcp:vault"])
        .build();
    let tokens = StaticTokens::new()
        .with("user-token", VerifiedToken::new("ann", ["mcp:use"]))
        .with(
            "vault-token",
            VerifiedToken::new("root", ["mcp:use", "mcp:vault"]),
        );
    let layer = BearerLayer::new(tokens, &metadata).require_scopes(["mcp:use"]);
    serve_behind(listener, server, layer);
    (url, read)
}

/// Issue 26, item 6: a listen (or a subscription, or a read) named any resource the server
/// offers, whoever asked. A resource with its own scopes is now refused, with `-32003` naming
/// them, to a principal without them: read, subscribed to or listened to, on the 2026-07-28
/// wire, in a session and over WebSocket; one with them reads it, and a public resource stays
/// open to all.
#[tokio::test]
async fn a_resource_scope_holds_for_reads_subscriptions_and_listens_on_every_wire() {
    use std::sync::atomic::Ordering;
    use tidewire_core::schema::SubscriptionFilter;
    tokio::time::timeout(LIMIT, async {
        let (url, read) = serve_vault().await;
        let refused = |outcome: Result<(), tidewire_client::ClientError>, what: &str| {
            let error = outcome.expect_err(what);
            let remote = error.remote().unwrap_or_else(|| panic!("{what}: {error}"));
            assert_eq!(remote.code, -32003, "{what}: {remote}");
            assert_eq!(
                remote.data.as_ref().map(|d| &d["requiredScopes"]),
                Some(&json!(["mcp:vault"])),
                "{what}"
            );
        };
        let ws_url = raw::ws_url(&url);
        for wire in ["2026-07-28", "session", "websocket"] {
            for (token, allowed) in [("user-token", false), ("vault-token", true)] {
                let client = match wire {
                    "2026-07-28" => with_token(&url, token, Era::Modern).await,
                    "session" => with_token(&url, token, Era::Legacy).await,
                    _ => {
                        let socket = WebSocketConnector::new(&ws_url)
                            .bearer(token)
                            .connect()
                            .await
                            .expect("the upgrade");
                        Client::builder(Implementation::new("t", "1"))
                            .connect(socket)
                            .await
                            .expect("WebSocket")
                    }
                };
                let public = client.read_resource("public://note").await;
                assert!(public.is_ok(), "{wire}: the public note: {public:?}");
                for uri in ["secret://plan", "vault://keys"] {
                    let what = format!("{wire}, {token}, read {uri}");
                    let outcome = client.read_resource(uri).await.map(|_| ());
                    if allowed {
                        outcome.expect(&what);
                    } else {
                        refused(outcome, &what);
                    }
                    let what = format!("{wire}, {token}, listen to {uri}");
                    let listened = client
                        .listen(SubscriptionFilter {
                            resource_subscriptions: Some(vec![uri.to_owned()]),
                            ..SubscriptionFilter::default()
                        })
                        .await;
                    match listened {
                        Ok(listen) if allowed => drop(listen),
                        Ok(_) => panic!("{what}: listened"),
                        Err(error) if allowed => panic!("{what}: {error}"),
                        Err(error) => refused(Err(error), &what),
                    }
                }
                client.close().await;
            }
        }
        assert_eq!(
            read.load(Ordering::SeqCst),
            6,
            "root's reads only, two per wire"
        );
    })
    .await
    .expect("within the limit");
}

/// Issue 26, item 3: an authorization server whose metadata names a `file:` (or plain remote
/// `http`) authorization endpoint got it opened in the user's browser. The flow now stops at
/// the metadata: the front channel is never asked, no token is requested.
#[tokio::test]
async fn an_authorization_endpoint_that_is_not_https_is_never_opened() {
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;
    use tidewire_auth::client::{AuthError, FrontChannel, OAuthClient, OAuthConfig};

    struct Recorder(Arc<Mutex<Vec<String>>>);
    impl FrontChannel for Recorder {
        fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
            self.0.lock().expect("lock").push(url.to_owned());
            Box::pin(async { Err(AuthError::Authorization("not in this test".to_owned())) })
        }
    }

    tokio::time::timeout(LIMIT, async {
        for hostile in ["file:///etc/passwd", "http://auth.example.com/authorize"] {
            let (issuer, token_requests) = authorization_server(false, Some(hostile)).await;
            let url = protected_by(&issuer).await;
            let opened = Arc::new(Mutex::new(Vec::new()));
            let oauth = OAuthClient::new(OAuthConfig::new(
                "auth-test",
                "http://127.0.0.1:9/callback",
                Recorder(opened.clone()),
            ))
            .expect("client");
            let outcome = oauth.authorize(&url, None).await;
            assert!(
                matches!(
                    outcome,
                    Err(AuthError::InsecureEndpoint {
                        what: "authorization endpoint",
                        ..
                    })
                ),
                "{hostile}: {outcome:?}"
            );
            assert!(opened.lock().expect("lock").is_empty(), "{hostile}");
            assert_eq!(token_requests.load(Ordering::SeqCst), 0);
        }
    })
    .await
    .expect("within the limit");
}

/// A verifier whose one token can be revoked while channels it opened are still open.
#[derive(Clone)]
struct Revocable(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl tidewire_auth::TokenVerifier for Revocable {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<VerifiedToken, tidewire_auth::TokenError>> {
        let live = self.0.load(std::sync::atomic::Ordering::SeqCst) && token == "live-token";
        Box::pin(async move {
            if live {
                Ok(VerifiedToken::new("carol", ["mcp:use"]))
            } else {
                Err(tidewire_auth::TokenError::Invalid("revoked".to_owned()))
            }
        })
    }
}

/// Issue 26, item 2: a token was checked once per WebSocket, so an open socket went on calling
/// tools after the token was revoked (HTTP already answered 401). Now every channel that stays
/// open (a WebSocket, an SSE GET stream) is verified again every `recheck_every` and ends at
/// the first refusal.
#[tokio::test]
async fn a_revoked_token_ends_the_websocket_and_the_sse_stream_it_opened() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use futures::StreamExt as _;

    tokio::time::timeout(LIMIT, async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let metadata = ProtectedResourceMetadata::new(url.clone(), "http://127.0.0.1:1");
        let live = Arc::new(AtomicBool::new(true));
        let layer = BearerLayer::new(Revocable(live.clone()), &metadata)
            .recheck_every(std::time::Duration::from_millis(20));
        let server = Server::builder(Implementation::new("revocable", "1.0"))
            .tool("whoami", "Says who", |_: NoArgs, ctx: Context| async move {
                Ok(CallToolResult::text(ctx.principal().unwrap_or("nobody")))
            })
            .build();
        let ws = WebSocket::new(WsConfig::default(), server.clone())
            .router("/ws")
            .layer(layer.clone());
        let app = StreamableHttp::new(HttpConfig::default(), server)
            .router("/mcp")
            .layer(layer)
            .merge(ws);
        tokio::spawn(async move { axum::serve(listener, app).await });

        let ws_url = raw::ws_url(&url);
        let socket = WebSocketConnector::new(&ws_url)
            .bearer("live-token")
            .connect()
            .await
            .expect("the upgrade");
        let client = Client::builder(Implementation::new("t", "1"))
            .connect(socket)
            .await
            .expect("WebSocket");
        assert_eq!(whoami(&client).await, "carol");

        let http = tidewire_tests::http_client();
        let session = raw::open_session(&http, &url, Some("live-token")).await;
        let stream = http
            .get(&url)
            .bearer_auth("live-token")
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .expect("the GET stream");
        assert_eq!(stream.status(), 200);
        let mut body = stream.bytes_stream();

        live.store(false, Ordering::SeqCst);
        // Both end by themselves: the socket closes, the stream's body ends.
        client.closed().await;
        while let Some(chunk) = body.next().await {
            let _ = chunk;
        }
        let again = http
            .post(&url)
            .bearer_auth("live-token")
            .send()
            .await
            .expect("answered");
        assert_eq!(again.status(), 401);
    })
    .await
    .expect("within the limit: the revoked token's channels ended");
}

/// Issue 26, item 4: without protected-resource metadata, the authorization server metadata at
/// the MCP server's origin could claim any issuer, and credentials kept for that issuer were
/// looked up and sent to the endpoints the document named. Now the issuer must be that origin.
#[tokio::test]
async fn a_server_without_resource_metadata_cannot_claim_another_issuer() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::routing::{get, post};
    use tidewire_auth::client::{
        AuthError, Credentials, HeadlessRedirect, OAuthClient, OAuthConfig,
    };

    tokio::time::timeout(LIMIT, async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("address"));
        let metadata = json!({
            "issuer": "https://login.example.com",
            "authorization_endpoint": format!("{origin}/authorize"),
            "token_endpoint": format!("{origin}/token"),
            "code_challenge_methods_supported": ["S256"],
        })
        .to_string();
        let token_requests = Arc::new(AtomicUsize::new(0));
        let counted = token_requests.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                get(move || {
                    let metadata = metadata.clone();
                    async move { ([(http::header::CONTENT_TYPE, "application/json")], metadata) }
                }),
            )
            .route(
                "/token",
                post(move || {
                    counted.fetch_add(1, Ordering::SeqCst);
                    async { http::StatusCode::BAD_REQUEST }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });

        let oauth = OAuthClient::new(OAuthConfig::new(
            "auth-test",
            "http://127.0.0.1:9/callback",
            HeadlessRedirect::new(),
        ))
        .expect("client");
        // Credentials this user keeps for the real login.example.com.
        oauth.remember(
            "https://login.example.com",
            Credentials::pre_registered("real-client", Some("real-secret".to_owned())),
        );
        let outcome = oauth.authorize(&format!("{origin}/mcp"), None).await;
        assert!(
            matches!(outcome, Err(AuthError::IssuerMismatch { .. })),
            "{outcome:?}"
        );
        assert_eq!(token_requests.load(Ordering::SeqCst), 0);
    })
    .await
    .expect("within the limit");
}

/// Issue 26, item 4: pre-registered credentials configured without an issuer, and the
/// assertions of the grants without a browser, went to whatever authorization server the MCP
/// server named. Now credentials carry the issuer they are for: a server naming another gets
/// `UntrustedIssuer` before anything is sent there, and a browser login registers anew there.
#[tokio::test]
async fn pre_registered_credentials_and_assertions_go_only_to_the_issuer_they_are_for() {
    use std::sync::atomic::Ordering;
    use tidewire_auth::client::{
        AuthError, Credentials, GrantFlow, HeadlessRedirect, OAuthClient, OAuthConfig,
        WorkloadAssertion,
    };

    tokio::time::timeout(LIMIT, async {
        // The MCP server names its own authorization server, not the one the user trusts.
        let (named, token_requests) = authorization_server(false, None).await;
        let url = protected_by(&named).await;
        let secret = || Credentials::pre_registered("real-client", Some("real-secret".into()));
        let oauth = |flow: GrantFlow, issuer: &str| {
            let mut config = OAuthConfig::new(
                "auth-test",
                "http://127.0.0.1:9/callback",
                HeadlessRedirect::new(),
            )
            .with_credentials(secret(), issuer);
            config.flow = flow;
            OAuthClient::new(config).expect("client")
        };
        let flows = || {
            [
                GrantFlow::ClientCredentials,
                GrantFlow::JwtBearer(WorkloadAssertion("platform-issued.jwt".into())),
            ]
        };
        for flow in flows() {
            let what = format!("{flow:?}");
            let outcome = oauth(flow, "https://login.example.com")
                .authorize(&url, None)
                .await;
            match outcome {
                Err(AuthError::UntrustedIssuer {
                    trusted,
                    named: seen,
                }) => {
                    assert_eq!(trusted, "https://login.example.com", "{what}");
                    assert_eq!(seen, named, "{what}");
                }
                other => panic!("{what}: {other:?}"),
            }
            assert_eq!(
                token_requests.load(Ordering::SeqCst),
                0,
                "{what}: nothing sent"
            );
        }
        // Bound to the server's own issuer, the same flows reach its token endpoint (which
        // refuses them: it grants only its own registrations), so the refusal above is the
        // binding's doing.
        for (i, flow) in flows().into_iter().enumerate() {
            let outcome = oauth(flow, &named).authorize(&url, None).await;
            assert!(
                matches!(outcome, Err(AuthError::InvalidGrant | AuthError::Token(_))),
                "{outcome:?}"
            );
            assert_eq!(token_requests.load(Ordering::SeqCst), i + 1);
        }
        // A person's login at the other server registers there: the token it gets was granted
        // to that registration (the token endpoint grants only for its secret), never to the
        // pre-registered client.
        let before = token_requests.load(Ordering::SeqCst);
        let grant = oauth(GrantFlow::AuthorizationCode, "https://login.example.com")
            .authorize(&url, None)
            .await
            .expect("a token, through a registration of its own");
        assert_eq!(grant.client.client_id, "registered");
        assert_eq!(grant.token.access_token, "alice-token");
        assert_eq!(token_requests.load(Ordering::SeqCst), before + 1);
    })
    .await
    .expect("within the limit");
}
