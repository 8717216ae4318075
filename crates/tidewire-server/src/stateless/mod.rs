//! The stateless era (2026-07-28): every request carries its version, capabilities and identity
//! in `_meta`, and is served on its own, with no session.
//!
//! [`serve`] is the dispatcher of such requests. It shares everything with the session era — the
//! registries, the handlers ([`calls`](crate::calls)), the [`Context`] — and differs only in the
//! wire form: `resultType` and `serverInfo` on every result, caching hints, `server/discover`,
//! `subscriptions/listen` ([`listen`]), questions to the client as `input_required` rounds
//! ([`rounds`](crate::rounds)), `Mcp-Param-*` headers checked against a tool's arguments
//! ([`headers`]), and no `initialize`, `ping`, `logging/setLevel` or `resources/(un)subscribe`.

mod headers;
mod listen;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Request};
use tidewire_core::schema::{
    CallToolResult, DiscoverResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, Meta, PaginatedParams, StartedTask, StatelessRequest,
    TASKS_EXTENSION, TaskAck, meta_keys, result_type,
};
use tidewire_core::session::RequestContext;
use tidewire_core::stateless::RequestMeta;
use tidewire_core::text::excerpt;
use tidewire_core::transport::HttpArrival;
use tidewire_core::transport::Principal;
use tidewire_core::version::STATELESS_VERSIONS;

use crate::answer::{Served, stateless_tool_result};
use crate::cache::{CacheHint, CacheItem};
use crate::calls::{self, Called, reply};
use crate::connection::Connection;
use crate::context::{Context, ServerInner, StatelessCall};
use crate::listing::{self, Listing};
use crate::rounds::{Binding, Outcome, Rounds, digest, digest_object};
use crate::skills;
use crate::tasks::{TaskOptIn, TaskPermit, TaskRefused};

/// Serves one stateless request and answers it in wire form where it can: a tool's result is
/// written once, straight from its type, with the members every result carries spliced in as
/// bytes made once per server (no `Value` tree, no copy of `serverInfo`).
pub(crate) async fn serve(
    server: &Arc<ServerInner>,
    connection: &Arc<Connection>,
    request: Request,
    ctx: RequestContext,
) -> Result<Served, ErrorObject> {
    match answer(server, connection, request, ctx).await? {
        Draft::Tool(result) if result.meta.is_none() && result.extra.is_empty() => {
            Ok(Served::Wire {
                encoded: stateless_tool_result(&result, server.result_tail())?,
                tool_error: result.is_error == Some(true),
            })
        }
        other => other.into_value(server).map(Served::Tree),
    }
}

/// What a stateless request answers, before the members every result carries are added.
enum Draft {
    /// A result that gets `resultType` and `serverInfo` ([`finish`]).
    Result(Value),
    /// A tool's result, still typed.
    Tool(CallToolResult),
    /// A result already in its final form (a listen's).
    Final(Value),
}

impl Draft {
    fn into_value(self, server: &ServerInner) -> Result<Value, ErrorObject> {
        let mut result = match self {
            Self::Final(result) => return Ok(result),
            Self::Result(result) => result,
            Self::Tool(result) => reply(result)?,
        };
        finish(&mut result, server.info_json());
        Ok(result)
    }
}

/// Serves one stateless request, up to its answer.
async fn answer(
    server: &Arc<ServerInner>,
    connection: &Arc<Connection>,
    request: Request,
    ctx: RequestContext,
) -> Result<Draft, ErrorObject> {
    // `_meta` is read from the context: a request served without a session has had it moved
    // there out of its params.
    let meta = RequestMeta::from_meta(ctx.meta())?;
    let method = request.method;
    let context = |ctx, call| Context::stateless(ctx, server.clone(), connection.clone(), call);
    // Decoded before the match: a scrutinee's temporaries live through every arm's awaits.
    let decoded = StatelessRequest::from_parts(&method, request.params)?;
    let result = match decoded {
        StatelessRequest::Discover(_) => reply(discover(server))?,
        StatelessRequest::ListTools(params) => listed::<ListToolsResult>(server, &params)?,
        StatelessRequest::ListResources(params) => listed::<ListResourcesResult>(server, &params)?,
        StatelessRequest::ListResourceTemplates(params) => {
            listed::<ListResourceTemplatesResult>(server, &params)?
        }
        StatelessRequest::ListPrompts(params) => listed::<ListPromptsResult>(server, &params)?,
        StatelessRequest::CallTool(mut params) => {
            if let Some(arrival) = ctx.extensions().get::<HttpArrival>()
                && let Some(entry) = server.tools.get(&params.name)
            {
                headers::check_params(
                    &entry.tool,
                    params.arguments.as_ref(),
                    &arrival.param_headers,
                )?;
            }
            let arguments = digest_object(params.arguments.as_ref());
            let call = retryable(
                server,
                meta,
                Binding::new("tools/call", &params.name, arguments, principal(&ctx)),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let opt_in = TaskOptIn {
                allowed: if call.meta.capabilities.has_extension(TASKS_EXTENSION) {
                    TaskPermit::Allowed
                } else {
                    TaskPermit::MissingExtension
                },
                ttl: None,
                owner: principal(&ctx),
                tool_errors_fail: false,
                requester: None,
            };
            let handler =
                std::pin::pin!(calls::call_tool(params, context(ctx, call.clone()), opt_in));
            match round(&call, handler).await? {
                Some(Called::Result(result)) => return Ok(Draft::Tool(result)),
                Some(Called::Task(record)) => reply(StartedTask::from(record.state()))?,
                None => input_required(&call)?,
            }
        }
        StatelessRequest::ReadResource(mut params) => {
            let uri = params.uri.clone();
            let call = retryable(
                server,
                meta,
                Binding::new("resources/read", &uri, digest_object(None), principal(&ctx)),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let handler =
                std::pin::pin!(calls::read_resource(params.uri, context(ctx, call.clone())));
            match round(&call, handler).await {
                Ok(Some(result)) => {
                    let mut result = reply(result)?;
                    read_hint(server, &uri).write(&mut result);
                    result
                }
                Ok(None) => input_required(&call)?,
                // 2026-07-28 names a missing resource -32602 (no longer -32002), with its URI.
                Err(error) if error.code == ErrorCode::RESOURCE_NOT_FOUND.0 => {
                    return Err(ErrorObject {
                        code: ErrorCode::INVALID_PARAMS.0,
                        ..error
                    });
                }
                Err(error) => return Err(error),
            }
        }
        StatelessRequest::GetPrompt(mut params) => {
            let arguments = serde_json::to_value(&params.arguments).unwrap_or(Value::Null);
            let call = retryable(
                server,
                meta,
                Binding::new(
                    "prompts/get",
                    &params.name,
                    digest(&arguments),
                    principal(&ctx),
                ),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let handler = std::pin::pin!(calls::get_prompt(params, context(ctx, call.clone())));
            match round(&call, handler).await? {
                Some(result) => reply(result)?,
                None => input_required(&call)?,
            }
        }
        StatelessRequest::Complete(params) => {
            let call = Arc::new(StatelessCall { meta, rounds: None });
            reply(calls::complete(params, context(ctx, call)).await?)?
        }
        // Its result is already in final form (its `_meta` names the subscription).
        StatelessRequest::Listen(params) => {
            let tasks = declares_tasks(meta);
            // Boxed, as every rarer arm that awaits: the largest arm sizes every request's
            // future, and it should be a tool call's.
            return Box::pin(listen::listen(server, params, &ctx, tasks))
                .await
                .map(Draft::Final);
        }
        StatelessRequest::GetTask(params) => {
            tasks_declared(meta)?;
            let owner = principal(&ctx);
            let record = Box::pin(server.tasks.find(&params.task_id, owner.as_deref())).await?;
            reply(record.details())?
        }
        StatelessRequest::UpdateTask(params) => {
            tasks_declared(meta)?;
            let owner = principal(&ctx);
            let tasks = &server.tasks;
            Box::pin(tasks.answer(&params.task_id, owner.as_deref(), params.input_responses))
                .await?;
            reply(TaskAck::default())?
        }
        StatelessRequest::CancelTask(params) => {
            tasks_declared(meta)?;
            let owner = principal(&ctx);
            Box::pin(server.tasks.cancel(&params.task_id, owner.as_deref())).await?;
            reply(TaskAck::default())?
        }
        StatelessRequest::ListSkills(params) => hinted(server, skills::list(server, &params)?)?,
        StatelessRequest::GetSkill(params) => hinted(server, skills::get(server, &params)?)?,
        StatelessRequest::ReadDirectory(params) => {
            hinted(server, skills::read_directory(server, &params)?)?
        }
        // Everything the session era has and this one does not (`initialize`, `ping`,
        // `logging/setLevel`, `resources/subscribe`, …) is an unknown method here.
        StatelessRequest::Other { method, .. } => {
            return Err(ErrorObject::method_not_found(&excerpt(&method)));
        }
    };
    Ok(Draft::Result(result))
}

/// The `server/discover` result.
fn discover(server: &ServerInner) -> DiscoverResult {
    let hint = server.cache.default;
    DiscoverResult {
        supported_versions: STATELESS_VERSIONS
            .iter()
            .map(|v| v.as_str().to_owned())
            .collect(),
        capabilities: server.modern_capabilities(),
        instructions: server.instructions.clone(),
        ttl_ms: u64::try_from(hint.ttl.as_millis()).unwrap_or(u64::MAX),
        cache_scope: hint.scope,
        result_type: result_type::COMPLETE.to_owned(),
        meta: None,
    }
}

/// One page of a list, with the caching hint of the whole list (taken over every entry of its
/// registry, not only this page's, so every page has the same scope). Without per-item hints
/// (the common case) it is the server's default, and the registry is not walked.
fn listed<L: Listing>(
    server: &ServerInner,
    params: &PaginatedParams,
) -> Result<Value, ErrorObject> {
    let mut result = reply(listing::list::<L>(server, params)?)?;
    let hint = if server.cache.items.is_empty() {
        server.cache.default
    } else {
        server.cache.of_list(
            L::registry(server)
                .snapshot()
                .iter()
                .map(|e| L::cache_item(e)),
        )
    };
    hint.write(&mut result);
    Ok(result)
}

/// A result with the server's default caching hint (the skills extension's results are
/// cacheable ones).
fn hinted(server: &ServerInner, result: impl serde::Serialize) -> Result<Value, ErrorObject> {
    let mut result = reply(result)?;
    server.cache.default.write(&mut result);
    Ok(result)
}

/// The hint of `resources/read` for `uri`: its resource's, or its template's, or the default.
fn read_hint(server: &ServerInner, uri: &str) -> CacheHint {
    if server.resources.get(uri).is_some() {
        return server.cache.of(&CacheItem::Resource(uri.to_owned()));
    }
    server
        .templates
        .snapshot()
        .iter()
        .find(|e| e.parsed.matches(uri).is_some())
        .map_or(server.cache.default, |e| {
            server
                .cache
                .of(&CacheItem::Template(e.template.uri_template.clone()))
        })
}

/// `resultType` and `serverInfo` on a result, unless the handler set them.
fn finish(result: &mut Value, info: &Value) {
    let Value::Object(map) = result else {
        return;
    };
    map.entry("resultType")
        .or_insert_with(|| Value::from(result_type::COMPLETE));
    let meta = map
        .entry("_meta")
        .or_insert_with(|| Value::Object(Meta::new().into_inner()));
    if let Value::Object(meta) = meta
        && !meta.contains_key(meta_keys::SERVER_INFO)
        && !info.is_null()
    {
        meta.insert(meta_keys::SERVER_INFO.to_owned(), info.clone());
    }
}

/// The call state of a request that may ask the client questions.
fn retryable(
    server: &ServerInner,
    meta: RequestMeta,
    binding: Binding,
    state: Option<String>,
    responses: Option<JsonObject>,
) -> Result<Arc<StatelessCall>, ErrorObject> {
    let rounds = Rounds::begin(
        server.state_policy.clone(),
        binding,
        state.as_deref(),
        responses,
    )?;
    Ok(Arc::new(StatelessCall {
        meta,
        rounds: Some(rounds),
    }))
}

/// Runs a retryable handler for one round: its result, or `None` when it waits for answers.
/// The handler stays pinned where the caller keeps it (see [`Rounds::run`]).
async fn round<T, F: Future<Output = Result<T, ErrorObject>>>(
    call: &StatelessCall,
    handler: Pin<&mut F>,
) -> Result<Option<T>, ErrorObject> {
    let Some(rounds) = &call.rounds else {
        return handler.await.map(Some);
    };
    match rounds.run(handler).await {
        Outcome::Done(result) => result.map(Some),
        Outcome::NeedInput => Ok(None),
    }
}

fn input_required(call: &StatelessCall) -> Result<Value, ErrorObject> {
    let rounds = call
        .rounds
        .as_ref()
        .ok_or_else(|| ErrorObject::internal("no rounds for this request"))?;
    reply(rounds.input_required()?)
}

/// `-32021` unless the request declares the tasks extension: `tasks/*` answer only those that
/// do, before looking the task up.
fn tasks_declared(meta: RequestMeta) -> Result<(), ErrorObject> {
    if declares_tasks(meta) {
        return Ok(());
    }
    Err(TaskRefused::missing_extension().into_error())
}

/// Whether the request declares the tasks extension. It takes the request's `_meta`, which the
/// arms that ask need no more: kept until their awaits, it would size every request's future.
fn declares_tasks(meta: RequestMeta) -> bool {
    meta.capabilities.has_extension(TASKS_EXTENSION)
}

fn principal(ctx: &RequestContext) -> Option<String> {
    ctx.extensions()
        .get::<Principal>()
        .map(|p| p.subject.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tidewire_core::schema::{CallToolResult, Implementation};

    use super::*;

    /// A tool result written straight from its type reads back as the same JSON as the one
    /// built through a `Value` tree and `finish`, whatever it holds.
    #[test]
    fn a_tool_result_in_wire_form_is_the_tree_written_out() {
        let server = crate::Server::builder(Implementation::new("wire \"form\"", "1.0")).build();
        let shared = &server.inner;
        let results = [
            CallToolResult::text("hello"),
            CallToolResult::error_text("failed"),
            CallToolResult::structured(json!({"n": 1, "s": "\u{1b}"})),
            CallToolResult::success(Vec::new()),
        ];
        for result in results {
            let tree = Draft::Tool(result.clone())
                .into_value(shared)
                .expect("a tree");
            let wire = stateless_tool_result(&result, shared.result_tail()).expect("wire form");
            let read: Value = serde_json::from_slice(wire.as_bytes()).expect("one JSON object");
            assert_eq!(read, tree);
            assert_eq!(read["resultType"], "complete");
            assert_eq!(
                read["_meta"][meta_keys::SERVER_INFO]["name"],
                "wire \"form\""
            );
        }
    }
}
