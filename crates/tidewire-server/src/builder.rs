//! Describing a server: its identity, what it offers, its settings and limits.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CallToolResult, ClientNotification, CompleteParams, CompleteResult, ContentBlock,
    GetPromptResult, Implementation, LoggingLevel, Prompt, ReadResourceResult, Resource,
    ResourceTemplate, TaskSupport, Tool, ToolExecution,
};
use tidewire_core::session::{CancelPolicy, Peer, SessionOptions};
use tidewire_core::text::excerpt;
use tidewire_core::version::Eras;

use crate::bus::{BusEvent, NotificationBus};
use crate::cache::{CacheHint, CacheItem};
use crate::context::{Context, ServerInner};
use crate::error::ToolError;
use crate::registry::{
    PromptEntry, PromptFn, ReadFn, ResourceEntry, TemplateEntry, ToolEntry, boxed_tool,
};
use crate::seal::KeyRing;
use crate::server::Server;
use crate::state::ServerState;
use crate::tasks::{TaskStore, Tasks};
use crate::uri_template::UriTemplate;
use tidewire_skills::SkillSet;

impl Server {
    /// Starts describing a server.
    pub fn builder(info: Implementation) -> ServerBuilder {
        ServerBuilder::new(info)
    }
}

/// Describes a server: identity, tools, resources, prompts, completion, limits.
///
/// Setters never fail; [`build`](Self::build) returns the server.
#[must_use]
pub struct ServerBuilder {
    inner: ServerInner,
    /// Task support by tool, written into the tools as the server is built.
    task_support: HashMap<String, TaskSupport>,
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
            inner: ServerState::new(info),
            task_support: HashMap::new(),
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
        let handler: Arc<ReadFn<Context>> =
            Arc::new(move |uri, _vars, ctx| Box::pin(reader(uri, ctx)));
        self.inner
            .resources
            .insert(ResourceEntry { resource, handler });
        self
    }

    /// Offers `skills` (the `io.modelcontextprotocol/skills` extension, in both eras): the
    /// server declares the extension (with `directoryRead`), answers `skills/list`,
    /// `skills/get` and `resources/directory/read`, and serves every skill file as a resource
    /// at its `skill://` URI. Calling it again replaces the set (files of the old set stay
    /// listed as resources).
    ///
    /// ```
    /// use tidewire_server::skill::{Skill, SkillSet};
    /// use tidewire_server::{Server, schema::Implementation};
    ///
    /// let skills = SkillSet::new().with(Skill::new(
    ///     "refunds",
    ///     "---\nname: refunds\ndescription: Process refund requests\n---\n\nCheck the date.\n",
    /// )?)?;
    /// let server = Server::builder(Implementation::new("shop", "1.0")).skills(skills).build();
    /// # let _ = server;
    /// # Ok::<(), tidewire_server::skill::SkillError>(())
    /// ```
    pub fn skills(mut self, skills: SkillSet) -> Self {
        for entry in crate::skills::resources(&skills) {
            self.inner.resources.insert(entry);
        }
        self.inner.skills = Some(Arc::new(skills));
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
        let handler: Arc<ReadFn<Context>> =
            Arc::new(move |uri, vars, ctx| Box::pin(reader(uri, vars, ctx)));
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
        let handler: Arc<PromptFn<Context>> =
            Arc::new(move |args, ctx| Box::pin(handler(args, ctx)));
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
        Arc::make_mut(&mut self.inner.state_policy).keys = keys;
        self
    }

    /// How long a `requestState` stays valid (default 10 minutes): a client that answers later
    /// must start the request again.
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        Arc::make_mut(&mut self.inner.state_policy).ttl = ttl;
        self
    }

    /// The largest `requestState` in bytes before sealing (default 256 KiB): the answers a
    /// request gathers travel in it.
    pub fn max_state_bytes(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.inner.state_policy).max_bytes = bytes;
        self
    }

    /// The bus list changes and resource updates travel on (default: a [`MemoryBus`](crate::bus::MemoryBus), this
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

    /// A call of tool `name` needs every scope in `scopes`: checked here, in the server, from
    /// the request's [`Principal`](tidewire_core::transport::Principal) (what an
    /// authentication layer such as `tidewire_auth::BearerLayer` granted), on every transport
    /// and in both eras. A call without them, or without a principal at all, is refused with
    /// `-32003` ([`ErrorCode::INSUFFICIENT_SCOPE`](tidewire_core::jsonrpc::ErrorCode::INSUFFICIENT_SCOPE)),
    /// its data naming the scopes. Over HTTP, give `BearerLayer::tool_scopes` the same scopes
    /// too: it answers `403 insufficient_scope` before the body reaches the server, which is
    /// what lets a client step up its authorization. Calling it again for `name` adds scopes.
    pub fn tool_scopes(
        mut self,
        name: &str,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        add_scopes(&mut self.inner.tool_scopes, name, scopes);
        self
    }

    /// The scopes a principal needs to read resource `uri`, or any resource of the template
    /// `uri` names (its `uriTemplate`, as given to `resource_template`): checked by
    /// `resources/read`, `resources/subscribe` and a `subscriptions/listen` naming the resource,
    /// on every transport and in both eras, against the request's
    /// [`Principal`](tidewire_core::transport::Principal). A request without them, or without a
    /// principal at all, is refused with `-32003`, its data naming the scopes. A URI is checked
    /// against what `resources/read` would serve it from: the resource itself, else the first
    /// template it matches. Listings are not filtered (they name what exists, not what it
    /// holds). Calling it again for `uri` adds scopes.
    pub fn resource_scopes(
        mut self,
        uri: &str,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        add_scopes(&mut self.inner.resource_scopes, uri, scopes);
        self
    }

    /// Whether tool `name` may run as a task (default [`TaskSupport::Forbidden`]): it is
    /// written into the tool's `execution.taskSupport`. With `Optional`, a call runs as a task
    /// when the client allows it (it declares the tasks extension on 2026-07-28, sends
    /// `params.task` on 2025-11-25) and directly otherwise; with `Required`, a call that cannot
    /// be a task is refused. See [`tasks`](crate::tasks).
    pub fn task_support(mut self, name: &str, support: TaskSupport) -> Self {
        self.task_support.insert(name.to_owned(), support);
        self
    }

    /// Tool `name`'s handler starts its task itself, with
    /// [`Context::continue_as_task`](crate::Context::continue_as_task): until then the call is
    /// a plain one, so it may ask the client what it needs first. Its task support is
    /// `optional` unless [`task_support`](Self::task_support) says otherwise.
    pub fn deferred_task(mut self, name: &str) -> Self {
        self.inner.deferred_tasks.insert(name.to_owned());
        self.task_support
            .entry(name.to_owned())
            .or_insert(TaskSupport::Optional);
        self
    }

    /// Where task records live (default: a [`MemoryTaskStore`](crate::tasks::MemoryTaskStore)
    /// with the default [`TaskLimits`](crate::tasks::TaskLimits)).
    pub fn task_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        let (poll, lease) = (self.inner.tasks.poll_interval, self.inner.tasks.lease);
        self.inner.tasks = Arc::new(Tasks::new(store, poll, lease));
        self
    }

    /// How often clients are told to poll a task (default 500 ms).
    pub fn task_poll_interval(mut self, every: Duration) -> Self {
        let (store, lease) = (self.inner.tasks.store(), self.inner.tasks.lease);
        let every = every.max(Duration::from_millis(1));
        self.inner.tasks = Arc::new(Tasks::new(store, every, lease));
        self
    }

    /// How long a running task's lease lasts (default 15 s; at least 30 ms). The process
    /// running a task renews it every third of that; when the process dies, the first to read
    /// the task after the lease ran out fails it, saying why. With a shared task store
    /// ([`task_store`](Self::task_store)), this bounds how long a task of a dead replica shows
    /// `working`.
    pub fn task_lease(mut self, lease: Duration) -> Self {
        let (store, poll) = (self.inner.tasks.store(), self.inner.tasks.poll_interval);
        self.inner.tasks = Arc::new(Tasks::new(store, poll, lease));
        self
    }

    /// The server.
    pub fn build(mut self) -> Server {
        for (name, support) in std::mem::take(&mut self.task_support) {
            if let Some(entry) = self.inner.tools.get(&name) {
                let mut tool = entry.tool.clone();
                tool.execution = Some(ToolExecution {
                    task_support: Some(support),
                });
                self.inner.tools.insert(ToolEntry {
                    tool,
                    handler: entry.handler.clone(),
                });
            }
        }
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
                    inner.deliver_to_sessions(event);
                }
            }));
        let _ = server.inner.sessions_subscription.set(subscription);
        server.inner.tasks.attach_bus(server.inner.bus.clone());
        server
    }
}

/// Adds `scopes` to what `key` needs, each once.
fn add_scopes(
    table: &mut HashMap<String, Vec<String>>,
    key: &str,
    scopes: impl IntoIterator<Item = impl Into<String>>,
) {
    let needed = table.entry(key.to_owned()).or_default();
    for scope in scopes {
        let scope = scope.into();
        if !needed.contains(&scope) {
            needed.push(scope);
        }
    }
}
