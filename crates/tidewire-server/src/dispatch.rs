//! The engine's handler of one connection: it picks the era of each request, serves the session
//! era here, and hands stateless requests to [`stateless`](crate::stateless).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Notification, Request};
use tidewire_core::schema::{
    ClientNotification, ClientRequest, CreateTaskResult, EmptyResult, InitializeParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListTasksResult, ListToolsResult, Meta, TaskResult, meta_keys,
};
use tidewire_core::session::{Answer, CancelPolicy, Handler, Peer, RequestContext};
use tidewire_core::text::excerpt;
use tidewire_core::transport::Principal;

use crate::answer::{self, Served};
use crate::calls::{self, Called, reply};
use crate::connection::Connection;
use crate::context::{Context, ServerInner};
use crate::listing;
use crate::skills;
use crate::tasks::{TaskOptIn, TaskPermit, TaskRecord};

/// The engine handler of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionHandler {
    server: Arc<ServerInner>,
    connection: Arc<Connection>,
}

impl ConnectionHandler {
    pub(crate) fn new(server: Arc<ServerInner>, connection: Arc<Connection>) -> Self {
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
    ) -> Result<Served, ErrorObject> {
        let server = &self.server;
        // Decoded before the match: a scrutinee's temporaries live through every arm's awaits,
        // and a `ClientRequest` is large.
        let decoded = ClientRequest::from_parts(&request.method, request.params)?;
        let tree = match decoded {
            ClientRequest::Initialize(params) => match ctx.peer() {
                Some(peer) => reply(self.initialize(params, peer)),
                None => Err(ErrorObject::internal("initialize outside a session")),
            },
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
                let opt_in = TaskOptIn {
                    allowed: match &params.task {
                        Some(_) => TaskPermit::Allowed,
                        None => TaskPermit::NotRequested,
                    },
                    ttl: params
                        .task
                        .as_ref()
                        .and_then(|t| t.ttl)
                        .map(Duration::from_millis),
                    owner: principal(&ctx),
                    tool_errors_fail: true,
                    requester: self.connection.peer().cloned(),
                };
                let version = ctx.peer().and_then(Peer::protocol_version);
                return match calls::call_tool(params, self.context(ctx), opt_in).await? {
                    Called::Result(result) => answer::session_tool_result(result, version),
                    Called::Task(record) => {
                        reply(CreateTaskResult::from(record.task())).map(Served::Tree)
                    }
                };
            }
            // The task arms run boxed: the largest arm sizes the future of every request.
            ClientRequest::GetTask(params) => {
                Box::pin(get_task(server, principal(&ctx), &params.task_id)).await
            }
            ClientRequest::GetTaskPayload(params) => {
                Box::pin(get_task_payload(server, principal(&ctx), &params.task_id)).await
            }
            ClientRequest::ListTasks(params) => {
                Box::pin(list_tasks(
                    server,
                    principal(&ctx),
                    params.cursor.as_deref(),
                ))
                .await
            }
            ClientRequest::CancelTask(params) => {
                Box::pin(cancel_task(server, principal(&ctx), &params.task_id)).await
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
                calls::check_resource_scopes(
                    server,
                    &params.uri,
                    ctx.extensions().get::<Principal>(),
                )?;
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
            ClientRequest::ListSkills(params) => reply(skills::list(server, &params)?),
            ClientRequest::GetSkill(params) => reply(skills::get(server, &params)?),
            ClientRequest::ReadDirectory(params) => reply(skills::read_directory(server, &params)?),
            other @ ClientRequest::Other { .. } => {
                Err(ErrorObject::method_not_found(&excerpt(other.method())))
            }
        };
        tree.map(Served::Tree)
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
    /// The engine calls [`answer_request`](Handler::answer_request); this answers the same as a
    /// tree (a result in wire form read back), for a caller that wants one.
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        match self.answer_request(request, ctx).await? {
            Answer::Tree(result) => Ok(result),
            Answer::Encoded(result) => {
                serde_json::from_slice(result.as_bytes()).map_err(ErrorObject::internal)
            }
        }
    }

    async fn answer_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Answer, ErrorObject> {
        #[cfg(feature = "otel")]
        {
            let version = ctx.peer().and_then(Peer::protocol_version);
            let operation = crate::telemetry::request(
                &request.method,
                request.params.as_ref(),
                &request.id,
                ctx.extensions().get(),
                version.as_ref().map(|v| v.as_str()),
            );
            let method = request.method.clone();
            let span = operation.span().clone();
            let served = tracing::Instrument::instrument(self.dispatch(request, ctx), span).await;
            operation.finish(crate::telemetry::outcome(&method, &served));
            served.map(Served::into_answer)
        }
        #[cfg(not(feature = "otel"))]
        self.dispatch(request, ctx).await.map(Served::into_answer)
    }

    fn cancel_policy(&self, request: &Request) -> Option<CancelPolicy> {
        self.server.cancel_policy_of(request)
    }

    fn handle_notification(&self, notification: Notification, peer: &Peer) {
        #[cfg(feature = "otel")]
        let operation = crate::telemetry::notification(
            &notification.method,
            notification.params.as_ref(),
            peer.protocol_version().as_ref().map(|v| v.as_str()),
        );
        #[cfg(feature = "otel")]
        let _entered = operation.span().clone().entered();
        self.notified(notification, peer);
        #[cfg(feature = "otel")]
        operation.finish(tidewire_otel::Outcome::Ok);
    }
}

impl ConnectionHandler {
    /// Serves one request in the era it is of.
    async fn dispatch(&self, request: Request, ctx: RequestContext) -> Result<Served, ErrorObject> {
        let eras = self.connection.eras();
        if eras.modern() && tidewire_core::version::is_stateless_request(request.params.as_ref()) {
            // A draining server takes no new stateless request (over HTTP the transport
            // answered 503 before this; here the connection is already open).
            if self.server.lifecycle.is_draining() {
                self.server
                    .lifecycle
                    .refused(tidewire_core::lifecycle::RefusalReason::Draining);
                return Err(tidewire_core::lifecycle::draining_error());
            }
            self.connection.set_served_stateless();
            return crate::stateless::serve(&self.server, &self.connection, request, ctx).await;
        }
        if !eras.legacy() {
            return Err(session_refused(&request));
        }
        self.serve_session(request, ctx).await
    }

    /// Handles one notification.
    fn notified(&self, notification: Notification, peer: &Peer) {
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

/// `tasks/get`: the task of `owner` (or of no one) named `task_id`, with its progress.
async fn get_task(
    server: &ServerInner,
    owner: Option<String>,
    task_id: &str,
) -> Result<Value, ErrorObject> {
    let record = server.tasks.find(task_id, owner.as_deref()).await?;
    let mut result = TaskResult::from(record.task());
    result.meta = record.progress_meta();
    reply(result)
}

/// `tasks/result`: what the ended task `task_id` of `owner` answered.
async fn get_task_payload(
    server: &ServerInner,
    owner: Option<String>,
    task_id: &str,
) -> Result<Value, ErrorObject> {
    let record = server.tasks.ended(task_id, owner.as_deref()).await?;
    task_payload(&record)
}

/// `tasks/list`: a page of `owner`'s tasks after `cursor` (the id of the last task of a page
/// this principal saw).
async fn list_tasks(
    server: &ServerInner,
    owner: Option<String>,
    cursor: Option<&str>,
) -> Result<Value, ErrorObject> {
    let page = server.page_size;
    if let Some(cursor) = cursor
        && server.tasks.find(cursor, owner.as_deref()).await.is_err()
    {
        return Err(ErrorObject::invalid_params(format!(
            "invalid cursor {:?}",
            excerpt(cursor)
        )));
    }
    let mut records = server
        .tasks
        .list(owner.as_deref(), cursor, page + 1)
        .await?;
    let more = records.len() > page;
    records.truncate(page);
    let mut result = ListTasksResult {
        tasks: records.iter().map(TaskRecord::task).collect(),
        ..ListTasksResult::default()
    };
    if more {
        result.next_cursor = records.last().map(|r| r.id.clone());
    }
    reply(result)
}

/// `tasks/cancel`: cancels `owner`'s task `task_id`, unless it has ended.
async fn cancel_task(
    server: &ServerInner,
    owner: Option<String>,
    task_id: &str,
) -> Result<Value, ErrorObject> {
    let record = server.tasks.find(task_id, owner.as_deref()).await?;
    if record.is_terminal() {
        return Err(ErrorObject::invalid_params(format!(
            "task {} has already ended ({})",
            excerpt(&record.id),
            record.status.as_str()
        )));
    }
    let record = server.tasks.cancel(task_id, owner.as_deref()).await?;
    reply(TaskResult::from(record.task()))
}

/// What `tasks/result` answers for an ended task (2025-11-25): the call's result or the error it
/// failed with, exactly, tied to the task.
fn task_payload(record: &TaskRecord) -> Result<Value, ErrorObject> {
    if let Some(result) = &record.result {
        let mut result = result.clone();
        result
            .meta
            .get_or_insert_with(Meta::new)
            .set_related_task(record.id.clone());
        return reply(result);
    }
    let mut error = record.error.clone().unwrap_or_else(|| {
        ErrorObject::new(
            ErrorCode::INTERNAL_ERROR,
            format!("the task was {}", record.status.as_str()),
        )
    });
    let mut related = Meta::new();
    related.set_related_task(record.id.clone());
    error.data = Some(match error.data.take() {
        Some(Value::Object(mut data)) => {
            data.insert("_meta".to_owned(), Value::Object(related.into_inner()));
            Value::Object(data)
        }
        Some(other) => other,
        None => serde_json::json!({ "_meta": related.into_inner() }),
    });
    Err(error)
}

/// The authenticated principal of a request, when the transport knows one.
fn principal(ctx: &RequestContext) -> Option<String> {
    ctx.extensions()
        .get::<Principal>()
        .map(|p| p.subject.clone())
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
