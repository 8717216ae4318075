//! The WebSocket client transport, on tokio-tungstenite.
//!
//! ```no_run
//! use tidewire_client::Client;
//! use tidewire_core::schema::Implementation;
//! use tidewire_ws::client::WebSocketConnector;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = WebSocketConnector::new("ws://127.0.0.1:8080/ws").connect().await?;
//! let client = Client::builder(Implementation::new("my-agent", "1.0.0"))
//!     .connect(transport)
//!     .await?;
//! println!("{} tools", client.list_all_tools().await?.len());
//! client.close().await; // sends a close frame (1000)
//! # Ok(()) }
//! ```
//!
//! [`WebSocketConnector::connect`] opens the connection offering the subprotocol `mcp`; a server that
//! does not choose it is refused. When the connection is lost, every call in flight fails with
//! an error naming the reason: there is no resumption on WebSocket, so connect again.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http::{HeaderValue, header};
use tidewire_core::http::ClientTimeouts;
use tidewire_core::http::InvalidHeader;
use tidewire_core::http::RequestHeaders;
use tidewire_core::transport::{Codec, DEFAULT_MAX_MESSAGE_SIZE};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::SUBPROTOCOL;
use crate::connection::{self, Frame, ReadFailure, Settings, WsTransport};

/// Why [`WebSocketConnector::connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WsClientError {
    /// The URL is not a valid `ws://` URL (`wss://` needs TLS, which this build lacks).
    #[error("{url:?} is not a usable WebSocket URL: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header set on the builder has an invalid name or value (the reason; never the value).
    #[error("invalid header: {0}")]
    InvalidHeader(String),
    /// The connection or the upgrade failed (refused, an HTTP error status, no subprotocol
    /// `mcp` chosen, …).
    #[error("the WebSocket handshake with {url} failed: {reason}")]
    Handshake {
        /// The URL.
        url: String,
        /// What happened.
        reason: String,
    },
    /// Nothing was settled within the connect timeout.
    #[error("the WebSocket handshake with {url} took longer than {timeout:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        timeout: Duration,
    },
}

/// Builds a WebSocket client transport. Setters never fail; [`connect`](Self::connect) reports
/// the first problem.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it connects"]
pub struct WebSocketConnector {
    url: String,
    headers: RequestHeaders,
    max_message_size: usize,
    ping_interval: Duration,
    pong_timeout: Duration,
    timeouts: ClientTimeouts,
}

impl WebSocketConnector {
    tidewire_core::__request_header_setters!(headers, "the upgrade request");
    tidewire_core::__client_timeout_setters!(timeouts, connect_only);

    /// A client for the endpoint at `url` (conventionally `ws://host:port/ws`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: RequestHeaders::default(),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            ping_interval: Duration::from_secs(20),
            pong_timeout: Duration::from_secs(20),
            timeouts: ClientTimeouts::DEFAULT,
        }
    }

    /// The largest message either way (default 8 MiB); a larger one from the server closes the
    /// connection with 1009.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// Ping a server silent for this long (default 20 s); one silent for this plus the pong
    /// timeout (default 20 s) is given up, and the calls in flight fail.
    pub fn keep_alive(mut self, ping_interval: Duration, pong_timeout: Duration) -> Self {
        self.ping_interval = ping_interval.max(Duration::from_millis(1));
        self.pong_timeout = pong_timeout.max(Duration::from_millis(1));
        self
    }

    /// Connects and upgrades, offering the subprotocol `mcp`.
    ///
    /// # Errors
    /// See [`WsClientError`].
    pub async fn connect(self) -> Result<WsTransport, WsClientError> {
        let url = self.url.clone();
        if !url.starts_with("ws://") {
            return Err(WsClientError::InvalidUrl {
                url,
                reason: "only ws:// URLs are supported (no TLS in this build)".to_owned(),
            });
        }
        let mut request =
            url.as_str()
                .into_client_request()
                .map_err(|e| WsClientError::InvalidUrl {
                    url: url.clone(),
                    reason: e.to_string(),
                })?;
        let headers = self
            .headers
            .checked()
            .map_err(|InvalidHeader(reason)| WsClientError::InvalidHeader(reason))?;
        request.headers_mut().extend(headers);
        request.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let limit = self.max_message_size;
        let config = WebSocketConfig::default()
            .max_message_size(Some(limit))
            .max_frame_size(Some(limit));
        let handshake = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
        let (socket, _response) = tokio::time::timeout(self.timeouts.connect, handshake)
            .await
            .map_err(|_| WsClientError::Timeout {
                url: url.clone(),
                timeout: self.timeouts.connect,
            })?
            .map_err(|e| WsClientError::Handshake {
                url: url.clone(),
                reason: describe(&e),
            })?;
        let settings = Settings {
            codec: Codec::new(limit),
            ping_interval: self.ping_interval,
            pong_timeout: self.pong_timeout,
            queue: 256,
        };
        let (sink, stream) = socket.split();
        let sink = sink.with(|frame: Frame| async move { Ok::<_, WsError>(to_tungstenite(frame)) });
        let stream = stream.filter_map(|item| async move {
            match item {
                Ok(Message::Frame(_)) => None,
                Ok(message) => Some(Ok(from_tungstenite(message))),
                Err(e) => Some(Err(classify(e))),
            }
        });
        Ok(connection::start(
            Box::pin(sink),
            Box::pin(stream),
            settings,
        ))
    }
}

fn describe(error: &WsError) -> String {
    match error {
        WsError::Http(response) => format!("HTTP {}", response.status()),
        other => other.to_string(),
    }
}

fn classify(error: WsError) -> ReadFailure {
    match error {
        WsError::Capacity(e) => ReadFailure::TooBig(e.to_string()),
        WsError::Utf8(e) => ReadFailure::NotUtf8(e),
        other => ReadFailure::Broken(other.to_string()),
    }
}

fn to_tungstenite(frame: Frame) -> Message {
    match frame {
        Frame::Text(text) => Message::text(text),
        Frame::Binary => Message::binary(Vec::new()),
        Frame::Ping(data) => Message::Ping(data),
        Frame::Pong => Message::Pong(bytes::Bytes::new()),
        Frame::Close(frame) => Message::Close(frame.map(|(code, reason)| CloseFrame {
            code: CloseCode::from(code),
            reason: reason.into(),
        })),
    }
}

fn from_tungstenite(message: Message) -> Frame {
    match message {
        Message::Text(text) => Frame::Text(text.as_str().to_owned()),
        Message::Binary(_) => Frame::Binary,
        Message::Ping(data) => Frame::Ping(data),
        Message::Pong(_) | Message::Frame(_) => Frame::Pong,
        Message::Close(frame) => {
            Frame::Close(frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())))
        }
    }
}
