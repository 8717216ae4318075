//! [`Client`]: the handle to a connected MCP server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::schema::{
    ClientCapabilities, Complete, CompleteParams, CompleteResult, Cursor, EmptyParams, GetPrompt,
    GetPromptParams, GetPromptResult, Implementation, InitializeResult, JsonObject, ListPrompts,
    ListPromptsResult, ListResourceTemplates, ListResourceTemplatesResult, ListResources,
    ListResourcesResult, ListTools, ListToolsResult, LoggingLevel, NotificationType,
    PaginatedParams, Ping, Prompt, ReadResource, ReadResourceParams, ReadResourceResult,
    RequestType, Resource, ResourceTemplate, RootsListChangedNotification, ServerCapabilities,
    ServerNotification, SetLevel, SetLevelParams, Subscribe, SubscribeParams, Tool, Unsubscribe,
    UnsubscribeParams,
};
use tidewire_core::session::{Peer, RequestBuilder, SessionError};
use tidewire_core::stateless::routing_headers;
use tokio::sync::broadcast;

use crate::dispatch::Answerers;
use crate::era::Era;
use crate::error::ClientError;
use crate::notifications::NotificationStream;

/// A connected MCP client: call tools, read resources, get prompts, and hear what the server
/// announces.
///
/// Cheap to clone: clones share one connection (an `Arc` inside). The connection closes when
/// [`close`](Self::close) is called, when the server goes away, or when the last clone is
/// dropped.
///
/// Every method that talks to the server uses the session's default timeout (see
/// [`SessionOptions`](tidewire_core::session::SessionOptions)); [`call_tool`](Self::call_tool)
/// and [`request`](Self::request) let you choose per call.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    /// Bypasses the result cache ([`fresh`](Self::fresh)).
    pub(crate) fresh: bool,
}

pub(crate) struct Inner {
    pub(crate) peer: Peer,
    /// The server as the last handshake described it (replaced when a new session starts).
    pub(crate) init: RwLock<Arc<InitializeResult>>,
    /// The revision spoken at connect time; on the session era, the engine's is the current one.
    pub(crate) version: ProtocolVersion,
    /// New sessions started after the server ended one.
    pub(crate) reinitializations: AtomicU64,
    /// The `x-mcp-header` marks of the tools listed (stateless revision).
    pub(crate) marks: crate::tool_headers::Marks,
    pub(crate) capabilities: ClientCapabilities,
    /// The era spoken.
    pub(crate) spoken: Era,
    /// The `_meta` every request carries on the stateless revision.
    pub(crate) envelope: Option<JsonObject>,
    /// What answers the server's questions.
    pub(crate) answerers: Arc<Answerers>,
    /// Stateless results kept for their `ttlMs`.
    pub(crate) cache: Arc<crate::cache::ResultCache>,
    /// Rounds of questions one stateless call may take.
    pub(crate) max_input_rounds: usize,
    /// The log level stateless requests ask for (`set_logging_level`).
    pub(crate) log_level: Mutex<Option<LoggingLevel>>,
    /// Subscribed at connect time, so the first stream asked for misses nothing.
    pub(crate) first_notifications: Mutex<Option<broadcast::Receiver<ServerNotification>>>,
    /// Never read; later streams are resubscribed from it.
    pub(crate) template: broadcast::Receiver<ServerNotification>,
    pub(crate) max_list_pages: usize,
    /// The session's start, for `mcp.client.session.duration` (session era, feature `otel`).
    #[cfg(feature = "otel")]
    pub(crate) session_clock: Option<Arc<crate::telemetry::SessionClock>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.peer.close();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server_info().name)
            .field("protocol_version", &self.protocol_version())
            .field("closed", &self.inner.peer.is_closed())
            .finish_non_exhaustive()
    }
}

/// Decodes a raw result as `M`'s.
fn decode<M: RequestType>(result: Value) -> Result<M::Result, ClientError> {
    serde_json::from_value(result).map_err(|e| ClientError::InvalidResponse {
        method: M::METHOD.to_owned(),
        reason: e.to_string(),
    })
}

/// A page of a paginated list: its items and the cursor of the next page.
pub(crate) trait Page {
    type Item;
    fn into_page(self) -> (Vec<Self::Item>, Option<Cursor>);
}

impl Page for ListToolsResult {
    type Item = Tool;
    fn into_page(self) -> (Vec<Tool>, Option<Cursor>) {
        (self.tools, self.next_cursor)
    }
}

impl Page for ListResourcesResult {
    type Item = Resource;
    fn into_page(self) -> (Vec<Resource>, Option<Cursor>) {
        (self.resources, self.next_cursor)
    }
}

impl Page for ListResourceTemplatesResult {
    type Item = ResourceTemplate;
    fn into_page(self) -> (Vec<ResourceTemplate>, Option<Cursor>) {
        (self.resource_templates, self.next_cursor)
    }
}

impl Page for ListPromptsResult {
    type Item = Prompt;
    fn into_page(self) -> (Vec<Prompt>, Option<Cursor>) {
        (self.prompts, self.next_cursor)
    }
}

impl Client {
    /// The server's name and version, from the `initialize` result (of the current session:
    /// see [`reinitializations`](Self::reinitializations)).
    pub fn server_info(&self) -> Implementation {
        self.initialize_result().server_info.clone()
    }

    /// What the server declared it can do.
    pub fn server_capabilities(&self) -> ServerCapabilities {
        self.initialize_result().capabilities.clone()
    }

    /// The server's instructions (a hint for the model's system prompt), if it gave any.
    pub fn instructions(&self) -> Option<String> {
        self.initialize_result().instructions.clone()
    }

    /// The whole `initialize` result, including members this version does not know (on the
    /// stateless revision, the discover result in that form). After the server ended a session
    /// and the client started a new one, it is the new session's.
    pub fn initialize_result(&self) -> Arc<InitializeResult> {
        self.inner
            .init
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The protocol revision spoken: negotiated by `initialize` (the engine's record, which a
    /// new session updates), or the stateless one.
    pub fn protocol_version(&self) -> ProtocolVersion {
        match self.inner.spoken {
            Era::Modern => self.inner.version,
            _ => self
                .inner
                .peer
                .protocol_version()
                .unwrap_or(self.inner.version),
        }
    }

    /// How many new sessions the client started because the server ended one (Streamable
    /// HTTP: a 404 to a request carrying the session id). Each runs a real `initialize`, and
    /// [`initialize_result`](Self::initialize_result) then describes the new session.
    pub fn reinitializations(&self) -> u64 {
        self.inner.reinitializations.load(Ordering::Relaxed)
    }

    /// The era spoken with this server: [`Era::Modern`] (the stateless revision) or
    /// [`Era::Legacy`] (a session opened by `initialize`), never [`Era::Auto`].
    pub fn era(&self) -> Era {
        self.inner.spoken
    }

    /// What this client declared it can do.
    pub fn client_capabilities(&self) -> &ClientCapabilities {
        &self.inner.capabilities
    }

    /// The underlying session handle, to send raw requests and notifications.
    pub fn peer(&self) -> &Peer {
        &self.inner.peer
    }

    /// Starts a typed request for any method: the escape hatch for methods without a helper
    /// here. Set options on the returned builder, then `.await` it.
    ///
    /// ```no_run
    /// # async fn demo(client: tidewire_client::Client) -> Result<(), tidewire_client::ClientError> {
    /// use std::time::Duration;
    /// use tidewire_core::schema::{ListTools, PaginatedParams};
    ///
    /// let page = client
    ///     .request::<ListTools>(PaginatedParams::first_page())
    ///     .timeout(Duration::from_secs(2))
    ///     .await?;
    /// # let _ = page; Ok(()) }
    /// ```
    pub fn request<M: RequestType>(&self, params: M::Params) -> RequestBuilder<M::Result> {
        self.stamp(self.inner.peer.request::<M>(params))
    }

    /// A request by method name with raw JSON params and result: the untyped escape hatch. On
    /// the stateless revision it carries the `_meta` envelope like every other request.
    pub fn request_raw(&self, method: &str, params: Value) -> RequestBuilder<Value> {
        self.stamp(self.inner.peer.request_raw(method, Some(params)))
    }

    /// Adds the stateless `_meta` envelope, on that revision.
    fn stamp<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        request: RequestBuilder<T>,
    ) -> RequestBuilder<T> {
        let Some(envelope) = &self.inner.envelope else {
            return request;
        };
        let mut envelope = envelope.clone();
        let level = *self
            .inner
            .log_level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(level) = level
            && let Ok(level) = serde_json::to_value(level)
        {
            envelope.insert(
                tidewire_core::schema::meta_keys::LOG_LEVEL.to_owned(),
                level,
            );
        }
        let request = request.merge_meta(envelope);
        if !self.inner.peer.transport_profile().routes_by_headers {
            return request;
        }
        // The routing headers, for the transport that sends them (stateless HTTP).
        let marks = match request.method() {
            "tools/call" => request
                .params()
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .map(|name| self.inner.marks.of(name))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let headers = routing_headers(request.method(), request.params(), &marks);
        request.extension(headers)
    }

    /// Sends a typed notification to the server.
    ///
    /// # Errors
    /// [`ClientError::Session`] when the connection is closed or the params do not serialise.
    pub async fn notify<N: NotificationType>(&self, params: N::Params) -> Result<(), ClientError> {
        Ok(self.inner.peer.notify::<N>(params).await?)
    }

    /// The `_meta` entry that declares the tasks extension in a request's capabilities (what a
    /// tasks request, or a listen naming tasks, carries on the stateless revision).
    pub(crate) fn declaring_tasks(&self) -> serde_json::Map<String, Value> {
        let caps = self.inner.capabilities.clone().with_extension(
            tidewire_core::schema::TASKS_EXTENSION,
            serde_json::json!({}),
        );
        let mut meta = serde_json::Map::new();
        meta.insert(
            tidewire_core::schema::meta_keys::CLIENT_CAPABILITIES.to_owned(),
            serde_json::to_value(caps).unwrap_or_else(|_| serde_json::json!({})),
        );
        meta
    }

    pub(crate) async fn call<M: RequestType>(
        &self,
        params: M::Params,
    ) -> Result<M::Result, ClientError> {
        if self.inner.envelope.is_none() || self.fresh {
            return Ok(self.request::<M>(params).await?);
        }
        let params = serde_json::to_value(params).map_err(|e| {
            ClientError::Session(SessionError::InvalidParams {
                method: M::METHOD.to_owned(),
                reason: e.to_string(),
            })
        })?;
        let Some(key) = crate::cache::ResultCache::key(M::METHOD, &params) else {
            let result = self.request_raw(M::METHOD, params).await?;
            return decode::<M>(result);
        };
        if let Some(hit) = self.inner.cache.get(&key) {
            return decode::<M>(hit);
        }
        let result = self.request_raw(M::METHOD, params).await?;
        self.inner.cache.put(key, &result);
        decode::<M>(result)
    }

    /// The same client, bypassing the cache of stateless results for what it asks: the answer
    /// comes from the server (and refreshes the cache).
    ///
    /// ```no_run
    /// # async fn demo(client: tidewire_client::Client) -> Result<(), tidewire_client::ClientError> {
    /// let tools = client.fresh().list_all_tools().await?;
    /// # let _ = tools; Ok(()) }
    /// ```
    pub fn fresh(&self) -> Client {
        Client {
            inner: self.inner.clone(),
            fresh: true,
        }
    }

    /// Checks that the server is alive (`ping`).
    ///
    /// # Errors
    /// As any request: error answer, timeout, closed connection.
    pub async fn ping(&self) -> Result<(), ClientError> {
        self.call::<Ping>(EmptyParams::new()).await.map(drop)
    }

    /// One page of the server's tools; pass the previous page's `next_cursor` for the next.
    ///
    /// # Errors
    /// As any request; [`ClientError::InvalidResponse`] when the page does not decode.
    pub async fn list_tools(&self, cursor: Option<Cursor>) -> Result<ListToolsResult, ClientError> {
        let mut page = self.call::<ListTools>(page_params(cursor)).await?;
        if self.inner.envelope.is_some() {
            crate::tool_headers::keep_valid(&mut page.tools);
            self.inner.marks.learn(&page.tools);
        }
        Ok(page)
    }

    /// Every tool, following `nextCursor` to the last page. On the stateless revision, a tool
    /// whose `x-mcp-header` annotations are invalid is left out (and the reason logged), as in
    /// [`list_tools`](Self::list_tools).
    ///
    /// # Errors
    /// As [`list_tools`](Self::list_tools); [`ClientError::TooManyPages`] past the page limit;
    /// [`ClientError::InvalidResponse`] when the server repeats a cursor.
    pub async fn list_all_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let mut tools = self.list_all::<ListTools>().await?;
        if self.inner.envelope.is_some() {
            crate::tool_headers::keep_valid(&mut tools);
            self.inner.marks.learn(&tools);
        }
        Ok(tools)
    }

    /// One page of the server's resources.
    ///
    /// # Errors
    /// As [`list_tools`](Self::list_tools).
    pub async fn list_resources(
        &self,
        cursor: Option<Cursor>,
    ) -> Result<ListResourcesResult, ClientError> {
        self.call::<ListResources>(page_params(cursor)).await
    }

    /// Every resource, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`list_all_tools`](Self::list_all_tools).
    pub async fn list_all_resources(&self) -> Result<Vec<Resource>, ClientError> {
        self.list_all::<ListResources>().await
    }

    /// One page of the server's resource templates.
    ///
    /// # Errors
    /// As [`list_tools`](Self::list_tools).
    pub async fn list_resource_templates(
        &self,
        cursor: Option<Cursor>,
    ) -> Result<ListResourceTemplatesResult, ClientError> {
        self.call::<ListResourceTemplates>(page_params(cursor))
            .await
    }

    /// Every resource template, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`list_all_tools`](Self::list_all_tools).
    pub async fn list_all_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ClientError> {
        self.list_all::<ListResourceTemplates>().await
    }

    /// One page of the server's prompts.
    ///
    /// # Errors
    /// As [`list_tools`](Self::list_tools).
    pub async fn list_prompts(
        &self,
        cursor: Option<Cursor>,
    ) -> Result<ListPromptsResult, ClientError> {
        self.call::<ListPrompts>(page_params(cursor)).await
    }

    /// Every prompt, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`list_all_tools`](Self::list_all_tools).
    pub async fn list_all_prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        self.list_all::<ListPrompts>().await
    }

    pub(crate) async fn list_all<M>(&self) -> Result<Vec<<M::Result as Page>::Item>, ClientError>
    where
        M: RequestType<Params = PaginatedParams>,
        M::Result: Page,
    {
        let limit = self.inner.max_list_pages;
        let mut items = Vec::new();
        let mut cursor: Option<Cursor> = None;
        for _ in 0..limit {
            let page = self.call::<M>(page_params(cursor.clone())).await?;
            let (mut page_items, next) = page.into_page();
            items.append(&mut page_items);
            match next {
                None => return Ok(items),
                Some(next) if cursor.as_ref() == Some(&next) => {
                    return Err(ClientError::InvalidResponse {
                        method: M::METHOD.to_owned(),
                        reason: format!("the server returned the same nextCursor {next:?} twice"),
                    });
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(ClientError::TooManyPages {
            method: M::METHOD.to_owned(),
            limit,
        })
    }

    /// Reads a resource. On the stateless revision, questions the server asks first are
    /// answered by the client's handlers, round after round.
    ///
    /// # Errors
    /// As any request; an unknown resource is a [`remote`](ClientError::remote) error
    /// (`-32002` on the handshake revisions, `-32602` on 2026-07-28).
    pub async fn read_resource(
        &self,
        uri: impl Into<String>,
    ) -> Result<ReadResourceResult, ClientError> {
        self.call_in_rounds::<ReadResource>(ReadResourceParams::new(uri))
            .await
    }

    /// Asks for `notifications/resources/updated` when the resource at `uri` changes (needs the
    /// server's `resources.subscribe`).
    ///
    /// # Errors
    /// As any request.
    pub async fn subscribe(&self, uri: impl Into<String>) -> Result<(), ClientError> {
        self.call::<Subscribe>(SubscribeParams::new(uri))
            .await
            .map(drop)
    }

    /// Stops the updates asked for with [`subscribe`](Self::subscribe).
    ///
    /// # Errors
    /// As any request.
    pub async fn unsubscribe(&self, uri: impl Into<String>) -> Result<(), ClientError> {
        self.call::<Unsubscribe>(UnsubscribeParams::new(uri))
            .await
            .map(drop)
    }

    /// Gets a prompt, filling its arguments from anything that serialises to a JSON object of
    /// strings (a map, a struct, `serde_json::json!({..})`); pass `()` for none.
    ///
    /// ```no_run
    /// # async fn demo(client: tidewire_client::Client) -> Result<(), tidewire_client::ClientError> {
    /// let prompt = client
    ///     .get_prompt("code_review", serde_json::json!({ "language": "rust" }))
    ///     .await?;
    /// # let _ = prompt; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ClientError::Session`] (`InvalidParams`) when `arguments` is not an object of strings,
    /// otherwise as any request.
    pub async fn get_prompt(
        &self,
        name: impl Into<String>,
        arguments: impl Serialize,
    ) -> Result<GetPromptResult, ClientError> {
        let mut params = GetPromptParams::new(name);
        params.arguments = prompt_arguments(&arguments)?;
        self.call_in_rounds::<GetPrompt>(params).await
    }

    /// Asks for completions of a prompt argument or resource template variable.
    ///
    /// # Errors
    /// As any request.
    pub async fn complete(&self, params: CompleteParams) -> Result<CompleteResult, ClientError> {
        self.call::<Complete>(params).await
    }

    /// Sets the lowest level of log messages the server sends: `logging/setLevel` on a
    /// session; on the stateless revision, the `logLevel` every later request carries in its
    /// `_meta` (without it, a stateless server sends no logs at all).
    ///
    /// # Errors
    /// As any request (never, on the stateless revision).
    pub async fn set_logging_level(&self, level: LoggingLevel) -> Result<(), ClientError> {
        if self.inner.envelope.is_some() {
            *self
                .inner
                .log_level
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(level);
            return Ok(());
        }
        self.call::<SetLevel>(SetLevelParams::new(level))
            .await
            .map(drop)
    }

    /// Tells the server that the client's roots changed
    /// (`notifications/roots/list_changed`); it will ask for them again. Meaningful only when a
    /// roots handler was configured.
    ///
    /// # Errors
    /// [`ClientError::Session`] when the connection is closed.
    pub async fn notify_roots_changed(&self) -> Result<(), ClientError> {
        self.notify::<RootsListChangedNotification>(EmptyParams::new())
            .await
    }

    /// A stream of the notifications the server sends, typed and in order. Several streams may
    /// exist at once; each gets every notification.
    ///
    /// The first stream asked for also holds what arrived since the connection was made (up to
    /// its buffer); later ones start with the next notification. A stream that falls behind
    /// yields `Err(Lagged(n))` instead of silently skipping. The stream ends when the
    /// connection closes.
    pub fn notifications(&self) -> NotificationStream {
        let first = self
            .inner
            .first_notifications
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        NotificationStream::new(first.unwrap_or_else(|| self.inner.template.resubscribe()))
    }

    /// Closes the connection and waits until it has stopped: queued messages are flushed,
    /// requests in flight fail with a closed error, running handlers are cancelled.
    ///
    /// With [`connect_with_driver`](crate::ClientBuilder::connect_with_driver), this waits for
    /// the driver, so keep polling it.
    pub async fn close(&self) {
        self.inner.peer.close();
        self.inner.peer.closed().await;
        #[cfg(feature = "otel")]
        if let Some(clock) = &self.inner.session_clock {
            clock.record(&self.inner.peer);
        }
    }

    /// Waits until the connection has stopped (closed by either side, or failed).
    pub async fn closed(&self) {
        self.inner.peer.closed().await;
    }

    /// True once the connection has stopped.
    pub fn is_closed(&self) -> bool {
        self.inner.peer.is_closed()
    }

    /// Why the connection stopped, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.inner.peer.close_reason()
    }
}

fn page_params(cursor: Option<Cursor>) -> PaginatedParams {
    match cursor {
        Some(cursor) => PaginatedParams::after(cursor),
        None => PaginatedParams::first_page(),
    }
}

/// Serialises prompt arguments: `null` (from `()` or `None`) means none; otherwise an object
/// whose values are strings.
fn prompt_arguments(
    arguments: &impl Serialize,
) -> Result<Option<std::collections::BTreeMap<String, String>>, SessionError> {
    let invalid = |reason: String| SessionError::InvalidParams {
        method: GetPrompt::METHOD.to_owned(),
        reason,
    };
    match serde_json::to_value(arguments).map_err(|e| invalid(e.to_string()))? {
        Value::Null => Ok(None),
        Value::Object(map) => map
            .into_iter()
            .map(|(name, value)| match value {
                Value::String(s) => Ok((name, s)),
                other => Err(invalid(format!(
                    "prompt argument `{name}` must be a string, got {other}"
                ))),
            })
            .collect::<Result<_, _>>()
            .map(Some),
        other => Err(invalid(format!(
            "prompt arguments must be a JSON object, got {other}"
        ))),
    }
}
