//! The legacy HTTP+SSE server's HTTP rules, the client's refusals (an endpoint or a redirect to
//! another origin), and a stream starting with a byte-order mark.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tidewire_client::Client;
use tidewire_core::jsonrpc::Message;
use tidewire_core::schema::Implementation;
use tidewire_core::transport::{Transport, TransportReceiver};
use tidewire_sse::client::{LegacySseConnector, SseClientError};
use tidewire_sse::server::SseConfig;
use tidewire_tests::harness::start_sse;

use tidewire_tests::LIMIT;

/// An open stream, read as text.
struct RawStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    text: String,
}

impl std::fmt::Debug for RawStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawStream")
            .field("text", &self.text)
            .finish()
    }
}

impl RawStream {
    async fn open(url: &str, headers: &[(&str, &str)]) -> Result<Self, reqwest::Response> {
        let mut request = tidewire_tests::http_client().get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("GET");
        if !response.status().is_success() {
            return Err(response);
        }
        Ok(Self {
            body: response.bytes_stream().boxed(),
            text: String::new(),
        })
    }

    /// Reads until the text read so far contains `needle`; false when the stream ended first.
    async fn until(&mut self, needle: &str) -> bool {
        while !self.text.contains(needle) {
            match self.body.next().await {
                Some(Ok(chunk)) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return false,
            }
        }
        true
    }

    /// The POST URL the endpoint event named.
    async fn endpoint(&mut self, base: &str) -> String {
        assert!(self.until("\n\n").await, "an event");
        let first = self
            .text
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_owned();
        let path = first
            .strip_prefix("event: endpoint\ndata: ")
            .unwrap_or_else(|| panic!("the first event is endpoint: {first:?}"));
        let origin = base.strip_suffix("/sse").expect("a /sse URL");
        format!("{origin}{path}")
    }
}

async fn post(url: &str, content_type: &str, body: impl Into<reqwest::Body>) -> (u16, String) {
    let response = tidewire_tests::http_client()
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_and_its_refusals() {
    tokio::time::timeout(LIMIT, async {
        let config = SseConfig::default().max_body(1024);
        let (url, _server, sse) = start_sse(config).await;
        let mut stream = RawStream::open(&url, &[]).await.expect("a stream");
        let endpoint = stream.endpoint(&url).await;
        let id = endpoint
            .rsplit("sessionId=")
            .next()
            .unwrap_or_default()
            .to_owned();
        assert!(endpoint.contains("/messages?sessionId="), "{endpoint}");
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(sse.session_count(), 1);

        // A request is accepted with 202 and answered on the stream.
        let ping = r#"{"jsonrpc":"2.0","id":41,"method":"ping"}"#;
        assert_eq!(post(&endpoint, "application/json", ping).await.0, 202);
        assert!(stream.until("event: message\ndata: {").await);
        assert!(stream.until(r#""id":41"#).await, "{}", stream.text);

        // Bad bodies, unknown and missing sessions.
        let (status, body) = post(&endpoint, "application/json", "{not json").await;
        assert_eq!(status, 400);
        let body: serde_json::Value = serde_json::from_str(&body).expect("a JSON-RPC error");
        assert_eq!(body["error"]["code"], json!(-32700));
        let (status, body) = post(
            &endpoint,
            "application/json",
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("-32600"), "{body}");
        assert_eq!(post(&endpoint, "text/plain", ping).await.0, 415);
        assert_eq!(
            post(&endpoint, "application/json", "x".repeat(2048))
                .await
                .0,
            413
        );
        let unknown = endpoint.replace(&id, "00000000000000000000000000000000");
        let (status, body) = post(&unknown, "application/json", ping).await;
        assert_eq!(status, 404);
        assert!(body.contains("Session not found"), "{body}");
        let missing = endpoint.split('?').next().unwrap_or_default().to_owned();
        assert_eq!(post(&missing, "application/json", ping).await.0, 400);

        // Host and Origin.
        let refused = RawStream::open(&url, &[("origin", "https://evil.example")]).await;
        assert_eq!(refused.err().map(|r| r.status().as_u16()), Some(403));
        let refused = RawStream::open(&url, &[("host", "evil.example")]).await;
        assert_eq!(refused.err().map(|r| r.status().as_u16()), Some(403));
        let response = tidewire_tests::http_client()
            .post(&endpoint)
            .header("content-type", "application/json")
            .header("origin", "http://evil.example")
            .body(ping)
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status().as_u16(), 403);

        // Closing the stream ends the session.
        drop(stream);
        tokio::time::timeout(LIMIT, async {
            while sse.session_count() != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the session ends with its stream");
        assert_eq!(post(&endpoint, "application/json", ping).await.0, 404);
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cap_keep_alive_and_idle_expiry() {
    tokio::time::timeout(LIMIT, async {
        let config = SseConfig::default()
            .max_sessions(1)
            .keep_alive(Duration::from_millis(20))
            .idle_timeout(Duration::from_millis(300));
        let (url, _server, sse) = start_sse(config).await;
        let mut first = RawStream::open(&url, &[]).await.expect("a stream");
        let _ = first.endpoint(&url).await;
        let full = RawStream::open(&url, &[]).await.expect_err("refused");
        assert_eq!(full.status().as_u16(), 503);
        assert!(full.headers().contains_key("retry-after"));
        assert!(first.until(": keep-alive\n\n").await, "keep-alive comments");
        // Nothing goes either way: the session expires and its stream ends.
        assert!(!first.until("never sent").await, "the stream ends");
        assert_eq!(sse.session_count(), 0);
        let mut again = RawStream::open(&url, &[]).await.expect("room again");
        let _ = again.endpoint(&url).await;
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_call_longer_than_the_idle_timeout_is_not_expired() {
    tokio::time::timeout(LIMIT, async {
        // The session is idle after 200 ms of silence, but a request is running: the call
        // sends nothing for 800 ms (no progress token) and must still get its answer.
        let config = SseConfig::default().idle_timeout(Duration::from_millis(200));
        let (url, _server, sse) = start_sse(config).await;
        let transport = LegacySseConnector::new(&url)
            .connect()
            .await
            .expect("the stream opens");
        let client = Client::builder(Implementation::new("silent", "1"))
            .connect(transport)
            .await
            .expect("legacy");
        let result = client
            .call_tool("crawl", json!({"urls": ["https://a"], "delay_ms": 800}))
            .send()
            .await
            .expect("sent")
            .await
            .expect("answered, not expired");
        let result = serde_json::to_value(&result).expect("json");
        assert_eq!(result["content"][0]["text"], "Crawled 1 URLs");
        // Once nothing runs, the silence counts again: the session expires and its stream
        // ends, which ends the client's connection.
        tokio::time::timeout(Duration::from_secs(5), client.closed())
            .await
            .expect("the idle session expires afterwards");
        assert_eq!(sse.session_count(), 0);
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_refuses_an_endpoint_on_another_origin() {
    tokio::time::timeout(LIMIT, async {
        let app = axum::Router::new().route(
            "/sse",
            axum::routing::get(|| async {
                (
                    [("content-type", "text/event-stream")],
                    "event: endpoint\ndata: http://evil.example/messages?sessionId=1\n\n",
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let err = LegacySseConnector::new(format!("http://{addr}/sse"))
            .connect()
            .await
            .expect_err("refused");
        assert!(matches!(err, SseClientError::BadEndpoint { .. }), "{err}");
        let err = LegacySseConnector::new(format!("http://{addr}/nothing"))
            .connect()
            .await
            .expect_err("404");
        assert!(
            matches!(err, SseClientError::Status { status: 404, .. }),
            "{err}"
        );
    })
    .await
    .expect("in time");
}

/// Serves `app` on 127.0.0.1, on a port of its own.
async fn serve_app(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_a_stream_that_starts_with_a_byte_order_mark() {
    // eventsource-stream 0.2.3 panics on such a stream. The BOM is cut across two HTTP chunks.
    tokio::time::timeout(LIMIT, async {
        let app = axum::Router::new().route(
            "/sse",
            axum::routing::get(|| async {
                let chunks: [&'static [u8]; 3] = [
                    b"\xEF",
                    b"\xBB\xBFevent: endpoint\ndata: /messages?sessionId=1\n\n",
                    b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\
                      \"method\":\"notifications/tools/list_changed\"}\r\n\r\n",
                ];
                let body = futures::stream::iter(
                    chunks.map(|chunk| Ok::<_, Infallible>(bytes::Bytes::from(chunk))),
                );
                (
                    [("content-type", "text/event-stream")],
                    axum::body::Body::from_stream(body),
                )
            }),
        );
        let addr = serve_app(app).await;
        let transport = LegacySseConnector::new(format!("http://{addr}/sse"))
            .connect()
            .await
            .expect("the endpoint event is read");
        assert_eq!(
            transport.endpoint(),
            format!("http://{addr}/messages?sessionId=1")
        );
        let (_sender, mut receiver) = transport.split();
        let envelope = receiver.recv().await.expect("an item").expect("a message");
        match envelope.message {
            Message::Notification(note) => {
                assert_eq!(note.method, "notifications/tools/list_changed");
            }
            other => panic!("expected the notification, got {other:?}"),
        }
        let end = receiver.recv().await.expect("the end is reported");
        assert!(end.is_err_and(|e| !e.is_recoverable()), "the stream ended");
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_refuses_a_redirect_to_another_origin() {
    tokio::time::timeout(LIMIT, async {
        // Where the redirect points: a valid legacy stream, which must never be asked.
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let elsewhere = axum::Router::new().route(
            "/sse",
            axum::routing::get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async {
                    (
                        [("content-type", "text/event-stream")],
                        "event: endpoint\ndata: /messages?sessionId=1\n\n",
                    )
                }
            }),
        );
        let target = format!("http://{}/sse", serve_app(elsewhere).await);
        let location = target.clone();
        let app = axum::Router::new().route(
            "/sse",
            axum::routing::get(move || {
                let location = location.clone();
                async move {
                    (
                        axum::http::StatusCode::TEMPORARY_REDIRECT,
                        [("location", location)],
                    )
                }
            }),
        );
        let addr = serve_app(app).await;
        let err = LegacySseConnector::new(format!("http://{addr}/sse"))
            .header("x-api-key", "secret-key")
            .connect()
            .await
            .expect_err("the redirect is refused");
        let SseClientError::Connect(reason) = &err else {
            panic!("expected a connection error, got {err:?}");
        };
        assert!(reason.contains(&target), "{reason}");
        assert!(reason.contains("another origin"), "{reason}");
        assert!(!reason.contains("secret-key"), "{reason}");
        assert_eq!(
            asked.load(Ordering::SeqCst),
            0,
            "the other origin was asked"
        );
    })
    .await
    .expect("in time");
}
