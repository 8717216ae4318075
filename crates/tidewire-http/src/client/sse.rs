//! Reading an SSE stream (the reply to a POST, the GET stream, a resumed stream) into messages.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tidewire_core::transport::Exchange;

use super::error::chain;
use super::reply::answers;
use super::shared::TransportState;
use tidewire_core::http::sse_lines::SseLines;
use tidewire_core::text::panic_message;

/// Why reading the bytes of a stream failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamFailure {
    #[error("{}", chain(.0))]
    Http(reqwest::Error),
    #[error("an SSE event exceeded {limit} bytes")]
    EventTooLarge { limit: usize },
    /// The SSE parser panicked (it never should, on what [`SseLines`] feeds it).
    #[error("the SSE parser failed: {0}")]
    Parser(String),
}

/// The SSE events of a response body.
pub(crate) type Events = BoxStream<'static, Result<Event, EventStreamError<StreamFailure>>>;

/// Parses `response`'s body as SSE. No event may exceed what a message of `max_message` bytes
/// needs, so a server cannot make the client buffer without bound.
pub(crate) fn events(response: reqwest::Response, max_message: usize) -> Events {
    parse(
        response.bytes_stream().map_err(StreamFailure::Http),
        max_message,
    )
}

/// Parses a body as SSE: checked for size, decoded into lines by [`SseLines`] (a leading BOM, bad
/// UTF-8, CR line ends), then given to eventsource-stream. Should the parser panic all the same,
/// the stream ends with [`StreamFailure::Parser`] instead of taking its reader down.
fn parse<S>(body: S, max_message: usize) -> Events
where
    S: Stream<Item = Result<Bytes, StreamFailure>> + Send + 'static,
{
    let limit = max_message
        .saturating_add(max_message / 8)
        .saturating_add(4096);
    let mut guard = EventSizeGuard::new(limit);
    let mut decoder = SseLines::default();
    let lines = body
        .map(move |chunk| -> Vec<Result<Bytes, StreamFailure>> {
            match chunk.and_then(|c| guard.feed(&c).map(|()| c)) {
                Ok(chunk) => decoder.feed(chunk).into_iter().map(Ok).collect(),
                Err(failure) => vec![Err(failure)],
            }
        })
        .flat_map(futures::stream::iter);
    AssertUnwindSafe(lines.eventsource())
        .catch_unwind()
        .map(|item| {
            item.unwrap_or_else(|panic| {
                let failure = StreamFailure::Parser(panic_message(&*panic));
                Err(EventStreamError::Transport(failure))
            })
        })
        .boxed()
}

/// Counts the bytes of the event being received and refuses one that grows past the limit.
#[derive(Debug)]
struct EventSizeGuard {
    limit: usize,
    size: usize,
    line_empty: bool,
    after_cr: bool,
}

impl EventSizeGuard {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            size: 0,
            line_empty: true,
            after_cr: false,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<(), StreamFailure> {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                // The LF of a CRLF ends nothing more.
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    if self.line_empty {
                        // A blank line: the event is complete.
                        self.size = 0;
                    }
                    self.line_empty = true;
                }
                _ => {
                    self.line_empty = false;
                    self.size += 1;
                    if self.size > self.limit {
                        return Err(StreamFailure::EventTooLarge { limit: self.limit });
                    }
                }
            }
        }
        Ok(())
    }
}

/// The longest `retry` the transport honours; a larger one is read as this.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(600);

/// What the transport remembers of one logical stream across reconnections.
#[derive(Debug, Default, Clone)]
pub(crate) struct Cursor {
    /// The id of the last event, sent as `Last-Event-ID` to resume.
    pub(crate) last_event_id: Option<String>,
    /// The reconnection time the server asked for.
    pub(crate) retry: Option<Duration>,
}

/// How reading a stream ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The awaited request got its response (the stream is dropped).
    Answered,
    /// The server ended the stream.
    Closed,
    /// The connection broke.
    Broken(String),
    /// The stream cannot be read on (an oversized event): reconnecting would not help.
    Unusable(String),
    /// Nobody reads the receiver any more.
    Gone,
}

/// The outcome of [`pump`]: how it ended and how many events it saw.
#[derive(Debug)]
pub(crate) struct Pumped {
    pub(crate) end: End,
    pub(crate) events: usize,
}

/// Reads events until the stream ends, handing each message to the receiver. With `awaiting`,
/// stops once this stream carried that request's response, or the request is over.
pub(crate) async fn pump(
    shared: &TransportState,
    mut events: Events,
    cursor: &mut Cursor,
    awaiting: Option<&Exchange>,
) -> Pumped {
    let mut seen = 0;
    let end = loop {
        if awaiting.is_some_and(Exchange::is_over) {
            break End::Answered;
        }
        let Some(item) = events.next().await else {
            break End::Closed;
        };
        let event = match item {
            Ok(event) => event,
            Err(EventStreamError::Transport(StreamFailure::EventTooLarge { limit })) => {
                break End::Unusable(format!("an SSE event exceeded {limit} bytes"));
            }
            Err(EventStreamError::Transport(StreamFailure::Http(e))) => {
                break End::Broken(chain(&e));
            }
            Err(EventStreamError::Transport(failure @ StreamFailure::Parser(_))) => {
                break End::Unusable(failure.to_string());
            }
            Err(EventStreamError::Utf8(e)) => break End::Unusable(format!("invalid UTF-8: {e}")),
            Err(EventStreamError::Parser(e)) => break End::Unusable(format!("bad SSE: {e}")),
        };
        seen += 1;
        if !event.id.is_empty() {
            cursor.last_event_id = Some(event.id.clone());
        }
        if let Some(retry) = event.retry {
            cursor.retry = Some(retry.min(MAX_RETRY));
        }
        if event.event != "message" {
            tracing::debug!(event = %event.event, "ignored an SSE event that is not a message");
            continue;
        }
        if event.data.trim().is_empty() {
            // A priming event: it only carries an id (and maybe retry).
            continue;
        }
        let delivered = match shared.config.codec.decode(event.data.as_bytes()) {
            Ok(message) => {
                let answered = awaiting.is_some_and(|exchange| answers(&message, exchange));
                if !shared.deliver(message).await {
                    break End::Gone;
                }
                if answered {
                    break End::Answered;
                }
                true
            }
            Err(error) => {
                tracing::debug!(%error, "the server sent a bad message on an SSE stream");
                shared.push(Err(error)).await
            }
        };
        if !delivered {
            break End::Gone;
        }
    };
    Pumped { end, events: seen }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_starting_with_a_split_bom_is_parsed() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let chunks: [&'static [u8]; 3] = [b"\xEF", b"\xBB", b"\xBFid: 1\ndata: {}\n\n"];
            let body =
                futures::stream::iter(chunks.map(|c| Ok::<_, StreamFailure>(Bytes::from(c))));
            let events: Vec<_> =
                tokio::time::timeout(Duration::from_secs(5), parse(body, 1024).collect())
                    .await
                    .expect("in time");
            let [Ok(event)] = events.as_slice() else {
                panic!("expected one event, got {events:?}");
            };
            assert_eq!((event.id.as_str(), event.data.as_str()), ("1", "{}"));
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[test]
    fn the_guard_counts_per_event() {
        let mut g = EventSizeGuard::new(10);
        assert!(g.feed(b"data: 1234\n\n").is_ok());
        assert!(g.feed(b"data: 1234\r\n\r\ndata: 12").is_ok());
        assert!(g.feed(b"34\r\r").is_ok());
        assert!(g.feed(b"data: 12345").is_err());
    }

    #[test]
    fn a_split_crlf_is_one_line_end() {
        let mut g = EventSizeGuard::new(12);
        // "\r" then "\n" in the next chunk must not count as a blank line.
        assert!(g.feed(b"data: 1\r").is_ok());
        assert!(g.feed(b"\ndata: 23456").is_err());
    }
}
