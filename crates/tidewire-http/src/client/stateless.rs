//! The client transport of the stateless wire (2026-07-28): each request is a POST of its own,
//! with no session, carrying the routing headers; its answer (JSON, or an SSE stream of its
//! notifications and then its response) is read into the engine; closing that answer is how a
//! request is cancelled.
//!
//! It keeps only HTTP state: the requests running (to close one on cancel) and the tools'
//! `x-mcp-header` parameters it saw in `tools/list` answers (to send `Mcp-Param-*` headers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Message, RequestId, Response};
use tidewire_core::schema::meta_keys;
use tidewire_core::transport::{
    Codec, Envelope, TransportError, TransportReceiver, TransportSender, header_value,
};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::endpoint::{ExtraHeaders, endpoint};
use super::error::{HttpClientError, chain};
use super::redirect::same_origin_policy;
use super::reply::{Body, body_kind, decode_json, read_limited};
use super::sse;

/// Messages read from answers and waiting for the engine.
const INBOUND: usize = 64;
/// Tools whose `x-mcp-header` parameters are remembered at most (a server listing more gets
/// the headers of the first ones only).
const MAX_TOOLS_REMEMBERED: usize = 4096;

/// Builds a [`StatelessHttpTransport`]: the client side of the 2026-07-28 wire on Streamable
/// HTTP. Pair it with `ClientBuilder::era(Era::Modern)`.
///
/// ```no_run
/// # fn demo() -> Result<(), tidewire_http::client::HttpClientError> {
/// let transport = tidewire_http::client::StatelessHttpClient::new("http://127.0.0.1:3000/mcp")
///     .connect()?;
/// # let _ = transport; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StatelessHttpClient {
    url: String,
    http: Option<reqwest::Client>,
    codec: Codec,
    extra: ExtraHeaders,
}

impl StatelessHttpClient {
    /// A client of the endpoint at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            http: None,
            codec: Codec::default(),
            extra: ExtraHeaders::default(),
        }
    }

    /// Sends this header with every request (authentication, tracing). An invalid name or
    /// value makes [`connect`](Self::connect) fail.
    #[must_use]
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: std::fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: std::fmt::Display,
    {
        self.extra.add(name, value);
        self
    }

    /// Sends `Authorization: Bearer TOKEN` with every request (marked sensitive, never logged).
    #[must_use]
    pub fn bearer(mut self, token: impl std::fmt::Display) -> Self {
        self.extra.bearer(token);
        self
    }

    /// Uses this reqwest client (for its TLS, proxy or timeout settings).
    #[must_use]
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// The largest message accepted or sent (default 8 MiB).
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.codec = Codec::new(bytes);
        self
    }

    /// The transport.
    ///
    /// # Errors
    /// When the URL is not an `http` one (or `https` without a TLS-enabled client), or the HTTP
    /// client cannot be built.
    pub fn connect(self) -> Result<StatelessHttpTransport, HttpClientError> {
        let extra = self.extra.checked()?;
        let url = endpoint(&self.url, self.http.is_some())?;
        let http = match self.http {
            Some(client) => client,
            None => reqwest::Client::builder()
                .redirect(same_origin_policy())
                .build()
                .map_err(HttpClientError::HttpClient)?,
        };
        let (tx, rx) = mpsc::channel(INBOUND);
        let shared = Arc::new(Shared {
            http,
            url,
            codec: self.codec,
            extra,
            inbound: tx,
            running: Mutex::new(HashMap::new()),
            header_params: Mutex::new(HashMap::new()),
            list_requests: Mutex::new(Vec::new()),
        });
        Ok((
            StatelessSender {
                shared: shared.clone(),
            },
            StatelessReceiver {
                rx,
                _shared: shared,
            },
        ))
    }
}

/// The transport [`StatelessHttpClient::connect`] makes.
pub type StatelessHttpTransport = (StatelessSender, StatelessReceiver);

struct Shared {
    http: reqwest::Client,
    url: reqwest::Url,
    codec: Codec,
    /// Headers every POST carries.
    extra: HeaderMap,
    inbound: mpsc::Sender<Result<Envelope, TransportError>>,
    /// The requests whose answers are being read, to close one when it is cancelled.
    running: Mutex<HashMap<RequestId, AbortHandle>>,
    /// Per tool: its parameters marked `x-mcp-header`, and the header name of each.
    header_params: Mutex<HashMap<String, Vec<(String, String)>>>,
    /// `tools/list` requests in flight, whose answers teach `header_params`.
    list_requests: Mutex<Vec<RequestId>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The sending half: every request a POST of its own.
pub struct StatelessSender {
    shared: Arc<Shared>,
}

/// The receiving half: what the answers carried, in the order read.
pub struct StatelessReceiver {
    rx: mpsc::Receiver<Result<Envelope, TransportError>>,
    _shared: Arc<Shared>,
}

impl std::fmt::Debug for StatelessSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatelessSender")
            .field("url", &self.shared.url.as_str())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for StatelessReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatelessReceiver").finish_non_exhaustive()
    }
}

impl TransportReceiver for StatelessReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        self.rx.recv().await
    }
}

impl TransportSender for StatelessSender {
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        match envelope.message {
            Message::Request(request) => {
                let id = request.id.clone();
                if request.method == "tools/list" {
                    lock(&self.shared.list_requests).push(id.clone());
                }
                let headers = self
                    .shared
                    .headers(&request.method, request.params.as_ref());
                let body = self.shared.codec.encode(&Message::Request(request))?;
                let shared = self.shared.clone();
                let key = id.clone();
                let task = tokio::spawn(async move {
                    shared.exchange(id.clone(), headers, body).await;
                    lock(&shared.running).remove(&id);
                });
                lock(&self.shared.running).insert(key, task.abort_handle());
                Ok(())
            }
            Message::Notification(notification) => {
                if notification.method == "notifications/cancelled" {
                    // Closing the request's answer is the cancel on this wire: nothing is sent.
                    let id = notification
                        .params
                        .as_ref()
                        .and_then(|p| p.get("requestId"))
                        .and_then(RequestId::from_json);
                    if let Some(handle) = id.and_then(|id| lock(&self.shared.running).remove(&id)) {
                        handle.abort();
                    }
                    return Ok(());
                }
                let headers = self
                    .shared
                    .headers(&notification.method, notification.params.as_ref());
                let body = self
                    .shared
                    .codec
                    .encode(&Message::Notification(notification))?;
                let shared = self.shared.clone();
                tokio::spawn(async move {
                    if let Err(error) = shared.post(headers, body).send().await {
                        tracing::debug!(error = %chain(&error), "a notification POST failed");
                    }
                });
                Ok(())
            }
            // The server sends no requests on this wire, so there is nothing to answer.
            Message::Response(_) => {
                tracing::debug!("dropped a response: the 2026-07-28 wire has no server requests");
                Ok(())
            }
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        for (_, handle) in lock(&self.shared.running).drain() {
            handle.abort();
        }
        Ok(())
    }
}

impl Shared {
    /// The routing headers of a message: version, method, name, and `Mcp-Param-*`.
    fn headers(&self, method: &str, params: Option<&Value>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut set = |name: &str, value: &str| {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        };
        let version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(meta_keys::PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .unwrap_or("2026-07-28");
        set("mcp-protocol-version", version);
        set("mcp-method", &header_value::encode(method));
        let field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        };
        if let Some(value) = field.and_then(|f| params?.get(f)?.as_str()) {
            set("mcp-name", &header_value::encode(value));
        }
        if method == "tools/call"
            && let Some(tool) = params.and_then(|p| p.get("name")).and_then(Value::as_str)
            && let Some(marked) = lock(&self.header_params).get(tool)
        {
            let arguments = params.and_then(|p| p.get("arguments"));
            for (property, header) in marked {
                let value = match arguments.and_then(|a| a.get(property)) {
                    Some(Value::String(s)) => header_value::encode(s),
                    Some(Value::Bool(b)) => b.to_string(),
                    Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
                    // Null or absent: no header.
                    _ => continue,
                };
                set(&format!("mcp-param-{header}"), &value);
            }
        }
        headers
    }

    fn post(&self, headers: HeaderMap, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.http
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .headers(self.extra.clone())
            .headers(headers)
            .body(body)
    }

    /// POSTs one request and hands every message of its answer to the engine; an answer that
    /// is no JSON-RPC message becomes an error response for the request.
    async fn exchange(&self, id: RequestId, headers: HeaderMap, body: Vec<u8>) {
        let response = match self.post(headers, body).send().await {
            Ok(response) => response,
            Err(error) => {
                self.fail(&id, format!("the POST failed: {}", chain(&error)))
                    .await;
                return;
            }
        };
        let status = response.status();
        let kind = body_kind(&response);
        if kind == Body::EventStream && status.is_success() {
            let mut events = sse::events(response, self.codec.max_message_size());
            while let Some(item) = futures::StreamExt::next(&mut events).await {
                let Ok(event) = item else {
                    self.fail(&id, "the answer's stream broke".to_owned()).await;
                    return;
                };
                if event.data.trim().is_empty() {
                    continue;
                }
                match self.codec.decode(event.data.as_bytes()) {
                    Ok(message) => {
                        let answered = is_answer_to(&message, &id);
                        if !self.deliver(message).await || answered {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "the server sent a bad message on a stream");
                    }
                }
            }
            self.fail(
                &id,
                "the answer's stream ended before the response".to_owned(),
            )
            .await;
            return;
        }
        let text = match read_limited(response, self.codec.max_message_size()).await {
            Ok(text) => text,
            Err(reason) => {
                self.fail(&id, reason).await;
                return;
            }
        };
        for message in decode_json(&self.codec, &text) {
            match message {
                // An error body (HTTP 400/404) is the answer all the same.
                Ok(Message::Response(mut response)) => {
                    response.id.get_or_insert_with(|| id.clone());
                    self.deliver(Message::Response(response)).await;
                    return;
                }
                Ok(other) => {
                    self.deliver(other).await;
                }
                Err(reason) => tracing::debug!(%reason, "an answer that is no message"),
            }
        }
        self.fail(&id, format!("HTTP {status} with no JSON-RPC response"))
            .await;
    }

    /// Hands a message to the engine, learning tool headers from `tools/list` answers. False
    /// when nobody reads any more.
    async fn deliver(&self, message: Message) -> bool {
        if let Message::Response(response) = &message
            && let Some(id) = &response.id
        {
            let listed = {
                let mut lists = lock(&self.list_requests);
                let at = lists.iter().position(|l| l == id);
                at.map(|at| lists.swap_remove(at)).is_some()
            };
            if listed && let Ok(result) = &response.outcome {
                self.learn_tools(result);
            }
        }
        self.inbound.send(Ok(Envelope::new(message))).await.is_ok()
    }

    /// Records each listed tool's `x-mcp-header` parameters.
    fn learn_tools(&self, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut known = lock(&self.header_params);
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let marked: Vec<(String, String)> = tool
                .get("inputSchema")
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(property, schema)| {
                    let header = schema.get("x-mcp-header")?.as_str()?;
                    Some((property.clone(), header.to_owned()))
                })
                .collect();
            if marked.is_empty() {
                known.remove(name);
            } else if known.len() < MAX_TOOLS_REMEMBERED || known.contains_key(name) {
                known.insert(name.to_owned(), marked);
            }
        }
    }

    /// Fails the request `id` with an error response naming `reason`.
    async fn fail(&self, id: &RequestId, reason: String) {
        let error = ErrorObject::new(ErrorCode::CONNECTION_CLOSED, reason);
        let _ = self
            .inbound
            .send(Ok(Envelope::new(Message::Response(Response::error(
                Some(id.clone()),
                error,
            )))))
            .await;
    }
}

fn is_answer_to(message: &Message, id: &RequestId) -> bool {
    matches!(message, Message::Response(r) if r.id.as_ref() == Some(id))
}
