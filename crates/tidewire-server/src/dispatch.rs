//! The engine's handler of one connection: it picks the era of each request, serves the session
//! era here, and hands stateless requests to [`stateless`](crate::stateless).

use std::sync::Arc;

use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request};
use tidewire_core::schema::{
    ClientNotification, ClientRequest, EmptyResult, InitializeParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    meta_keys,
};
use tidewire_core::session::{CancelPolicy, Handler, Peer, RequestContext};
use tidewire_core::transport::text::excerpt;

use crate::calls::{self, reply};
use crate::connection::Connection;
use crate::context::{Context, Shared};
use crate::listing;

/// The engine handler of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionHandler {
    server: Arc<Shared>,
    connection: Arc<Connection>,
}

impl ConnectionHandler {
    pub(crate) fn new(server: Arc<Shared>, connection: Arc<Connection>) -> Self {
        Self { server, connection }
    }

    fn context(&self, request: RequestContext) -> Context {
        Context::new(request, self.server.clone(), self.connection.clone())
    }

    /// Serves a session-era request.
    async fn serve_session(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        let server = &self.server;
        match ClientRequest::from_parts(&request.method, request.params)? {
            ClientRequest::Initialize(params) => reply(self.initialize(params, ctx.peer())),
            ClientRequest::Ping(_) => reply(EmptyResult::new()),
            ClientRequest::ListTools(params) => {
                reply(listing::list::<ListToolsResult>(server, &params)?)
            }
            ClientRequest::ListResources(params) => {
                reply(listing::list::<ListResourcesResult>(server, &params)?)
            }
            ClientRequest::ListResourceTemplates(params) => reply(listing::list::<
                ListResourceTemplatesResult,
            >(server, &params)?),
            ClientRequest::ListPrompts(params) => {
                reply(listing::list::<ListPromptsResult>(server, &params)?)
            }
            ClientRequest::CallTool(params) => {
                reply(calls::call_tool(params, self.context(ctx)).await?)
            }
            ClientRequest::ReadResource(params) => {
                reply(calls::read_resource(params.uri, self.context(ctx)).await?)
            }
            ClientRequest::GetPrompt(params) => {
                reply(calls::get_prompt(params, self.context(ctx)).await?)
            }
            ClientRequest::Complete(params) => {
                reply(calls::complete(params, self.context(ctx)).await?)
            }
            ClientRequest::Subscribe(params) => {
                self.connection.subscribe(params.uri)?;
                reply(EmptyResult::new())
            }
            ClientRequest::Unsubscribe(params) => {
                self.connection.unsubscribe(&params.uri);
                reply(EmptyResult::new())
            }
            ClientRequest::SetLevel(params) => {
                self.connection.set_log_level(params.level);
                reply(EmptyResult::new())
            }
            // Tasks are not served yet; every other method is unknown.
            other => Err(ErrorObject::method_not_found(&excerpt(other.method()))),
        }
    }

    fn initialize(&self, params: InitializeParams, peer: &Peer) -> InitializeResult {
        let version = ProtocolVersion::negotiate(&params.protocol_version);
        peer.set_protocol_version(version);
        self.connection
            .set_client(params.capabilities, params.client_info);
        let mut result = InitializeResult::new(
            version,
            self.server.capabilities(),
            self.server.info.clone(),
        );
        result.instructions.clone_from(&self.server.instructions);
        result
    }
}

impl Handler for ConnectionHandler {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        let eras = self.connection.eras();
        if eras.modern() && tidewire_core::version::is_stateless_request(request.params.as_ref()) {
            self.connection.set_served_stateless();
            return crate::stateless::serve(&self.server, &self.connection, request, ctx).await;
        }
        if !eras.legacy() {
            return Err(session_refused(&request));
        }
        self.serve_session(request, ctx).await
    }

    fn cancel_policy(&self, request: &Request) -> Option<CancelPolicy> {
        let policies = &self.server.tool_cancel_policies;
        if policies.is_empty() || request.method != "tools/call" {
            return None;
        }
        let name = request.params.as_ref()?.get("name")?.as_str()?;
        policies.get(name).copied()
    }

    fn handle_notification(&self, notification: Notification, peer: &Peer) {
        if notification.method == "notifications/initialized" {
            self.connection.set_initialized();
        }
        if let Some(callback) = &self.server.on_notification {
            match ClientNotification::from_parts(&notification.method, notification.params) {
                Ok(typed) => callback(typed, peer),
                Err(error) => tracing::debug!(%error, "ignored a malformed client notification"),
            }
        }
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
        meta_keys::PROTOCOL_VERSION,
        meta_keys::CLIENT_CAPABILITIES
    ))
}
