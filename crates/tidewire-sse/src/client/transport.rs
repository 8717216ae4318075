//! The open connection: the stream reader task, and the two halves the engine drives.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, HeaderValue, header};
use tidewire_core::http::AuthorizerSlot;
use tidewire_core::http::sse_lines::SseLines;
use tidewire_core::text::panic_message;
use tidewire_core::transport::TransportProfile;
use tidewire_core::transport::{
    Codec, Envelope, Transport, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::error::{ConnectionLost, SseClientError, chain, excerpt};

/// Messages read from the stream that wait for the engine before the reader waits too.
const INBOUND_QUEUE: usize = 256;

pub(crate) struct Settings {
    pub(crate) url: reqwest::Url,
    pub(crate) headers: HeaderMap,
    pub(crate) http: reqwest::Client,
    pub(crate) codec: Codec,
    pub(crate) post_timeout: Duration,
    /// Supplies `Authorization`, and new credentials after a 401 or 403.
    pub(crate) authorizer: AuthorizerSlot,
}

type Events = BoxStream<'static, Result<Event, EventStreamError<StreamBroke>>>;

#[derive(Debug, thiserror::Error)]
enum StreamBroke {
    #[error("{}", chain(.0))]
    Http(reqwest::Error),
    #[error("an SSE event grew past {0} bytes")]
    TooLarge(usize),
    /// The SSE parser panicked (it never should, on what [`SseLines`] feeds it).
    #[error("the SSE parser failed: {0}")]
    Parser(String),
}

/// A legacy HTTP+SSE connection, from [`LegacySseConnector::connect`](super::LegacySseConnector::connect): give it
/// to the session engine (e.g. `tidewire_client::Client::builder(..).connect`).
#[derive(Debug)]
pub struct SseClientTransport {
    sender: SseClientSender,
    receiver: SseClientReceiver,
}

impl SseClientTransport {
    /// The URL messages are POSTed to (the resolved `endpoint` event).
    pub fn endpoint(&self) -> &str {
        self.sender.endpoint.as_str()
    }
}

impl Transport for SseClientTransport {
    type Sender = SseClientSender;
    type Receiver = SseClientReceiver;

    fn split(self) -> (SseClientSender, SseClientReceiver) {
        (self.sender, self.receiver)
    }
}

/// The sending half: one POST per message.
#[derive(Debug)]
pub struct SseClientSender {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    codec: Codec,
    post_timeout: Duration,
    authorizer: AuthorizerSlot,
    stop: CancellationToken,
    closed: bool,
    _guard: Arc<DropGuard>,
}

/// The receiving half: the `message` events of the stream.
#[derive(Debug)]
pub struct SseClientReceiver {
    rx: mpsc::Receiver<Result<Envelope, TransportError>>,
    stop: CancellationToken,
    _guard: Arc<DropGuard>,
}

fn lost(text: impl Into<String>) -> TransportError {
    TransportError::other(ConnectionLost(text.into()))
}

/// Opens the stream, waits for `endpoint`, and starts the reader.
pub(crate) async fn open(s: Settings) -> Result<SseClientTransport, SseClientError> {
    let get = |_: Vec<u8>| {
        s.http
            .get(s.url.clone())
            .headers(s.headers.clone())
            .header(
                header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            )
            .header(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))
    };
    let response = tidewire_http::client::__send_authorized(&s.authorizer, Vec::new(), get)
        .await
        .map_err(|e| SseClientError::Connect(chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(SseClientError::Status {
            status: status.as_u16(),
            body: excerpt(&body_start(response).await),
        });
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if !content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
    {
        return Err(SseClientError::NotEventStream { content_type });
    }
    // Redirects stay on the origin asked for; a relative endpoint is resolved against where the
    // stream ended up, as a browser's EventSource does.
    let stream_url = response.url().clone();
    let mut events = events(response, s.codec.max_message_size());
    let endpoint = loop {
        match events.next().await {
            Some(Ok(event)) if event.event == "endpoint" => break event.data,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                return Err(SseClientError::NoEndpoint { reason: chain(&e) });
            }
            None => {
                return Err(SseClientError::NoEndpoint {
                    reason: "the stream ended first".to_owned(),
                });
            }
        }
    };
    let endpoint = resolve(&s.url, &stream_url, &endpoint)?;
    let (tx, rx) = mpsc::channel(INBOUND_QUEUE);
    let stop = CancellationToken::new();
    let guard = Arc::new(stop.clone().drop_guard());
    let reader = read_stream(events, tx.clone(), s.codec, stop.clone());
    tokio::spawn(supervise(reader, tx, stop.clone()));
    Ok(SseClientTransport {
        sender: SseClientSender {
            http: s.http,
            endpoint,
            headers: s.headers,
            codec: s.codec,
            post_timeout: s.post_timeout,
            authorizer: s.authorizer,
            stop: stop.clone(),
            closed: false,
            _guard: guard.clone(),
        },
        receiver: SseClientReceiver {
            rx,
            stop,
            _guard: guard,
        },
    })
}

/// The endpoint, resolved against the URL the stream came from (`stream`); it must stay on the
/// origin of the URL asked for (`requested`).
fn resolve(
    requested: &reqwest::Url,
    stream: &reqwest::Url,
    endpoint: &str,
) -> Result<reqwest::Url, SseClientError> {
    let bad = |reason: String| SseClientError::BadEndpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let url = stream
        .join(endpoint.trim())
        .map_err(|e| bad(format!("not a URL: {e}")))?;
    if url.origin() != requested.origin() {
        return Err(bad(format!(
            "it is on another origin than the stream ({})",
            requested.origin().ascii_serialization()
        )));
    }
    Ok(url)
}

/// The first few KiB of an error body.
async fn body_start(response: reqwest::Response) -> String {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while body.len() < 4096 {
        match stream.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(4096);
    String::from_utf8_lossy(&body).into_owned()
}

/// The SSE events of a body; an event may not grow past what a message of `max_message` bytes
/// needs, so a server cannot make the client buffer without bound.
///
/// The body is decoded into lines by [`SseLines`] (a leading BOM, bad UTF-8, CR line ends) before
/// eventsource-stream parses it; should the parser panic all the same, the stream ends with
/// [`StreamBroke::Parser`] instead of taking its reader down.
fn events(response: reqwest::Response, max_message: usize) -> Events {
    let limit = max_message.saturating_add(4096);
    let mut since_blank_line = 0usize;
    let mut line_empty = true;
    let mut after_cr = false;
    let mut decoder = SseLines::default();
    let lines = response
        .bytes_stream()
        .map(move |chunk| -> Vec<Result<Bytes, StreamBroke>> {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => return vec![Err(StreamBroke::Http(e))],
            };
            for &byte in chunk.iter() {
                let was_cr = std::mem::replace(&mut after_cr, byte == b'\r');
                match byte {
                    // The LF of a CRLF ends nothing more.
                    b'\n' if was_cr => {}
                    b'\n' | b'\r' => {
                        if line_empty {
                            since_blank_line = 0;
                        }
                        line_empty = true;
                    }
                    _ => {
                        line_empty = false;
                        since_blank_line += 1;
                        if since_blank_line > limit {
                            return vec![Err(StreamBroke::TooLarge(limit))];
                        }
                    }
                }
            }
            decoder.feed(chunk).into_iter().map(Ok).collect()
        })
        .flat_map(futures::stream::iter);
    AssertUnwindSafe(lines.eventsource())
        .catch_unwind()
        .map(|item| {
            item.unwrap_or_else(|panic| {
                let failure = StreamBroke::Parser(panic_message(&*panic));
                Err(EventStreamError::Transport(failure))
            })
        })
        .boxed()
}

/// Runs the stream reader. Should it panic, the receiver gets a fatal error saying so, which ends
/// the connection and fails every call in flight, instead of leaving them waiting for replies
/// nobody reads any more.
async fn supervise(
    reader: impl Future<Output = ()>,
    tx: mpsc::Sender<Result<Envelope, TransportError>>,
    stop: CancellationToken,
) {
    let Err(panic) = AssertUnwindSafe(reader).catch_unwind().await else {
        return;
    };
    let reason = panic_message(&*panic);
    tracing::error!(%reason, "the task reading the legacy SSE stream panicked");
    let error = lost(format!(
        "the task reading the SSE stream failed ({reason}); the session is over, connect again \
         for a new one"
    ));
    tokio::select! {
        biased;
        () = stop.cancelled() => {}
        _ = tx.send(Err(error)) => {}
    }
}

/// Reads `message` events into the inbound queue until the stream ends or the transport stops.
async fn read_stream(
    mut events: Events,
    tx: mpsc::Sender<Result<Envelope, TransportError>>,
    codec: Codec,
    stop: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        let item = match event {
            Some(Ok(event)) if event.event == "message" => {
                codec.decode(event.data.as_bytes()).map(Envelope::new)
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => Err(lost(format!(
                "the SSE stream broke ({}); the session is over, connect again for a new one",
                chain(&e)
            ))),
            None => Err(lost(
                "the server closed the SSE stream; the session is over, connect again for a new one",
            )),
        };
        let fatal = item.as_ref().is_err_and(|e| !e.is_recoverable());
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            sent = tx.send(item) => if sent.is_err() { return },
        }
        if fatal {
            return;
        }
    }
}

impl TransportSender for SseClientSender {
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM
            .sessions_only()
            .tracking_requests()
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed || self.stop.is_cancelled() {
            return Err(TransportError::closed());
        }
        let body = self.codec.encode_envelope_to_vec(&envelope)?;
        let build = |body: Vec<u8>| {
            self.http
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )
                .body(body)
        };
        let post = tidewire_http::client::__send_authorized(&self.authorizer, body, build);
        let response = match tokio::time::timeout(self.post_timeout, post).await {
            Err(_) => {
                return Err(lost(format!(
                    "a POST to {} took longer than {:?}",
                    self.endpoint, self.post_timeout
                )));
            }
            Ok(Err(e)) => {
                return Err(lost(format!(
                    "a POST to {} failed: {}",
                    self.endpoint,
                    chain(&e)
                )));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = body_start(response).await;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(lost(format!(
                "the server no longer knows this session (HTTP 404: {}); connect again for a new one",
                excerpt(&body)
            )));
        }
        let Some(exchange) = &envelope.exchange else {
            tracing::warn!(%status, body = %excerpt(&body), "the server refused a POSTed message");
            return Ok(());
        };
        // The request will never be answered on the stream: it fails here.
        exchange.fail_transport(TransportError::http(status.as_u16(), &body));
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.closed = true;
        self.stop.cancel();
        Ok(())
    }
}

impl TransportReceiver for SseClientReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        tokio::select! {
            biased;
            item = self.rx.recv() => item,
            () = self.stop.cancelled() => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_stay_on_the_stream_origin() {
        let base = reqwest::Url::parse("http://127.0.0.1:8000/sse").expect("url");
        let ok = resolve(&base, &base, "/messages?sessionId=ab").expect("relative");
        assert_eq!(ok.as_str(), "http://127.0.0.1:8000/messages?sessionId=ab");
        assert!(resolve(&base, &base, "http://127.0.0.1:8000/m?x=1").is_ok());
        for foreign in [
            "http://evil.example/m",
            "https://127.0.0.1:8000/m",
            "http://127.0.0.1:8001/m",
            "//evil.example/m",
        ] {
            assert!(resolve(&base, &base, foreign).is_err(), "{foreign}");
        }
        // After a redirect within the origin, a relative endpoint follows the stream's new path;
        // a stream that ended up on another origin cannot lend it its own.
        let moved = reqwest::Url::parse("http://127.0.0.1:8000/v2/sse").expect("url");
        let ok = resolve(&base, &moved, "messages?sessionId=ab").expect("relative");
        assert_eq!(
            ok.as_str(),
            "http://127.0.0.1:8000/v2/messages?sessionId=ab"
        );
        let away = reqwest::Url::parse("http://evil.example/sse").expect("url");
        assert!(resolve(&base, &away, "/messages").is_err());
    }

    fn explode() {
        panic!("the parser broke");
    }

    #[tokio::test]
    async fn a_reader_that_panics_ends_the_connection_with_a_fatal_error() {
        let run = async {
            let (tx, mut rx) = mpsc::channel(4);
            let stop = CancellationToken::new();
            supervise(async { explode() }, tx, stop).await;
            let error = rx
                .recv()
                .await
                .expect("an item")
                .expect_err("a fatal error");
            assert!(!error.is_recoverable());
            let reason = std::error::Error::source(&error)
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(reason.contains("the parser broke"), "{reason}");
        };
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("in time");
    }
}
