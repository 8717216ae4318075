//! What one server holds, shared by its handle, its builder and every connection it serves:
//! what it offers, its settings and limits, its bus, and the table of its live connections.
//!
//! Generic over the context its handlers take (always [`Context`](crate::Context), named
//! [`ServerInner`](crate::context::ServerInner) there), so that this module depends on neither the
//! context nor anything above it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use serde_json::json;
use tidewire_core::jsonrpc::Request;
use tidewire_core::lifecycle::Lifecycle;
use tidewire_core::schema::{
    ClientNotification, Implementation, LoggingLevel, SKILLS_EXTENSION, ServerCapabilities,
    ServerTaskRequests, ServerTasksCapability, TASKS_EXTENSION, TaskSupport, TaskToolsRequests,
};
use tidewire_core::session::{CancelPolicy, Peer, SessionOptions};
use tidewire_core::version::Eras;
use tidewire_skills::SkillSet;

use crate::bus::{MemoryBus, NotificationBus, Subscription};
use crate::cache::CacheHints;
use crate::connection::Connection;
use crate::registry::{CompleteFn, PromptEntry, Registry, ResourceEntry, TemplateEntry, ToolEntry};
use crate::rounds::StatePolicy;
use crate::tasks::{MemoryTaskStore, Tasks};

/// A callback for each notification a client sends.
pub(crate) type NotificationFn = dyn Fn(ClientNotification, &Peer) + Send + Sync;

/// The state of one server (see the module docs).
pub(crate) struct ServerState<C> {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) tools: Registry<ToolEntry<C>>,
    pub(crate) resources: Registry<ResourceEntry<C>>,
    pub(crate) templates: Registry<TemplateEntry<C>>,
    pub(crate) prompts: Registry<PromptEntry<C>>,
    pub(crate) completion: Option<Arc<CompleteFn<C>>>,
    pub(crate) on_notification: Option<Arc<NotificationFn>>,
    pub(crate) page_size: usize,
    pub(crate) max_subscriptions: usize,
    pub(crate) default_log_level: LoggingLevel,
    pub(crate) session_options: SessionOptions,
    /// Tools whose cancellation differs from the connection's policy.
    pub(crate) tool_cancel_policies: HashMap<String, CancelPolicy>,
    /// Which eras are served.
    pub(crate) eras: Eras,
    /// Caching hints of stateless results.
    pub(crate) cache: CacheHints,
    /// How stateless `requestState` is sealed.
    pub(crate) state_policy: Arc<StatePolicy>,
    /// Where list changes and resource updates go, to sessions and listen streams alike.
    pub(crate) bus: Arc<dyn NotificationBus>,
    /// Open listen streams, and their limit.
    pub(crate) listeners: Arc<AtomicUsize>,
    pub(crate) max_listeners: usize,
    /// Bumped to end every listen stream.
    pub(crate) listen_epoch: tokio::sync::watch::Sender<u64>,
    /// This process's session-era connections hear the bus through this.
    pub(crate) sessions_subscription: OnceLock<Subscription>,
    /// `info` as JSON, for the `serverInfo` of every stateless result.
    info_json: OnceLock<Value>,
    /// What `finish` adds to a stateless result, in wire form (see `result_tail`).
    result_tail: OnceLock<Box<[u8]>>,
    /// The connections served, held weakly; swept as the table grows.
    connections: Mutex<Vec<Weak<Connection>>>,
    /// Broadcast notifications that a client lost because its outbound queue was full.
    pub(crate) dropped_notifications: AtomicU64,
    /// When such a loss was last logged at `warn`.
    pub(crate) last_drop_warning: Mutex<Option<Instant>>,
    /// The tasks of this server: their store, and the ones running in this process.
    pub(crate) tasks: Arc<Tasks>,
    /// Tools whose handler starts its task itself (`Context::continue_as_task`).
    pub(crate) deferred_tasks: HashSet<String>,
    /// The scopes a call of each tool needs (`ServerBuilder::tool_scopes`).
    pub(crate) tool_scopes: HashMap<String, Vec<String>>,
    /// The scopes reading each resource or template needs (`ServerBuilder::resource_scopes`),
    /// by its URI or URI template.
    pub(crate) resource_scopes: HashMap<String, Vec<String>>,
    /// The skills offered (the skills extension), if any.
    pub(crate) skills: Option<Arc<SkillSet>>,
    /// Whether the server drains, and its requests in flight (every request served counts).
    pub(crate) lifecycle: Lifecycle,
}

impl<C> std::fmt::Debug for ServerState<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("name", &self.info.name)
            .field("eras", &self.eras)
            .finish_non_exhaustive()
    }
}

impl<C> ServerState<C> {
    /// A server that offers nothing yet, with the default settings.
    pub(crate) fn new(info: Implementation) -> Self {
        Self {
            info,
            instructions: None,
            tools: Registry::new(|e: &ToolEntry<C>| e.tool.name.as_str()),
            resources: Registry::new(|e: &ResourceEntry<C>| e.resource.uri.as_str()),
            templates: Registry::new(|e: &TemplateEntry<C>| e.template.uri_template.as_str()),
            prompts: Registry::new(|e: &PromptEntry<C>| e.prompt.name.as_str()),
            completion: None,
            on_notification: None,
            page_size: 100,
            max_subscriptions: 1024,
            default_log_level: LoggingLevel::Info,
            session_options: SessionOptions::default(),
            tool_cancel_policies: HashMap::new(),
            eras: Eras::default(),
            cache: CacheHints::default(),
            state_policy: Arc::new(StatePolicy::default()),
            bus: Arc::new(MemoryBus::new()),
            listeners: Arc::new(AtomicUsize::new(0)),
            max_listeners: 10_000,
            listen_epoch: tokio::sync::watch::Sender::new(0),
            sessions_subscription: OnceLock::new(),
            info_json: OnceLock::new(),
            result_tail: OnceLock::new(),
            connections: Mutex::new(Vec::new()),
            dropped_notifications: AtomicU64::new(0),
            last_drop_warning: Mutex::new(None),
            tasks: Arc::new(Tasks::new(
                Arc::new(MemoryTaskStore::default()),
                Duration::from_millis(500),
                crate::tasks::DEFAULT_LEASE,
            )),
            deferred_tasks: HashSet::new(),
            tool_scopes: HashMap::new(),
            resource_scopes: HashMap::new(),
            skills: None,
            lifecycle: Lifecycle::new(),
        }
    }

    /// `info` as JSON, serialised once.
    /// The cancel policy set for the tool `request` calls, if one was (`cancel_policy_for`).
    pub(crate) fn cancel_policy_of(&self, request: &Request) -> Option<CancelPolicy> {
        let policies = &self.tool_cancel_policies;
        if policies.is_empty() || request.method != "tools/call" {
            return None;
        }
        let name = request.params.as_ref()?.get("name")?.as_str()?;
        policies.get(name).copied()
    }

    pub(crate) fn info_json(&self) -> &Value {
        self.info_json
            .get_or_init(|| serde_json::to_value(&self.info).unwrap_or(Value::Null))
    }

    /// The members every stateless result carries, as JSON text without the braces around
    /// them: `"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{…}}`
    /// (an empty `_meta` when the info cannot be written). Written once per server, spliced
    /// into every tool result written straight from its type.
    pub(crate) fn result_tail(&self) -> &[u8] {
        self.result_tail.get_or_init(|| {
            let mut meta = serde_json::Map::new();
            let info = self.info_json();
            if !info.is_null() {
                meta.insert(
                    tidewire_core::schema::meta_keys::SERVER_INFO.to_owned(),
                    info.clone(),
                );
            }
            let members = serde_json::json!({
                "resultType": tidewire_core::schema::result_type::COMPLETE,
                "_meta": meta,
            });
            let text = members.to_string();
            // `{…}` → `…`: the members alone, to splice into another object.
            text.get(1..text.len().saturating_sub(1))
                .unwrap_or_default()
                .as_bytes()
                .into()
        })
    }

    /// Whether any tool may run as a task.
    pub(crate) fn has_tasks(&self) -> bool {
        !self.deferred_tasks.is_empty()
            || self
                .tools
                .snapshot()
                .iter()
                .any(|e| e.tool.task_support() != TaskSupport::Forbidden)
    }

    /// What the server offers, as `server/discover` says it (2026-07-28): tasks are the
    /// extension, never the session era's `tasks` capability.
    pub(crate) fn modern_capabilities(&self) -> ServerCapabilities {
        let caps = self.base_capabilities();
        if self.has_tasks() {
            return caps.with_extension(TASKS_EXTENSION, json!({}));
        }
        caps
    }

    /// What the server offers, as `initialize` says it (the session era: tasks of 2025-11-25).
    pub(crate) fn capabilities(&self) -> ServerCapabilities {
        let mut caps = self.base_capabilities();
        if self.has_tasks() {
            caps.tasks = Some(ServerTasksCapability {
                list: Some(Default::default()),
                cancel: Some(Default::default()),
                requests: Some(ServerTaskRequests {
                    tools: Some(TaskToolsRequests {
                        call: Some(Default::default()),
                        extra: Default::default(),
                    }),
                    extra: Default::default(),
                }),
                extra: Default::default(),
            });
        }
        caps
    }

    fn base_capabilities(&self) -> ServerCapabilities {
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
        if self.skills.is_some() {
            // Its files are resources, so `resources` is declared too.
            caps = caps.with_extension(SKILLS_EXTENSION, json!({"directoryRead": true}));
        }
        caps
    }

    /// A new connection, in the state this server's settings give it.
    pub(crate) fn connection(&self, eras: Eras) -> Connection {
        Connection::new(eras, self.default_log_level, self.max_subscriptions)
    }

    /// Adds a started connection (its peer set) to the table broadcasts go through.
    pub(crate) fn register(&self, connection: &Arc<Connection>) {
        let mut connections = self
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
        connections.push(Arc::downgrade(connection));
    }

    /// The live connections that pass `filter`.
    pub(crate) fn live_connections(
        &self,
        filter: impl Fn(&Connection) -> bool,
    ) -> Vec<Arc<Connection>> {
        let connections = self
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
