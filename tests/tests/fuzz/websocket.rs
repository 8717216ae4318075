//! Target: WebSocket frame handling.

use super::generators::*;
use super::http_server::initialize_params;
use super::*;

/// The message limit of the server under test.
pub(crate) const WS_LIMIT: usize = 64 * 1024;
/// The id of the `ping` request that marks the end of a case's frames.
pub(crate) const SYNC_ID: &str = "tidewire-fuzz-sync";

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[derive(Debug, Clone)]
pub(crate) enum WsFrame {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
    /// A text frame this many bytes over the limit.
    Oversized(usize),
    /// A text frame whose payload is not UTF-8 (sent raw: tungstenite's `Message::Text` holds
    /// only UTF-8).
    InvalidUtf8(Vec<u8>),
    /// Any frame header: fragments, continuations without a start, reserved opcodes and bits,
    /// control frames that are fragmented or too long.
    Raw {
        fin: bool,
        rsv: u8,
        opcode: u8,
        payload: Vec<u8>,
    },
}

/// What the server promises for a frame (tidewire-ws's framing docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The connection goes on.
    Harmless,
    /// The connection ends; a close frame, if one arrives, has this code.
    Closes(u16),
    /// No promise (raw frames, the client's own close).
    Unspecified,
}

pub(crate) fn raw_frame(fin: bool, rsv: u8, opcode: u8, payload: &[u8]) -> WsMessage {
    let header = FrameHeader {
        is_final: fin,
        rsv1: rsv & 1 != 0,
        rsv2: rsv & 2 != 0,
        rsv3: rsv & 4 != 0,
        opcode: OpCode::from(opcode & 0x0F),
        mask: None,
    };
    WsMessage::Frame(Frame::from_payload(header, Bytes::copy_from_slice(payload)))
}

impl WsFrame {
    fn message(&self) -> WsMessage {
        match self {
            Self::Text(text) => WsMessage::text(text.as_str()),
            Self::Binary(bytes) => WsMessage::binary(bytes.clone()),
            Self::Ping(bytes) => WsMessage::Ping(bytes.clone().into()),
            Self::Pong(bytes) => WsMessage::Pong(bytes.clone().into()),
            Self::Close(frame) => {
                WsMessage::Close(frame.as_ref().map(|(code, reason)| CloseFrame {
                    code: CloseCode::from(*code),
                    reason: reason.as_str().into(),
                }))
            }
            Self::Oversized(extra) => WsMessage::text("x".repeat(WS_LIMIT + extra)),
            Self::InvalidUtf8(payload) => raw_frame(true, 0, 1, payload),
            Self::Raw {
                fin,
                rsv,
                opcode,
                payload,
            } => raw_frame(*fin, *rsv, *opcode, payload),
        }
    }

    fn verdict(&self) -> Verdict {
        match self {
            Self::Text(text) if text.len() > WS_LIMIT => Verdict::Closes(1009),
            Self::Text(_) => Verdict::Harmless,
            Self::Ping(payload) | Self::Pong(payload) if payload.len() <= 125 => Verdict::Harmless,
            Self::Binary(payload) if payload.len() <= WS_LIMIT => Verdict::Closes(1003),
            Self::Oversized(_) => Verdict::Closes(1009),
            Self::InvalidUtf8(_) => Verdict::Closes(1007),
            _ => Verdict::Unspecified,
        }
    }
}

pub(crate) const CLOSE_CODES: &[u16] = &[
    0, 999, 1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1015, 2999, 3000,
    4999, 5000,
];

pub(crate) fn ws_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => message_value().prop_map(|value| value.to_string()),
        1 => codec_input().prop_map(|input| String::from_utf8_lossy(&input.bytes()).into_owned()),
        1 => small_text(),
    ]
    .boxed()
}

pub(crate) fn ws_frame() -> BoxedStrategy<WsFrame> {
    let close_code = prop_oneof![select(CLOSE_CODES), any::<u16>()];
    prop_oneof![
        6 => ws_text().prop_map(WsFrame::Text),
        1 => vec(any::<u8>(), 0..512).prop_map(WsFrame::Binary),
        1 => vec(any::<u8>(), 0..=125).prop_map(WsFrame::Ping),
        1 => vec(any::<u8>(), 0..=125).prop_map(WsFrame::Pong),
        1 => option::of((close_code, small_text())).prop_map(WsFrame::Close),
        1 => (1usize..4096).prop_map(WsFrame::Oversized),
        1 => (vec(any::<u8>(), 0..64), any::<Index>()).prop_map(|(mut payload, at)| {
            // 0xFF never occurs in UTF-8.
            let at = at.index(payload.len() + 1);
            payload.insert(at, 0xFF);
            WsFrame::InvalidUtf8(payload)
        }),
        1 => (any::<bool>(), 0u8..8, 0u8..16, vec(any::<u8>(), 0..200)).prop_map(
            |(fin, rsv, opcode, payload)| WsFrame::Raw { fin, rsv, opcode, payload }
        ),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
pub(crate) struct WsCase {
    /// Start with a valid `initialize`.
    initialize: bool,
    frames: Vec<WsFrame>,
}

pub(crate) fn ws_case() -> impl Strategy<Value = WsCase> {
    (any::<bool>(), vec(ws_frame(), 0..8))
        .prop_map(|(initialize, frames)| WsCase { initialize, frames })
}

pub(crate) fn initialize_text(id: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": initialize_params("2025-11-25")
    })
    .to_string()
}

async fn ws_connect(url: &str) -> Result<Socket, TestCaseError> {
    let mut request = url
        .into_client_request()
        .map_err(|e| fail(format!("a client request for {url}: {e}")))?;
    request
        .headers_mut()
        .insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
    match timeout(WAIT, tokio_tungstenite::connect_async(request)).await {
        Ok(Ok((socket, _response))) => Ok(socket),
        Ok(Err(e)) => Err(fail(format!("cannot connect: {e}"))),
        Err(_) => Err(fail(format!("no connection within {WAIT:?}"))),
    }
}

/// Whether `text` is the response to the request `id`, with a result when `result` says so.
pub(crate) fn is_response_to(text: &str, id: &str, result: bool) -> Result<bool, TestCaseError> {
    let message = Message::from_slice(text.as_bytes()).map_err(|e| {
        fail(format!(
            "the server sent a text frame that is no JSON-RPC message ({e:?}): {text}"
        ))
    })?;
    Ok(match message {
        Message::Response(response) => {
            response.id == Some(RequestId::from(id)) && (!result || response.outcome.is_ok())
        }
        Message::Request(_) | Message::Notification(_) => false,
    })
}

/// Sends the case's frames, then a `ping` request, and reads until its answer or the end.
async fn ws_run(url: &str, case: &WsCase) -> Result<(), TestCaseError> {
    let mut socket = ws_connect(url).await?;
    let mut messages = Vec::new();
    if case.initialize {
        messages.push(WsMessage::text(initialize_text("fuzz-init")));
    }
    messages.extend(case.frames.iter().map(WsFrame::message));
    let mut open = true;
    for message in messages {
        let closing = matches!(message, WsMessage::Close(_));
        match timeout(WAIT, socket.send(message)).await {
            Ok(Ok(())) => {}
            // The connection is gone (the server closed it, or tungstenite refuses to send).
            Ok(Err(_)) => {
                open = false;
                break;
            }
            Err(_) => {
                return Err(fail(format!(
                    "a frame could not be sent within {WAIT:?}: the server stopped reading"
                )));
            }
        }
        if closing {
            open = false;
            break;
        }
    }
    if open {
        let sync = json!({ "jsonrpc": "2.0", "id": SYNC_ID, "method": "ping" }).to_string();
        open = matches!(
            timeout(WAIT, socket.send(WsMessage::text(sync))).await,
            Ok(Ok(()))
        );
    }

    let deadline = tokio::time::Instant::now() + WAIT;
    let mut synced = false;
    let mut close_code = None;
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, socket.next()).await else {
            return Err(fail(format!(
                "within {WAIT:?}, the server neither answered the closing ping nor ended the \
                 connection (ping sent: {open})"
            )));
        };
        match next {
            Some(Ok(WsMessage::Text(text))) => {
                if is_response_to(text.as_str(), SYNC_ID, false)? {
                    synced = true;
                    break;
                }
            }
            Some(Ok(WsMessage::Close(frame))) => {
                close_code = Some(frame.map(|f| u16::from(f.code)));
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }

    let verdicts: Vec<Verdict> = case.frames.iter().map(WsFrame::verdict).collect();
    if verdicts.iter().all(|v| *v == Verdict::Harmless) {
        prop_assert!(
            synced,
            "harmless frames ended the connection (close frame: {close_code:?})"
        );
    }
    if let Some(Verdict::Closes(code)) = verdicts.iter().find(|v| **v != Verdict::Harmless)
        && let Some(Some(got)) = close_code
    {
        prop_assert_eq!(got, *code, "the close code");
    }
    Ok(())
}

/// A fresh connection still gets an `initialize` result.
async fn ws_still_serving(url: &str) -> Result<(), TestCaseError> {
    let mut socket = ws_connect(url).await?;
    let sent = timeout(
        WAIT,
        socket.send(WsMessage::text(initialize_text("fuzz-health"))),
    )
    .await;
    prop_assert!(matches!(sent, Ok(Ok(()))), "a fresh connection cannot send");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Ok(Some(Ok(WsMessage::Text(text)))) => {
                if is_response_to(text.as_str(), "fuzz-health", true)? {
                    return Ok(());
                }
            }
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(e))) => {
                return Err(fail(format!("a fresh connection broke: {e}")));
            }
            Ok(None) => return Err(fail("a fresh connection was closed".to_owned())),
            Err(_) => {
                return Err(fail(format!(
                    "a fresh connection got no initialize result within {WAIT:?}"
                )));
            }
        }
    }
}

#[test]
fn websocket() {
    const TARGET: &str = "websocket";
    let runtime = fuzz::runtime(TARGET);
    let config = WsConfig::default().max_message_size(WS_LIMIT);
    let (url, _server, _ws) =
        within(&runtime, WAIT, start_ws(config)).expect("the WebSocket server starts in time");
    // Two connections per case: half the default case count.
    fuzz::run_scaled(TARGET, 2, ws_case(), |case| {
        let run = async {
            ws_run(&url, &case).await?;
            ws_still_serving(&url).await
        };
        server_case(&runtime, TARGET, run)
    });
    assert_eq!(fuzz::worker_panics(TARGET), 0, "server tasks panicked");
}
