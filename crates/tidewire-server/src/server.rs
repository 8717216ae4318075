//! The server: what it offers, and how it serves a connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
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
use tidewire_core::session::{Driver, Peer, Session, SessionOptions};
use tidewire_core::transport::Transport;
use tidewire_core::transport::text::excerpt;

use crate::catch_up::{self, ListKind};
use crate::connection::{Connection, ConnectionHandler};
use crate::context::Context;
use crate::error::ToolError;
use crate::registry::{
    CompleteFn, PromptEntry, PromptFn, ReadFn, Registry, ResourceEntry, TemplateEntry, ToolEntry,
    boxed_tool,
};
use crate::uri_template::UriTemplate;

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
    connections: Mutex<Vec<Weak<Connection>>>,
    /// Broadcast notifications that a client lost because its outbound queue was full.
    dropped_notifications: AtomicU64,
    /// When such a loss was last logged at `warn`.
    last_drop_warning: Mutex<Option<Instant>>,
}

impl Inner {
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

impl Server {
    /// Starts describing a server.
    pub fn builder(info: Implementation) -> ServerBuilder {
        ServerBuilder::new(info)
    }

    /// Sets up one connection over `transport`. Poll (or spawn) the [`Driver`]; the [`Peer`]
    /// reaches the client.
    pub fn serve<T: Transport>(&self, transport: T) -> (Peer, Driver) {
        let connection = Arc::new(Connection::new(self.inner.clone()));
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
        connections.retain(|c| c.upgrade().is_some_and(|c| c.is_live()));
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

    /// Sends `notifications/tools/list_changed` to every connected client.
    ///
    /// Like every broadcast, it never waits on a client. A client whose outbound queue is full
    /// (it stopped reading, or reads slower than the server writes) is owed the change: it gets
    /// one `list_changed` of each kind it missed once its queue has room, however many it
    /// missed. That is counted ([`dropped_notifications`](Self::dropped_notifications)) and
    /// logged.
    pub async fn notify_tools_changed(&self) {
        self.broadcast_list_change(ListKind::Tools, ToolListChangedNotification::METHOD);
    }

    /// Sends `notifications/resources/list_changed` to every connected client, without waiting
    /// on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_resources_changed(&self) {
        self.broadcast_list_change(ListKind::Resources, ResourceListChangedNotification::METHOD);
    }

    /// Sends `notifications/prompts/list_changed` to every connected client, without waiting on
    /// any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_prompts_changed(&self) {
        self.broadcast_list_change(ListKind::Prompts, PromptListChangedNotification::METHOD);
    }

    /// Sends `notifications/resources/updated` for `uri` to every client subscribed to it,
    /// without waiting on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    /// Returns how many clients were told: subscribers whose queue had room.
    pub async fn notify_resource_updated(&self, uri: &str) -> usize {
        self.broadcast::<ResourceUpdatedNotification>(
            &self.live_peers(|c| c.is_subscribed(uri)),
            || ResourceUpdatedNotificationParams::new(uri),
        )
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
        let connections = self.live_connections(|_| true);
        let mut owed = 0;
        for connection in &connections {
            let Some(peer) = connection.peer() else {
                continue;
            };
            match kind.try_send(peer) {
                Ok(()) => {}
                Err(error) if error.is_queue_full() => {
                    owed += 1;
                    catch_up::owe(connection, kind);
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

    /// The server.
    pub fn build(self) -> Server {
        Server {
            inner: Arc::new(self.inner),
        }
    }
}
