//! The server: what it offers, and how it serves a connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CallToolResult, ClientNotification, CompleteParams, CompleteResult, ContentBlock,
    GetPromptResult, Implementation, LoggingLevel, NotificationType, Prompt,
    PromptListChangedNotification, ReadResourceResult, Resource, ResourceListChangedNotification,
    ResourceTemplate, ResourceUpdatedNotification, ResourceUpdatedNotificationParams,
    ServerCapabilities, Tool, ToolListChangedNotification,
};
use tidewire_core::session::{CancelPolicy, Driver, Peer, Serve, Session, SessionOptions};
use tidewire_core::transport::text::excerpt;
use tidewire_core::transport::{Transport, TransportSender};

use crate::bus::{BusEvent, MemoryBus, NotificationBus, Subscription};
use crate::catch_up::ListKind;
use crate::connection::{Connection, ConnectionHandler};
use crate::context::Context;
use crate::error::ToolError;
use crate::registry::{
    CompleteFn, PromptEntry, PromptFn, ReadFn, Registry, ResourceEntry, TemplateEntry, ToolEntry,
    boxed_tool,
};
use crate::stateless::{
    CacheHint, CacheHints, CacheItem, DEFAULT_STATE_BYTES, DEFAULT_STATE_TTL, KeyRing, StatePolicy,
};
use crate::uri_template::UriTemplate;
use tidewire_core::version::Eras;

type NotificationFn = dyn Fn(ClientNotification, &Peer) + Send + Sync;

/// At most one `warn` per this long about broadcasts that clients lost (the rest go to `debug`).
const DROP_WARNING_EVERY: Duration = Duration::from_secs(10);

pub(crate) struct Inner {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) tools: Registry<ToolEntry>,
    pub(crate) resources: Registry<ResourceEntry>,
    pub(crate) templates: Registry<TemplateEntry>,
    pub(crate) prompts: Registry<PromptEntry>,
    pub(crate) completion: Option<Arc<CompleteFn>>,
    pub(crate) on_notification: Option<Arc<NotificationFn>>,
    pub(crate) page_size: usize,
    pub(crate) max_subscriptions: usize,
    pub(crate) default_log_level: LoggingLevel,
    pub(crate) session_options: SessionOptions,
    /// Tools whose cancellation differs from the connection's policy.
    pub(crate) tool_cancel_policies: std::collections::HashMap<String, CancelPolicy>,
    /// Which eras are served.
    pub(crate) eras: Eras,
    /// Caching hints of stateless results.
    pub(crate) cache: CacheHints,
    /// How stateless `requestState` is sealed.
    pub(crate) state_policy: StatePolicy,
    /// Where list changes and resource updates go, to sessions and listen streams alike.
    pub(crate) bus: Arc<dyn NotificationBus>,
    /// Open listen streams, and their limit.
    pub(crate) listeners: Arc<AtomicUsize>,
    pub(crate) max_listeners: usize,
    /// Bumped to end every listen stream.
    pub(crate) listen_epoch: tokio::sync::watch::Sender<u64>,
    /// This process's session-era connections hear the bus through this.
    sessions_subscription: OnceLock<Subscription>,
    /// `info` as JSON, for the `serverInfo` of every stateless result.
    info_json: OnceLock<Value>,
    connections: Mutex<Vec<Weak<Connection>>>,
    /// Broadcast notifications that a client lost because its outbound queue was full.
    dropped_notifications: AtomicU64,
    /// When such a loss was last logged at `warn`.
    last_drop_warning: Mutex<Option<Instant>>,
}

impl Inner {
    /// `info` as JSON, serialised once.
    pub(crate) fn info_json(&self) -> &Value {
        self.info_json
            .get_or_init(|| serde_json::to_value(&self.info).unwrap_or(Value::Null))
    }

    pub(crate) fn capabilities(&self) -> ServerCapabilities {
        let mut caps = ServerCapabilities::default()
            .with_tools(true)
            .with_logging()
            .with_completions();
        if !self.resources.is_empty() || !self.templates.is_empty() {
            caps = caps.with_resources(true, true);
        }
        if !self.prompts.is_empty() {
            caps = caps.with_prompts(true);
        }
        caps
    }
}

/// An MCP server: tools, resources, prompts and completion, served over any transport.
///
/// Cheap to clone (an `Arc` inside); clones are the same server. One server serves any number of
/// connections; each has its own negotiated revision, log level and subscriptions.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use tidewire_core::schema::{CallToolResult, Implementation};
/// use tidewire_server::Server;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Echo {
///     /// The text to send back.
///     text: String,
/// }
///
/// let server = Server::builder(Implementation::new("demo", "1.0.0"))
///     .tool("echo", "Sends the text back", |args: Echo, _ctx| async move {
///         Ok(CallToolResult::text(args.text))
///     })
///     .build();
/// assert_eq!(server.tools().len(), 1);
/// ```
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.inner.info.name)
            .finish_non_exhaustive()
    }
}

/// A server serves every connection a transport's server accepts: give it (cloned) to
/// `StreamableHttp::new`, `LegacySse::new` or `WebSocketServer::new`. A transport that carries
/// sessions only (HTTP+SSE) is served the session era whatever [`ServerBuilder::eras`] says.
impl<T: Transport> Serve<T> for Server {
    fn serve_connection(&self, transport: T) -> Driver {
        let (sender, receiver) = transport.split();
        let eras = if sender.carries_stateless() {
            self.inner.eras
        } else {
            Eras::Legacy
        };
        self.serve_eras((sender, receiver), eras).1
    }
}

impl Server {
    /// Starts describing a server.
    pub fn builder(info: Implementation) -> ServerBuilder {
        ServerBuilder::new(info)
    }

    /// Sets up one connection over `transport`. Poll (or spawn) the [`Driver`]; the [`Peer`]
    /// reaches the client.
    pub fn serve<T: Transport>(&self, transport: T) -> (Peer, Driver) {
        self.serve_eras(transport, self.inner.eras)
    }

    /// As [`serve`](Self::serve), serving only `eras` on this connection (the deprecated
    /// HTTP+SSE transport, for one, carries sessions only: `Eras::Legacy`).
    pub fn serve_eras<T: Transport>(&self, transport: T, eras: Eras) -> (Peer, Driver) {
        let connection = Arc::new(Connection::new(self.inner.clone(), eras));
        let (peer, driver) = Session::new(
            transport,
            ConnectionHandler(connection.clone()),
            self.inner.session_options.clone(),
        );
        connection.set_peer(peer.clone());
        let mut connections = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Ended connections are swept when the table has doubled since the last sweep, not on
        // every connection: a stateless request is a connection of its own on Streamable HTTP,
        // and sweeping ten thousand open listeners per request would cost each one O(n).
        if connections.len() >= connections.capacity().max(64) {
            connections.retain(|c| c.upgrade().is_some_and(|c| c.is_live()));
            let live = connections.len();
            connections.reserve(live.max(32));
        }
        connections.push(Arc::downgrade(&connection));
        (peer, driver)
    }

    /// Serves one connection until it ends.
    ///
    /// # Errors
    /// When the transport fails (a clean close by the client is `Ok`).
    pub async fn run<T: Transport>(
        &self,
        transport: T,
    ) -> Result<(), tidewire_core::transport::TransportError> {
        let (_peer, driver) = self.serve(transport);
        driver.await
    }

    /// The tools offered now, in order.
    pub fn tools(&self) -> Vec<Tool> {
        self.inner
            .tools
            .snapshot()
            .iter()
            .map(|e| e.tool.clone())
            .collect()
    }

    /// Adds (or replaces) a tool at run time and tells connected clients the list changed.
    pub async fn add_tool<F, Fut>(&self, tool: Tool, handler: F)
    where
        F: Fn(Value, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        self.inner.tools.insert(ToolEntry {
            tool,
            handler: boxed_tool(handler),
        });
        self.notify_tools_changed().await;
    }

    /// Removes a tool at run time; tells clients when one was removed.
    pub async fn remove_tool(&self, name: &str) -> bool {
        let removed = self.inner.tools.remove(name);
        if removed {
            self.notify_tools_changed().await;
        }
        removed
    }

    /// Announces that the tool list changed: `notifications/tools/list_changed` to every
    /// session-era client, and to every `subscriptions/listen` stream that asked for it.
    ///
    /// It goes through the server's [notification bus](crate::bus) (so, with a shared bus, to
    /// the clients of every process). Like every broadcast, it never waits on a client. A client
    /// whose outbound queue is full (it stopped reading, or reads slower than the server writes)
    /// is owed the change: it gets one `list_changed` of each kind it missed once its queue has
    /// room, however many it missed. That is counted
    /// ([`dropped_notifications`](Self::dropped_notifications)) and logged.
    pub async fn notify_tools_changed(&self) {
        self.inner.bus.publish(BusEvent::ToolsListChanged);
    }

    /// Announces that the resource list changed, to sessions and listen streams, without
    /// waiting on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_resources_changed(&self) {
        self.inner.bus.publish(BusEvent::ResourcesListChanged);
    }

    /// Announces that the prompt list changed, to sessions and listen streams, without waiting
    /// on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_prompts_changed(&self) {
        self.inner.bus.publish(BusEvent::PromptsListChanged);
    }

    /// Announces that the resource at `uri` changed: `notifications/resources/updated` to every
    /// session subscribed to it (`resources/subscribe`) and every listen stream that named it,
    /// without waiting on any (a client that does not keep up loses it; see
    /// [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_resource_updated(&self, uri: &str) {
        self.inner.bus.publish(BusEvent::ResourceUpdated {
            uri: uri.to_owned(),
        });
    }

    /// Ends every open `subscriptions/listen` stream with its `complete` result (for example,
    /// before shutting down). Streams opened later are not affected.
    pub fn end_subscriptions(&self) {
        self.inner.listen_epoch.send_modify(|epoch| *epoch += 1);
    }

    /// Open `subscriptions/listen` streams.
    pub fn listener_count(&self) -> usize {
        self.inner.listeners.load(Ordering::Acquire)
    }

    /// Delivers a bus event to this process's session-era connections.
    fn deliver_to_sessions(&self, event: &BusEvent) {
        match event {
            BusEvent::ToolsListChanged => {
                self.broadcast_list_change(ListKind::Tools, ToolListChangedNotification::METHOD);
            }
            BusEvent::ResourcesListChanged => self.broadcast_list_change(
                ListKind::Resources,
                ResourceListChangedNotification::METHOD,
            ),
            BusEvent::PromptsListChanged => {
                self.broadcast_list_change(ListKind::Prompts, PromptListChangedNotification::METHOD)
            }
            BusEvent::ResourceUpdated { uri } => {
                self.broadcast::<ResourceUpdatedNotification>(
                    &self.live_peers(|c| c.hears_broadcasts() && c.is_subscribed(uri)),
                    || ResourceUpdatedNotificationParams::new(uri),
                );
            }
        }
    }

    /// How many broadcast notifications found a client's outbound queue full since the server
    /// was built: list changes, which are then owed and sent later (one of each kind), and
    /// resource updates, which are lost (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub fn dropped_notifications(&self) -> u64 {
        self.inner.dropped_notifications.load(Ordering::Relaxed)
    }

    /// Queues a notification for each of `peers` where there is room now; returns how many took
    /// it. Waiting on one would hold up every peer after it.
    fn broadcast<N: NotificationType>(
        &self,
        peers: &[Peer],
        params: impl Fn() -> N::Params,
    ) -> usize {
        let mut told = 0;
        let mut dropped = 0;
        for peer in peers {
            match peer.try_notify::<N>(params()) {
                Ok(()) => told += 1,
                Err(error) if error.is_queue_full() => dropped += 1,
                // Closed meanwhile: nobody left to tell.
                Err(error) => {
                    tracing::debug!(%error, method = N::METHOD, "a broadcast was not sent");
                }
            }
        }
        if dropped > 0 {
            self.count_dropped(N::METHOD, dropped, peers.len());
        }
        told
    }

    /// Queues a list change for every live connection where there is room now, and owes it to
    /// the others (see [`catch_up`](crate::catch_up)).
    fn broadcast_list_change(&self, kind: ListKind, method: &'static str) {
        // Only sessions: a connection that only carried stateless requests hears list changes
        // through `subscriptions/listen`, never unasked.
        let connections = self.live_connections(Connection::hears_broadcasts);
        let mut owed = 0;
        for connection in &connections {
            let Some(peer) = connection.peer() else {
                continue;
            };
            match kind.try_send(peer) {
                Ok(()) => {}
                Err(error) if error.is_queue_full() => {
                    owed += 1;
                    connection.owed().owe(connection.peer(), kind);
                }
                // Closed meanwhile: nobody left to tell.
                Err(error) => tracing::debug!(%error, method, "a broadcast was not sent"),
            }
        }
        if owed > 0 {
            self.count_dropped(method, owed, connections.len());
        }
    }

    /// Counts notifications lost by clients that do not keep up, and logs it: at `warn` at most
    /// once per [`DROP_WARNING_EVERY`], otherwise at `debug`.
    fn count_dropped(&self, method: &'static str, dropped: u64, clients: usize) {
        let total = self
            .inner
            .dropped_notifications
            .fetch_add(dropped, Ordering::Relaxed)
            .saturating_add(dropped);
        let now = Instant::now();
        let warn = {
            let mut last = self
                .inner
                .last_drop_warning
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let due = last.is_none_or(|at| now.duration_since(at) >= DROP_WARNING_EVERY);
            if due {
                *last = Some(now);
            }
            due
        };
        if warn {
            tracing::warn!(
                method,
                dropped,
                clients,
                total,
                "clients whose outbound queue is full lost a broadcast notification \
                 (this warning is repeated at most every 10 s)"
            );
        } else {
            tracing::debug!(
                method,
                dropped,
                clients,
                total,
                "clients lost a broadcast notification"
            );
        }
    }

    /// The number of live connections.
    pub fn connection_count(&self) -> usize {
        self.live_peers(|_| true).len()
    }

    fn live_peers(&self, filter: impl Fn(&Connection) -> bool) -> Vec<Peer> {
        self.live_connections(filter)
            .iter()
            .filter_map(|c| c.peer().cloned())
            .collect()
    }

    fn live_connections(&self, filter: impl Fn(&Connection) -> bool) -> Vec<Arc<Connection>> {
        let connections = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        connections
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| c.is_live() && filter(c))
            .collect()
    }
}

/// Describes a server: identity, tools, resources, prompts, completion, limits.
///
/// Setters never fail; [`build`](Self::build) returns the server.
#[must_use]
pub struct ServerBuilder {
    inner: Inner,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("name", &self.inner.info.name)
            .field("eras", &self.inner.eras)
            .finish_non_exhaustive()
    }
}

/// A tool that takes no arguments: `|_: NoArgs, ctx| async { … }`.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// The JSON Schema of `T`, as MCP wants it for a tool's `inputSchema` / `outputSchema`.
pub fn schema_for<T: JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let mut value =
        serde_json::to_value(schema).unwrap_or_else(|_| serde_json::json!({"type": "object"}));
    if let Value::Object(map) = &mut value {
        // The title is the Rust type name; clients show the tool name instead.
        map.remove("title");
        map.entry("type").or_insert_with(|| Value::from("object"));
        if map.get("type") == Some(&Value::from("object")) {
            map.entry("properties")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }
    value
}

impl ServerBuilder {
    fn new(info: Implementation) -> Self {
        Self {
            inner: Inner {
                info,
                instructions: None,
                tools: Registry::new(|e: &ToolEntry| e.tool.name.as_str()),
                resources: Registry::new(|e: &ResourceEntry| e.resource.uri.as_str()),
                templates: Registry::new(|e: &TemplateEntry| e.template.uri_template.as_str()),
                prompts: Registry::new(|e: &PromptEntry| e.prompt.name.as_str()),
                completion: None,
                on_notification: None,
                page_size: 100,
                max_subscriptions: 1024,
                default_log_level: LoggingLevel::Info,
                session_options: SessionOptions::default(),
                tool_cancel_policies: std::collections::HashMap::new(),
                eras: Eras::default(),
                cache: CacheHints::default(),
                state_policy: crate::stateless::state_policy(
                    None,
                    DEFAULT_STATE_TTL,
                    DEFAULT_STATE_BYTES,
                ),
                bus: Arc::new(MemoryBus::new()),
                listeners: Arc::new(AtomicUsize::new(0)),
                max_listeners: 10_000,
                listen_epoch: tokio::sync::watch::Sender::new(0),
                sessions_subscription: OnceLock::new(),
                info_json: OnceLock::new(),
                connections: Mutex::new(Vec::new()),
                dropped_notifications: AtomicU64::new(0),
                last_drop_warning: Mutex::new(None),
            },
        }
    }

    /// Instructions for the client's model, sent with the `initialize` result.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.inner.instructions = Some(instructions.into());
        self
    }

    /// A tool whose arguments are the Rust type `A`: its JSON Schema becomes the tool's
    /// `inputSchema`, and arguments that do not fit it are answered with an `isError` result
    /// naming what is wrong (as the spec asks since 2025-11-25).
    pub fn tool<A, F, Fut>(self, name: &str, description: &str, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        self.typed_tool(Tool::new(name, description, schema_for::<A>()), handler)
    }

    /// A tool with structured output: `O`'s JSON Schema is the tool's `outputSchema`, and its
    /// value is returned as `structuredContent` and, for older clients, as JSON text.
    pub fn structured_tool<A, O, F, Fut>(self, name: &str, description: &str, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
        F: Fn(A, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let tool =
            Tool::new(name, description, schema_for::<A>()).with_output_schema(schema_for::<O>());
        self.typed_tool(tool, move |args: A, ctx: Context| {
            let output = handler(args, ctx);
            async move {
                let value = serde_json::to_value(output.await?)?;
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
                result.structured_content = Some(value);
                Ok(result)
            }
        })
    }

    /// Registers `tool`, decoding its arguments into `A` before `handler` runs; arguments that
    /// do not decode are answered with an `isError` result naming the problem.
    fn typed_tool<A, F, Fut>(self, tool: Tool, handler: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(A, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        let tool_name = tool.name.clone();
        self.tool_raw(tool, move |args: Value, ctx: Context| {
            let call = serde_json::from_value::<A>(args)
                .map(|args| handler(args, ctx))
                .map_err(|e| {
                    // serde quotes the value it could not read: the client's text.
                    let e = excerpt(&e.to_string());
                    ToolError::new(format!("invalid arguments for tool {tool_name}: {e}"))
                });
            async move { call?.await }
        })
    }

    /// A tool described by hand (any `inputSchema`), with raw JSON arguments.
    pub fn tool_raw<F, Fut>(self, tool: Tool, handler: F) -> Self
    where
        F: Fn(Value, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        self.inner.tools.insert(ToolEntry {
            tool,
            handler: boxed_tool(handler),
        });
        self
    }

    /// A resource at a fixed URI and its reader.
    pub fn resource<F, Fut>(self, resource: Resource, reader: F) -> Self
    where
        F: Fn(String, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ReadResourceResult, ErrorObject>> + Send + 'static,
    {
        let handler: Arc<ReadFn> = Arc::new(move |uri, _vars, ctx| Box::pin(reader(uri, ctx)));
        self.inner
            .resources
            .insert(ResourceEntry { resource, handler });
        self
    }

    /// A resource template (`{var}` expressions) and its reader, which receives the URI and the
    /// values of the variables.
    pub fn resource_template<F, Fut>(self, template: ResourceTemplate, reader: F) -> Self
    where
        F: Fn(String, HashMap<String, String>, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ReadResourceResult, ErrorObject>> + Send + 'static,
    {
        let parsed = UriTemplate::new(&template.uri_template);
        let handler: Arc<ReadFn> = Arc::new(move |uri, vars, ctx| Box::pin(reader(uri, vars, ctx)));
        self.inner.templates.insert(TemplateEntry {
            template,
            parsed,
            handler,
        });
        self
    }

    /// A prompt and its handler, which receives the arguments (required ones are checked first).
    pub fn prompt<F, Fut>(self, prompt: Prompt, handler: F) -> Self
    where
        F: Fn(HashMap<String, String>, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<GetPromptResult, ErrorObject>> + Send + 'static,
    {
        let handler: Arc<PromptFn> = Arc::new(move |args, ctx| Box::pin(handler(args, ctx)));
        self.inner.prompts.insert(PromptEntry { prompt, handler });
        self
    }

    /// Answers `completion/complete` (by default: no suggestions).
    pub fn completion<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CompleteParams, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CompleteResult, ErrorObject>> + Send + 'static,
    {
        self.inner.completion = Some(Arc::new(move |params, ctx| Box::pin(handler(params, ctx))));
        self
    }

    /// Called with each notification a client sends (`initialized`, `roots/list_changed`, …),
    /// in order, on the connection's reader: keep it short.
    pub fn on_notification(
        mut self,
        callback: impl Fn(ClientNotification, &Peer) + Send + Sync + 'static,
    ) -> Self {
        self.inner.on_notification = Some(Arc::new(callback));
        self
    }

    /// Items per page of `tools/list`, `resources/list`, … (default 100).
    pub fn page_size(mut self, size: usize) -> Self {
        self.inner.page_size = size.max(1);
        self
    }

    /// The most resources one connection may subscribe to (default 1024).
    pub fn max_subscriptions(mut self, limit: usize) -> Self {
        self.inner.max_subscriptions = limit;
        self
    }

    /// The least severe log level sent before a client sets one (default `info`).
    pub fn default_log_level(mut self, level: LoggingLevel) -> Self {
        self.inner.default_log_level = level;
        self
    }

    /// Limits and timeouts of each connection's session.
    pub fn session_options(mut self, options: SessionOptions) -> Self {
        self.inner.session_options = options;
        self
    }

    /// What a cancellation does to the handlers of this server's requests (default
    /// [`CancelPolicy::Abort`]: the task is aborted at its next `.await`, so drop guards and
    /// [`Context::on_cancel`](crate::Context::on_cancel) cleanups run, and code after the
    /// `.await` does not). [`CancelPolicy::Cooperative`] only fires
    /// [`Context::cancelled`](crate::Context::cancelled), for handlers that stop on their own.
    /// [`cancel_policy_for`](Self::cancel_policy_for) sets it per tool. (The same setting as
    /// `SessionOptions::cancel_policy`; the later call wins.)
    pub fn cancel_policy(mut self, policy: CancelPolicy) -> Self {
        self.inner.session_options = self.inner.session_options.cancel_policy(policy);
        self
    }

    /// What a cancellation does to tool `name`'s handler, whatever the server's
    /// [`cancel_policy`](Self::cancel_policy): say [`CancelPolicy::Cooperative`] for a tool
    /// that saves partial work when it notices `ctx.cancelled()`.
    pub fn cancel_policy_for(mut self, name: &str, policy: CancelPolicy) -> Self {
        self.inner
            .tool_cancel_policies
            .insert(name.to_owned(), policy);
        self
    }

    /// Which eras to serve (default: both, [`Eras::Dual`]). [`Eras::Modern`] refuses
    /// `initialize` naming the versions it serves; [`Eras::Legacy`] serves as before
    /// 2026-07-28 (`server/discover` is an unknown method). Streamable HTTP has the same
    /// setting for its endpoint (`HttpConfig::eras`); give both the same value.
    pub fn eras(mut self, eras: Eras) -> Self {
        self.inner.eras = eras;
        self
    }

    /// The caching hint of every stateless `server/discover`, list and `resources/read` result
    /// (default: [`CacheHint::NONE`], stale at once and private).
    pub fn cache_hint(mut self, hint: CacheHint) -> Self {
        self.inner.cache.default = hint;
        self
    }

    /// The caching hint of one item. A list's hint is taken over all its items (the shortest
    /// lifetime, private if any item is), the same on every page; `resources/read` takes the
    /// hint of its resource, or of the template its URI matches.
    pub fn cache_hint_for(mut self, item: CacheItem, hint: CacheHint) -> Self {
        self.inner.cache.items.insert(item, hint);
        self
    }

    /// The keys that seal the `requestState` of stateless questions (default: one random key
    /// per process). Give every process behind one endpoint the same ring.
    pub fn state_keys(mut self, keys: KeyRing) -> Self {
        self.inner.state_policy.keys = keys;
        self
    }

    /// How long a `requestState` stays valid (default 10 minutes): a client that answers later
    /// must start the request again.
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        self.inner.state_policy.ttl = ttl;
        self
    }

    /// The largest `requestState` in bytes before sealing (default 256 KiB): the answers a
    /// request gathers travel in it.
    pub fn max_state_bytes(mut self, bytes: usize) -> Self {
        self.inner.state_policy.max_bytes = bytes;
        self
    }

    /// The bus list changes and resource updates travel on (default: a [`MemoryBus`], this
    /// process only).
    pub fn notification_bus(mut self, bus: Arc<dyn NotificationBus>) -> Self {
        self.inner.bus = bus;
        self
    }

    /// The most `subscriptions/listen` streams open at once (default 10,000); past it a listen
    /// is answered `-32001`.
    pub fn max_listeners(mut self, limit: usize) -> Self {
        self.inner.max_listeners = limit;
        self
    }

    /// The server.
    pub fn build(self) -> Server {
        let server = Server {
            inner: Arc::new(self.inner),
        };
        // Session-era connections hear the bus through one subscriber; it holds the server
        // weakly, so the subscription ends with the server.
        let weak = Arc::downgrade(&server.inner);
        let subscription = server
            .inner
            .bus
            .subscribe(Arc::new(move |event: &BusEvent| {
                if let Some(inner) = weak.upgrade() {
                    Server { inner }.deliver_to_sessions(event);
                }
            }));
        let _ = server.inner.sessions_subscription.set(subscription);
        server
    }
}
