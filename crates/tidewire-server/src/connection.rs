//! One client connection: its negotiated state and the dispatch of its requests.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Notification, Request};
use tidewire_core::schema::{
    CallToolParams, CallToolResult, ClientCapabilities, ClientNotification, ClientRequest,
    CompleteResult, EmptyResult, GetPromptParams, Implementation, InitializeParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, PaginatedParams,
};
use tidewire_core::session::{CancelPolicy, Handler, Peer, RequestContext};
use tidewire_core::transport::text::excerpt;

use crate::catch_up::Owed;
use crate::context::Context;
use crate::listing::Listing;
use crate::server::{Inner, Server};

/// The longest URI a client may subscribe to, in bytes (subscriptions last as long as the
/// connection, so each is bounded in size as well as in number).
pub(crate) const MAX_SUBSCRIBED_URI: usize = 8 * 1024;

/// The server side of one connection.
pub(crate) struct Connection {
    server: Arc<Inner>,
    peer: OnceLock<Peer>,
    client: RwLock<Option<(ClientCapabilities, Implementation)>>,
    initialized: AtomicBool,
    /// 0 = not set by the client; otherwise 1 + the level's index.
    log_level: AtomicU8,
    subscriptions: Mutex<HashSet<String>>,
    /// List changes it missed while its queue was full.
    owed: Arc<Owed>,
    /// The eras served on this connection.
    eras: tidewire_core::version::Eras,
    /// It carried a stateless request.
    served_stateless: AtomicBool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("initialized", &self.initialized.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn new(server: Arc<Inner>, eras: tidewire_core::version::Eras) -> Self {
        Self {
            eras,
            served_stateless: AtomicBool::new(false),
            server,
            peer: OnceLock::new(),
            client: RwLock::new(None),
            initialized: AtomicBool::new(false),
            log_level: AtomicU8::new(0),
            subscriptions: Mutex::new(HashSet::new()),
            owed: Arc::default(),
        }
    }

    pub(crate) fn owed(&self) -> &Arc<Owed> {
        &self.owed
    }

    pub(crate) fn set_peer(&self, peer: Peer) {
        let _ = self.peer.set(peer);
    }

    pub(crate) fn peer(&self) -> Option<&Peer> {
        self.peer.get()
    }

    pub(crate) fn server_inner(&self) -> &Arc<Inner> {
        &self.server
    }

    pub(crate) fn server(&self) -> Server {
        Server {
            inner: self.server.clone(),
        }
    }

    pub(crate) fn is_live(&self) -> bool {
        self.peer.get().is_some_and(|p| !p.is_closed())
    }

    pub(crate) fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|c| c.0.clone())
    }

    pub(crate) fn client_info(&self) -> Option<Implementation> {
        self.client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|c| c.1.clone())
    }

    pub(crate) fn should_log(&self, level: LoggingLevel) -> bool {
        let threshold = match self.log_level.load(Ordering::Relaxed) {
            0 => self.server.default_log_level,
            n => LoggingLevel::ALL
                .get(usize::from(n) - 1)
                .copied()
                .unwrap_or(LoggingLevel::Debug),
        };
        level >= threshold
    }

    /// Whether broadcasts (list changes, resource updates) go to this connection: a session
    /// (`initialize` ran), or a connection that has said nothing yet. One that carried only
    /// stateless requests hears them through `subscriptions/listen`, never unasked.
    pub(crate) fn hears_broadcasts(&self) -> bool {
        let session = self
            .client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some();
        session || !self.served_stateless.load(Ordering::Relaxed)
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(uri)
    }

    async fn serve(
        self: &Arc<Self>,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        let eras = self.eras;
        if eras.modern() && tidewire_core::version::is_stateless_request(request.params.as_ref()) {
            self.served_stateless.store(true, Ordering::Relaxed);
            return crate::stateless::serve(self, request, ctx).await;
        }
        if !eras.legacy() {
            return Err(session_refused(&request));
        }
        let typed = ClientRequest::from_parts(&request.method, request.params)?;
        match typed {
            ClientRequest::Initialize(params) => reply(self.initialize(params, ctx.peer())),
            ClientRequest::Ping(_) => reply(EmptyResult::new()),
            ClientRequest::ListTools(params) => reply(self.list::<ListToolsResult>(&params)?),
            ClientRequest::CallTool(params) => reply(
                self.call_tool(params, Context::new(ctx, self.clone()))
                    .await?,
            ),
            ClientRequest::ListResources(params) => {
                reply(self.list::<ListResourcesResult>(&params)?)
            }
            ClientRequest::ListResourceTemplates(params) => {
                reply(self.list::<ListResourceTemplatesResult>(&params)?)
            }
            ClientRequest::ReadResource(params) => reply(
                self.read_resource(params.uri, Context::new(ctx, self.clone()))
                    .await?,
            ),
            ClientRequest::Subscribe(params) => {
                self.subscribe(params.uri)?;
                reply(EmptyResult::new())
            }
            ClientRequest::Unsubscribe(params) => {
                self.subscriptions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&params.uri);
                reply(EmptyResult::new())
            }
            ClientRequest::ListPrompts(params) => reply(self.list::<ListPromptsResult>(&params)?),
            ClientRequest::GetPrompt(params) => reply(
                self.get_prompt(params, Context::new(ctx, self.clone()))
                    .await?,
            ),
            ClientRequest::Complete(params) => {
                let result = match &self.server.completion {
                    Some(complete) => complete(params, Context::new(ctx, self.clone())).await?,
                    None => CompleteResult::new(Vec::new()),
                };
                reply(result)
            }
            ClientRequest::SetLevel(params) => {
                let index = LoggingLevel::ALL
                    .iter()
                    .position(|l| *l == params.level)
                    .unwrap_or(0);
                self.log_level
                    .store(u8::try_from(index + 1).unwrap_or(1), Ordering::Relaxed);
                reply(EmptyResult::new())
            }
            // Tasks are not served yet; every other method is unknown.
            other => Err(ErrorObject::method_not_found(&excerpt(other.method()))),
        }
    }

    /// The page of a list `params` asks for (tools, resources, templates or prompts).
    pub(crate) fn list<L: Listing>(&self, params: &PaginatedParams) -> Result<L, ErrorObject> {
        crate::listing::list(&self.server, params)
    }

    fn initialize(&self, params: InitializeParams, peer: &Peer) -> InitializeResult {
        let version = ProtocolVersion::negotiate(&params.protocol_version);
        peer.set_protocol_version(version);
        *self
            .client
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((params.capabilities, params.client_info));
        let mut result = InitializeResult::new(
            version,
            self.server.capabilities(),
            self.server.info.clone(),
        );
        result.instructions.clone_from(&self.server.instructions);
        result
    }

    pub(crate) async fn call_tool(
        &self,
        params: CallToolParams,
        ctx: Context,
    ) -> Result<CallToolResult, ErrorObject> {
        let Some(entry) = self.server.tools.get(&params.name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown tool: {}",
                excerpt(&params.name)
            )));
        };
        let args = Value::Object(params.arguments.unwrap_or_default());
        match (entry.handler)(args, ctx).await {
            Ok(result) => Ok(result),
            Err(error) => match error.into_protocol() {
                Ok(message) => Ok(CallToolResult::error_text(message)),
                Err(protocol) => Err(protocol),
            },
        }
    }

    pub(crate) async fn read_resource(
        &self,
        uri: String,
        ctx: Context,
    ) -> Result<tidewire_core::schema::ReadResourceResult, ErrorObject> {
        if let Some(entry) = self.server.resources.get(&uri) {
            return (entry.handler)(uri, Default::default(), ctx).await;
        }
        for entry in self.server.templates.snapshot() {
            if let Some(vars) = entry.parsed.matches(&uri) {
                return (entry.handler)(uri, vars, ctx).await;
            }
        }
        Err(resource_not_found(&uri))
    }

    fn subscribe(&self, uri: String) -> Result<(), ErrorObject> {
        // Kept for the connection's life: each one is bounded in size, not only in number.
        if uri.len() > MAX_SUBSCRIBED_URI {
            return Err(ErrorObject::invalid_params(format!(
                "the URI to subscribe to is {} bytes; the limit is {MAX_SUBSCRIBED_URI}",
                uri.len()
            )));
        }
        let mut subs = self
            .subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if subs.len() >= self.server.max_subscriptions && !subs.contains(&uri) {
            return Err(ErrorObject::invalid_params(format!(
                "too many subscriptions on this connection (limit {})",
                self.server.max_subscriptions
            )));
        }
        subs.insert(uri);
        Ok(())
    }

    pub(crate) async fn get_prompt(
        &self,
        params: GetPromptParams,
        ctx: Context,
    ) -> Result<tidewire_core::schema::GetPromptResult, ErrorObject> {
        let Some(entry) = self.server.prompts.get(&params.name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown prompt: {}",
                excerpt(&params.name)
            )));
        };
        let args: std::collections::HashMap<String, String> =
            params.arguments.unwrap_or_default().into_iter().collect();
        let missing: Vec<&str> = entry
            .prompt
            .arguments
            .iter()
            .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(ErrorObject::invalid_params(format!(
                "prompt {} is missing required arguments: {}",
                params.name,
                missing.join(", ")
            )));
        }
        (entry.handler)(args, ctx).await
    }
}

/// The answer of a server that serves only the stateless revision to a session-era request:
/// `-32022` naming the versions it serves for `initialize`, `-32602` (no `_meta`) otherwise.
fn session_refused(request: &Request) -> ErrorObject {
    if request.method == "initialize" {
        return tidewire_core::stateless::initialize_refused(request.params.as_ref());
    }
    ErrorObject::invalid_params(format!(
        "this server serves only the stateless revision (2026-07-28): the request needs \
         params._meta[{:?}] and [{:?}]",
        tidewire_core::schema::meta_keys::PROTOCOL_VERSION,
        tidewire_core::schema::meta_keys::CLIENT_CAPABILITIES
    ))
}

/// `-32002`, the error for a resource that does not exist (2024-11-05 … 2025-11-25). The URI,
/// the client's text, is quoted as an excerpt, in the message and in `data.uri` alike.
pub(crate) fn resource_not_found(uri: &str) -> ErrorObject {
    let uri = excerpt(uri);
    ErrorObject::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("Resource not found: {uri}"),
    )
    .with_data(serde_json::json!({ "uri": uri }))
}

pub(crate) fn parse<T: DeserializeOwned>(
    method: &str,
    params: Option<Value>,
) -> Result<T, ErrorObject> {
    let params = params.unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    serde_json::from_value(params).map_err(|e| {
        // serde quotes the value it could not read: the client's text, so only an excerpt.
        let e = excerpt(&e.to_string());
        ErrorObject::invalid_params(format!("{method}: {e}"))
    })
}

fn reply<T: Serialize>(result: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(result).map_err(ErrorObject::internal)
}

/// The engine handler of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionHandler(pub(crate) Arc<Connection>);

impl Handler for ConnectionHandler {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        self.0.serve(request, ctx).await
    }

    fn cancel_policy(&self, request: &Request) -> Option<CancelPolicy> {
        let policies = &self.0.server.tool_cancel_policies;
        if policies.is_empty() || request.method != "tools/call" {
            return None;
        }
        let name = request.params.as_ref()?.get("name")?.as_str()?;
        policies.get(name).copied()
    }

    fn handle_notification(&self, notification: Notification, peer: &Peer) {
        if notification.method == "notifications/initialized" {
            self.0.initialized.store(true, Ordering::Relaxed);
        }
        if let Some(callback) = &self.0.server.on_notification {
            match ClientNotification::from_parts(&notification.method, notification.params) {
                Ok(typed) => callback(typed, peer),
                Err(error) => tracing::debug!(%error, "ignored a malformed client notification"),
            }
        }
    }
}
