//! The open connection: the stream reader task, and the two halves the engine drives.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http::{HeaderMap, HeaderValue, header};
use serde_json::json;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Message, Response};
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
}

type Events = BoxStream<'static, Result<Event, EventStreamError<StreamBroke>>>;

#[derive(Debug, thiserror::Error)]
enum StreamBroke {
    #[error("{}", chain(.0))]
    Http(reqwest::Error),
    #[error("an SSE event grew past {0} bytes")]
    TooLarge(usize),
}

/// A legacy HTTP+SSE connection, from [`SseClient::connect`](super::SseClient::connect): give it
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
    /// For error answers to requests whose POST was refused.
    inbound: mpsc::Sender<Result<Envelope, TransportError>>,
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
    let response = s
        .http
        .get(s.url.clone())
        .headers(s.headers.clone())
        .header(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        )
        .header(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))
        .send()
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
    let endpoint = resolve(&s.url, &endpoint)?;
    let (tx, rx) = mpsc::channel(INBOUND_QUEUE);
    let stop = CancellationToken::new();
    let guard = Arc::new(stop.clone().drop_guard());
    tokio::spawn(read_stream(events, tx.clone(), s.codec, stop.clone()));
    Ok(SseClientTransport {
        sender: SseClientSender {
            http: s.http,
            endpoint,
            headers: s.headers,
            codec: s.codec,
            post_timeout: s.post_timeout,
            inbound: tx,
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

/// The endpoint, resolved against the stream URL; it must stay on the same origin.
fn resolve(base: &reqwest::Url, endpoint: &str) -> Result<reqwest::Url, SseClientError> {
    let bad = |reason: String| SseClientError::BadEndpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let url = base
        .join(endpoint.trim())
        .map_err(|e| bad(format!("not a URL: {e}")))?;
    if url.origin() != base.origin() {
        return Err(bad(format!(
            "it is on another origin than the stream ({})",
            base.origin().ascii_serialization()
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
fn events(response: reqwest::Response, max_message: usize) -> Events {
    let limit = max_message.saturating_add(4096);
    let mut since_blank_line = 0usize;
    let mut line_empty = true;
    response
        .bytes_stream()
        .map_err(StreamBroke::Http)
        .and_then(move |chunk: Bytes| {
            let mut checked = Ok(chunk.clone());
            for byte in chunk.iter() {
                match byte {
                    b'\n' => {
                        if line_empty {
                            since_blank_line = 0;
                        }
                        line_empty = true;
                    }
                    b'\r' => {}
                    _ => {
                        line_empty = false;
                        since_blank_line += 1;
                        if since_blank_line > limit {
                            checked = Err(StreamBroke::TooLarge(limit));
                            break;
                        }
                    }
                }
            }
            async move { checked }
        })
        .eventsource()
        .boxed()
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
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed || self.stop.is_cancelled() {
            return Err(TransportError::closed());
        }
        let body = self.codec.encode(&envelope.message)?;
        let post = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .body(body)
            .send();
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
        let Message::Request(request) = &envelope.message else {
            tracing::warn!(%status, body = %excerpt(&body), "the server refused a POSTed notification or response");
            return Ok(());
        };
        // The request will never be answered on the stream: answer it here.
        let wire = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").cloned())
            .and_then(|e| serde_json::from_value::<ErrorObject>(e).ok());
        let (code, detail) = match wire {
            Some(e) => (ErrorCode(e.code), e.message),
            None => (ErrorCode::CONNECTION_CLOSED, excerpt(&body)),
        };
        let error = ErrorObject::new(code, format!("HTTP {}: {detail}", status.as_u16()))
            .with_data(json!({ "httpStatus": status.as_u16() }));
        let answer = Envelope::new(Response::error(Some(request.id.clone()), error));
        self.inbound
            .send(Ok(answer))
            .await
            .map_err(|_| TransportError::closed())
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
        let ok = resolve(&base, "/messages?sessionId=ab").expect("relative");
        assert_eq!(ok.as_str(), "http://127.0.0.1:8000/messages?sessionId=ab");
        assert!(resolve(&base, "http://127.0.0.1:8000/m?x=1").is_ok());
        for foreign in [
            "http://evil.example/m",
            "https://127.0.0.1:8000/m",
            "http://127.0.0.1:8001/m",
            "//evil.example/m",
        ] {
            assert!(resolve(&base, foreign).is_err(), "{foreign}");
        }
    }
}
