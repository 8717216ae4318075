//! The WebSocket upgrade's checks, and the client's handshake refusals.

use tidewire_tests::harness::start_ws;
use tidewire_ws::client::{WebSocketConnector, WsClientError};
use tidewire_ws::server::WsConfig;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use tidewire_tests::LIMIT;

/// Tries an upgrade with these headers; the HTTP status of a refusal, or 101.
async fn upgrade_status(url: &str, headers: &[(&'static str, &str)]) -> u16 {
    let mut request = url.into_client_request().expect("request");
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(*name, value.parse().expect("header value"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((_socket, response)) => response.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("unexpected failure: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_the_server_itself_may_connect() {
    tokio::time::timeout(LIMIT, async {
        let (url, _server, _ws) = start_ws(WsConfig::default()).await;
        let own = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("authority");
        let mcp = ("sec-websocket-protocol", "mcp");
        let origin = format!("http://{own}");
        assert_eq!(upgrade_status(&url, &[mcp, ("origin", &origin)]).await, 101);
        let listed = WsConfig::default().allow_origin("http://localhost:5173");
        let (url, _server, _ws) = start_ws(listed).await;
        assert_eq!(
            upgrade_status(&url, &[mcp, ("origin", "http://localhost:5173")]).await,
            101
        );
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_is_checked() {
    tokio::time::timeout(LIMIT, async {
        let (url, _server, ws) = start_ws(WsConfig::default().max_sessions(1)).await;
        let mcp = ("sec-websocket-protocol", "mcp");
        assert_eq!(
            upgrade_status(&url, &[mcp, ("origin", "https://evil.example")]).await,
            403
        );
        assert_eq!(
            upgrade_status(&url, &[mcp, ("host", "evil.example")]).await,
            403
        );
        // Another page on localhost (any other port) must not drive the endpoint.
        let own = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("authority");
        let port = own.rsplit(':').next().expect("port");
        let other_port = if port == "9" { "10" } else { "9" };
        for origin in [
            format!("http://127.0.0.1:{other_port}"),
            format!("http://localhost:{port}"),
        ] {
            assert_eq!(
                upgrade_status(&url, &[mcp, ("origin", &origin)]).await,
                403,
                "{origin}"
            );
        }

        assert_eq!(
            upgrade_status(&url, &[("sec-websocket-protocol", "graphql-ws")]).await,
            400
        );
        let plain = reqwest::get(url.replace("ws://", "http://"))
            .await
            .expect("GET");
        assert!(plain.status().is_client_error(), "{}", plain.status());
        // One connection fills the table; the next upgrade is told to come back later.
        let first = WebSocketConnector::new(&url)
            .connect()
            .await
            .expect("first");
        tokio::time::timeout(LIMIT, async {
            while ws.connection_count() != 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("counted");
        assert_eq!(upgrade_status(&url, &[mcp]).await, 503);
        drop(first);
        // A client that offers no subprotocol is served too.
        tokio::time::timeout(LIMIT, async {
            while ws.connection_count() != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the first connection ends");
        assert_eq!(upgrade_status(&url, &[]).await, 101);
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_refuses_what_is_not_an_mcp_websocket() {
    tokio::time::timeout(LIMIT, async {
        // A WebSocket server that does not choose the subprotocol.
        let app = axum::Router::new().route(
            "/ws",
            axum::routing::get(|ws: axum::extract::ws::WebSocketUpgrade| async move {
                ws.on_upgrade(|_socket| async {})
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let err = WebSocketConnector::new(format!("ws://{addr}/ws"))
            .connect()
            .await
            .expect_err("no subprotocol chosen");
        assert!(matches!(err, WsClientError::Handshake { .. }), "{err}");
        let err = WebSocketConnector::new(format!("ws://{addr}/elsewhere"))
            .connect()
            .await
            .expect_err("404");
        assert!(err.to_string().contains("404"), "{err}");
        let err = WebSocketConnector::new(format!("http://{addr}/ws"))
            .connect()
            .await
            .expect_err("not ws://");
        assert!(matches!(err, WsClientError::InvalidUrl { .. }), "{err}");
    })
    .await
    .expect("in time");
}

/// What the engine refuses on a WebSocket is counted by reason (`Lifecycle::refusals`, which
/// `tidewire serve` reports as `tidewire.server.refusals`): a message that is no JSON-RPC, and
/// a new stateless request while the server drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_counts_what_it_refuses_by_reason() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    tokio::time::timeout(LIMIT, async {
        let (url, server, _ws) = start_ws(WsConfig::default()).await;
        let mut request = url.as_str().into_client_request().expect("request");
        request
            .headers_mut()
            .insert("sec-websocket-protocol", "mcp".parse().expect("value"));
        let (mut socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("upgraded");
        let mut answer = async |text: &str| -> serde_json::Value {
            socket.send(Message::text(text)).await.expect("sent");
            loop {
                match socket.next().await.expect("open").expect("a frame") {
                    Message::Text(text) => {
                        return serde_json::from_str(text.as_str()).expect("JSON");
                    }
                    Message::Ping(_) | Message::Pong(_) => {}
                    other => panic!("unexpected frame: {other:?}"),
                }
            }
        };
        assert_eq!(server.lifecycle().refusals(), Default::default());

        let malformed = answer("{not json").await;
        assert_eq!(malformed["error"]["code"], -32700, "{malformed}");
        server.lifecycle().start_draining();
        let call = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }},
        });
        let refused = answer(&call.to_string()).await;
        assert_eq!(refused["error"]["code"], -32000, "{refused}");

        let refusals = server.lifecycle().refusals();
        assert_eq!(
            (
                refusals.malformed,
                refusals.draining,
                refusals.too_large,
                refusals.busy
            ),
            (1, 1, 0, 0),
            "{refusals:?}"
        );
    })
    .await
    .expect("in time");
}
