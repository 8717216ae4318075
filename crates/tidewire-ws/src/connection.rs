//! One WebSocket connection, either side: a reader task and a writer task around the socket,
//! and the transport halves the engine drives.
//!
//! The socket library's message type never leaves the server and client modules: both convert
//! to [`Frame`] and hand a `Sink<Frame>` and a `Stream` of frames to [`start`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Sink, SinkExt, Stream, StreamExt};
use tidewire_core::transport::{
    Codec, Envelope, Principal, Transport, TransportError, TransportProfile, TransportReceiver,
    TransportSender,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The close codes this transport sends (RFC 6455 §7.4.1).
pub mod close_code {
    /// The session ended normally.
    pub const NORMAL: u16 = 1000;
    /// The peer stopped answering pings.
    pub const GOING_AWAY: u16 = 1001;
    /// A binary frame: this transport carries text frames only.
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// A text frame that is not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// A message over the size limit.
    pub const TOO_BIG: u16 = 1009;
}

/// A WebSocket frame, as this transport sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    Text(String),
    Binary,
    Ping(bytes::Bytes),
    Pong,
    Close(Option<(u16, String)>),
}

/// A frame the socket could not deliver, classified.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// A message over the limit.
    TooBig(String),
    /// Text that is not UTF-8.
    NotUtf8(String),
    /// Anything else: the connection is broken.
    Broken(String),
}

#[cfg(feature = "server")]
impl ReadFailure {
    /// Classifies a socket library's read error by its text (axum's errors carry no kind).
    pub(crate) fn classify(text: String) -> Self {
        let lower = text.to_ascii_lowercase();
        if lower.contains("space limit") || lower.contains("too long") || lower.contains("too big")
        {
            Self::TooBig(text)
        } else if lower.contains("utf-8") || lower.contains("utf8") {
            Self::NotUtf8(text)
        } else {
            Self::Broken(text)
        }
    }
}

/// Timing and limits of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) codec: Codec,
    pub(crate) ping_interval: Duration,
    pub(crate) pong_timeout: Duration,
    pub(crate) queue: usize,
}

/// Why the connection ended; the `source()` of the fatal error the receiver yields.
#[derive(Debug)]
struct ConnectionLost(String);

impl std::fmt::Display for ConnectionLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectionLost {}

fn lost(text: impl Into<String>) -> TransportError {
    TransportError::other(ConnectionLost(text.into()))
}

enum Control {
    Close(u16, String),
}

/// What the engine's sender queues for the writer, in order.
#[derive(Debug)]
enum Out {
    Text(String),
    Close,
}

/// A WebSocket connection carrying MCP: give it to the session engine, which splits it.
#[derive(Debug)]
pub struct WsTransport {
    sender: WsSender,
    receiver: WsReceiver,
}

impl WsTransport {
    /// Hands `principal` (from an authentication layer in front of the upgrade) to every
    /// message the connection receives.
    #[cfg(feature = "server")]
    pub(crate) fn acting_for(mut self, principal: Option<Principal>) -> Self {
        self.receiver.principal = principal;
        self
    }
}

impl Transport for WsTransport {
    type Sender = WsSender;
    type Receiver = WsReceiver;

    fn split(self) -> (WsSender, WsReceiver) {
        (self.sender, self.receiver)
    }
}

/// The sending half: each message goes out as one text frame.
#[derive(Debug)]
pub struct WsSender {
    outbound: mpsc::Sender<Out>,
    codec: Codec,
    stop: CancellationToken,
    closed: bool,
}

/// The receiving half: one message per text frame from the peer.
///
/// When the connection ends for any reason it yields one fatal error naming the reason, so the
/// engine fails the calls in flight and cancels the requests it was running at once: there is
/// no resumption on WebSocket.
#[derive(Debug)]
pub struct WsReceiver {
    rx: mpsc::Receiver<Result<Envelope, TransportError>>,
    /// Who the upgrade request acted for, handed to every message (server side).
    principal: Option<Principal>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Close(code, reason) => write!(f, "Close({code}, {reason:?})"),
        }
    }
}

/// Starts the reader and writer tasks of a connection over `sink` and `stream`.
pub(crate) fn start<Si, St, E>(sink: Si, stream: St, settings: Settings) -> WsTransport
where
    Si: Sink<Frame, Error = E> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
    St: Stream<Item = Result<Frame, ReadFailure>> + Send + Unpin + 'static,
{
    let (in_tx, in_rx) = mpsc::channel(settings.queue);
    let (out_tx, out_rx) = mpsc::channel(settings.queue);
    let (control_tx, control_rx) = mpsc::channel(4);
    let stop = CancellationToken::new();
    let last_heard = Arc::new(Mutex::new(Instant::now()));
    tokio::spawn(read(
        stream,
        in_tx,
        control_tx,
        settings,
        stop.clone(),
        last_heard.clone(),
    ));
    tokio::spawn(write(
        sink,
        out_rx,
        control_rx,
        settings,
        stop.clone(),
        last_heard,
    ));
    WsTransport {
        sender: WsSender {
            outbound: out_tx,
            codec: settings.codec,
            stop,
            closed: false,
        },
        receiver: WsReceiver {
            rx: in_rx,
            principal: None,
        },
    }
}

fn heard(last_heard: &Mutex<Instant>) {
    *last_heard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
}

async fn read<St>(
    mut stream: St,
    inbound: mpsc::Sender<Result<Envelope, TransportError>>,
    control: mpsc::Sender<Control>,
    settings: Settings,
    stop: CancellationToken,
    last_heard: Arc<Mutex<Instant>>,
) where
    St: Stream<Item = Result<Frame, ReadFailure>> + Send + Unpin + 'static,
{
    let limit = settings.codec.max_message_size();
    let closing = |code: u16, reason: String| {
        let control = control.clone();
        async move {
            let _ = control.send(Control::Close(code, reason)).await;
        }
    };
    let reason = loop {
        let frame = tokio::select! {
            biased;
            () = stop.cancelled() => break "the WebSocket connection was closed".to_owned(),
            frame = stream.next() => frame,
        };
        heard(&last_heard);
        let text = match frame {
            None => break "the peer closed the WebSocket connection".to_owned(),
            Some(Ok(Frame::Text(text))) => text,
            Some(Ok(Frame::Ping(_) | Frame::Pong)) => continue,
            Some(Ok(Frame::Close(frame))) => {
                break match frame {
                    Some((code, reason)) if !reason.is_empty() => {
                        format!("the peer closed the WebSocket connection ({code}: {reason})")
                    }
                    Some((code, _)) => {
                        format!("the peer closed the WebSocket connection ({code})")
                    }
                    None => "the peer closed the WebSocket connection".to_owned(),
                };
            }
            Some(Ok(Frame::Binary)) => {
                let reason =
                    "binary frames are not supported: send each JSON-RPC message as one text frame";
                closing(close_code::UNSUPPORTED_DATA, reason.to_owned()).await;
                break format!(
                    "closed the WebSocket connection: the peer sent a binary frame ({reason})"
                );
            }
            Some(Err(ReadFailure::TooBig(detail))) => {
                let reason = format!("message too big: the limit is {limit} bytes");
                closing(close_code::TOO_BIG, reason.clone()).await;
                break format!("closed the WebSocket connection: {reason} ({detail})");
            }
            Some(Err(ReadFailure::NotUtf8(detail))) => {
                let reason = "a text frame was not valid UTF-8".to_owned();
                closing(close_code::INVALID_PAYLOAD, reason.clone()).await;
                break format!("closed the WebSocket connection: {reason} ({detail})");
            }
            Some(Err(ReadFailure::Broken(detail))) => {
                break format!("the WebSocket connection broke: {detail}");
            }
        };
        if text.len() > limit {
            let reason = format!("message too big: the limit is {limit} bytes");
            closing(close_code::TOO_BIG, reason.clone()).await;
            break format!("closed the WebSocket connection: {reason}");
        }
        let item = settings.codec.decode(text.as_bytes()).map(Envelope::new);
        tokio::select! {
            biased;
            () = stop.cancelled() => break "the WebSocket connection was closed".to_owned(),
            sent = inbound.send(item) => if sent.is_err() { return },
        }
    };
    tracing::debug!(%reason, "a WebSocket connection ended");
    // The writer may still send a close frame the reader asked for before it stops.
    let _ = inbound.send(Err(lost(reason))).await;
    drop(control);
    stop.cancel();
}

/// What the writer does at a keep-alive tick.
#[derive(Debug, PartialEq, Eq)]
enum Keepalive {
    /// The peer was heard lately, or a ping is out and still has time.
    Wait,
    /// Ping the peer.
    Ping,
    /// A ping went unanswered for `pong_timeout`: the peer is gone.
    GiveUp,
}

/// The keep-alive rule at `now`, for a peer last `heard` and last `pinged`. A ping counts as
/// answered by anything heard after it (a pong, or any frame); one unanswered for
/// `pong_timeout` ends the connection. A peer heard within half an interval needs no ping. The
/// rule looks at the outstanding ping, not at silence alone: ticks come every interval, so a
/// peer that answers each ping at once is silent for nearly two intervals by the tick after the
/// next, and a rule on silence alone dropped such a peer, one that answered every ping.
fn keepalive(
    heard: Instant,
    pinged: Option<Instant>,
    now: Instant,
    settings: &Settings,
) -> Keepalive {
    match pinged {
        Some(sent) if heard < sent => {
            if now.saturating_duration_since(sent) >= settings.pong_timeout {
                Keepalive::GiveUp
            } else {
                Keepalive::Wait
            }
        }
        _ if now.saturating_duration_since(heard) < settings.ping_interval / 2 => Keepalive::Wait,
        _ => Keepalive::Ping,
    }
}

async fn write<Si, E>(
    mut sink: Si,
    mut outbound: mpsc::Receiver<Out>,
    mut control: mpsc::Receiver<Control>,
    settings: Settings,
    stop: CancellationToken,
    last_heard: Arc<Mutex<Instant>>,
) where
    Si: Sink<Frame, Error = E> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let mut tick = tokio::time::interval_at(
        Instant::now() + settings.ping_interval,
        settings.ping_interval,
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When the last ping went out (none yet, or none since the peer was last heard).
    let mut pinged: Option<Instant> = None;
    loop {
        let frame = tokio::select! {
            biased;
            command = control.recv() => match command {
                Some(Control::Close(code, reason)) => {
                    let send = sink.send(Frame::Close(Some((code, reason))));
                    let _ = tokio::time::timeout(settings.pong_timeout, send).await;
                    break;
                }
                None => break,
            },
            () = stop.cancelled() => break,
            message = outbound.recv() => match message {
                Some(Out::Text(text)) => Frame::Text(text),
                Some(Out::Close) | None => {
                    let bye = Frame::Close(Some((close_code::NORMAL, "the MCP session ended".to_owned())));
                    let _ = tokio::time::timeout(settings.pong_timeout, sink.send(bye)).await;
                    break;
                }
            },
            _ = tick.tick() => {
                let heard = *last_heard
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match keepalive(heard, pinged, Instant::now(), &settings) {
                    Keepalive::Wait => continue,
                    Keepalive::Ping => {
                        pinged = Some(Instant::now());
                        Frame::Ping(bytes::Bytes::from_static(b"tidewire"))
                    }
                    Keepalive::GiveUp => {
                        tracing::debug!("a WebSocket peer did not answer a ping in time");
                        let bye = Frame::Close(Some((
                            close_code::GOING_AWAY,
                            "no answer to ping".to_owned(),
                        )));
                        let _ = tokio::time::timeout(settings.pong_timeout, sink.send(bye)).await;
                        break;
                    }
                }
            }
        };
        // A peer that stops reading must not hold the writer forever. Text frames queued
        // behind this one go out in the same flush (one write for a burst of replies); a close
        // found among them is sent after them.
        let limit = settings.ping_interval + settings.pong_timeout;
        let mut then_close = false;
        let burst = async {
            sink.feed(frame).await?;
            while !then_close {
                match outbound.try_recv() {
                    Ok(Out::Text(text)) => sink.feed(Frame::Text(text)).await?,
                    Ok(Out::Close) => then_close = true,
                    Err(_) => break,
                }
            }
            sink.flush().await
        };
        match tokio::time::timeout(limit, burst).await {
            Ok(Ok(())) if then_close => {
                let bye = Frame::Close(Some((
                    close_code::NORMAL,
                    "the MCP session ended".to_owned(),
                )));
                let _ = tokio::time::timeout(settings.pong_timeout, sink.send(bye)).await;
                break;
            }
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "writing to a WebSocket failed");
                break;
            }
            Err(_) => {
                tracing::debug!("a WebSocket peer stopped reading");
                break;
            }
        }
    }
    stop.cancel();
}

impl TransportSender for WsSender {
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM.limiting_messages_to(self.codec.max_message_size())
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed {
            return Err(TransportError::closed());
        }
        let bytes = self.codec.encode_envelope_to_vec(&envelope)?;
        let text = String::from_utf8(bytes).map_err(TransportError::other)?;
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(TransportError::closed()),
            sent = self.outbound.send(Out::Text(text)) => sent.map_err(|_| TransportError::closed()),
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        tokio::select! {
            biased;
            () = self.stop.cancelled() => {}
            _ = self.outbound.send(Out::Close) => {}
        }
        Ok(())
    }
}

impl TransportReceiver for WsReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        let mut item = self.rx.recv().await;
        if let (Some(Ok(envelope)), Some(principal)) = (&mut item, &self.principal) {
            envelope.extensions.insert(principal.clone());
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(interval_ms: u64, timeout_ms: u64) -> Settings {
        Settings {
            codec: Codec::default(),
            ping_interval: Duration::from_millis(interval_ms),
            pong_timeout: Duration::from_millis(timeout_ms),
            queue: 8,
        }
    }

    /// Found rerunning issue 26's revocation reproduction: a client that sends nothing but
    /// answers every ping at once was closed "no answer to ping" a minute in, because the rule
    /// looked at silence alone (nearly two intervals of it by the tick after a prompt pong).
    #[test]
    fn a_peer_that_answers_every_ping_is_kept() {
        let s = settings(20_000, 20_000);
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut heard = start;
        let mut pinged = None;
        for tick in 1..=10 {
            let now = at(20 * tick) + Duration::from_millis(2);
            assert_eq!(
                keepalive(heard, pinged, now, &s),
                Keepalive::Ping,
                "tick {tick}"
            );
            pinged = Some(now);
            // The pong comes back a moment later.
            heard = now + Duration::from_micros(200);
        }
    }

    #[test]
    fn a_ping_unanswered_for_the_timeout_ends_the_connection() {
        let s = settings(20_000, 20_000);
        let start = Instant::now();
        let sent = start + Duration::from_secs(20);
        assert_eq!(keepalive(start, None, sent, &s), Keepalive::Ping);
        let soon = sent + Duration::from_secs(5);
        assert_eq!(keepalive(start, Some(sent), soon, &s), Keepalive::Wait);
        let late = sent + Duration::from_secs(20);
        assert_eq!(keepalive(start, Some(sent), late, &s), Keepalive::GiveUp);
        // Heard after the ping: answered, whatever the frame was.
        let answered = sent + Duration::from_secs(1);
        assert_ne!(keepalive(answered, Some(sent), late, &s), Keepalive::GiveUp);
    }

    #[test]
    fn a_peer_heard_lately_is_not_pinged() {
        let s = settings(20_000, 20_000);
        let start = Instant::now();
        let now = start + Duration::from_secs(20);
        let heard = now - Duration::from_secs(3);
        assert_eq!(keepalive(heard, None, now, &s), Keepalive::Wait);
        assert_eq!(
            keepalive(now - Duration::from_secs(15), None, now, &s),
            Keepalive::Ping
        );
    }
}
