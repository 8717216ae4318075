//! The requests both eras serve the same way, from the server's registries: run a tool, read a
//! resource, get a prompt, complete an argument. The era's dispatcher decodes the request and
//! shapes the answer; these find the handler and run it.

use std::collections::HashMap;
use std::future::{Future, ready};
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::{BoxFuture, Either};

use serde::Serialize;
use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
use tidewire_core::schema::{
    CallToolParams, CallToolResult, CompleteParams, CompleteResult, GetPromptParams,
    GetPromptResult, ReadResourceResult, TaskSupport,
};
use tidewire_core::text::excerpt;
use tidewire_core::transport::Principal;

use crate::context::{Context, ServerInner};
use crate::error::ToolError;
use crate::registry::ToolEntry;
use crate::tasks::{TaskCall, TaskOptIn, TaskRecord};

/// What a tool call came to: its result, or a task that goes on without the request.
#[derive(Debug)]
pub(crate) enum Called {
    /// The call's result.
    Result(CallToolResult),
    /// The task the call became (its record as created).
    Task(Box<TaskRecord>),
}

/// Runs tool `params.name`. A [`ToolError`](crate::ToolError) becomes an `isError` result,
/// unless it asks to be a protocol error. A tool with task support runs as a task when the era
/// (`opt_in`) allows it (see [`tasks`](crate::tasks)).
///
/// # Errors
/// `-32602` for an unknown tool; `-32003` when the principal lacks a scope the tool needs
/// (`ServerBuilder::tool_scopes`); the handler's protocol errors; a task refused by a tool that
/// requires one.
///
/// The lookup and the checks run when the call is made; the future returned only runs the
/// handler (a plain call's future is the handler's own, so every caller's future stays small).
pub(crate) fn call_tool(
    params: CallToolParams,
    ctx: Context,
    opt_in: TaskOptIn,
) -> impl Future<Output = Result<Called, ErrorObject>> + Send + 'static {
    let server = ctx.shared().clone();
    let Some(entry) = server.tools.get(&params.name) else {
        return Either::Right(Either::Right(ready(Err(ErrorObject::invalid_params(
            format!("unknown tool: {}", excerpt(&params.name)),
        )))));
    };
    if let Some(needed) = server.tool_scopes.get(&params.name)
        && let Err(error) = require(needed, ctx.auth(), || format!("the tool {}", params.name))
    {
        return Either::Right(Either::Right(ready(Err(error))));
    }
    let args = Value::Object(params.arguments.unwrap_or_default());
    let support = entry.tool.task_support();
    let deferred = server.deferred_tasks.contains(&params.name);
    if support == TaskSupport::Forbidden && !deferred {
        let handler = (entry.handler)(args, ctx);
        return Either::Left(handler.map(|outcome| settle(outcome).map(Called::Result)));
    }
    // A call that may become a task (rarer, and its future larger: the task's start, the race
    // with the handler) runs boxed.
    let task: BoxFuture<'static, _> = Box::pin(async move {
        call_as_task(&server, &entry, args, ctx, opt_in, support, deferred).await
    });
    Either::Right(Either::Left(task))
}

/// [`call_tool`] for a tool that may run as a task: started as one when the client asks and
/// the tool allows it (or, deferred, when the handler decides to). The tool is `entry` (its
/// name is the one called: the registry's key).
async fn call_as_task(
    server: &ServerInner,
    entry: &ToolEntry<Context>,
    args: Value,
    ctx: Context,
    opt_in: TaskOptIn,
    support: TaskSupport,
    deferred: bool,
) -> Result<Called, ErrorObject> {
    let call = Arc::new(TaskCall::new(
        server.tasks.clone(),
        &entry.tool.name,
        ctx.cancel_policy(),
        opt_in,
    ));
    let ctx = ctx.with_task(call.clone());
    if !deferred {
        match call.start().await {
            Ok(()) => {}
            Err(refused) if support == TaskSupport::Required => return Err(refused.into_error()),
            // Optional, and not allowed here: the call is answered directly.
            Err(_) => return settle((entry.handler)(args, ctx).await).map(Called::Result),
        }
    }
    let mut handler = (entry.handler)(args, ctx);
    if deferred {
        // The handler starts its task itself, if it does: until then, this is a plain call.
        tokio::select! {
            biased;
            () = call.became_task() => {}
            outcome = &mut handler => {
                if call.running().is_none() {
                    return settle(outcome).map(Called::Result);
                }
                // It became a task and finished at once: the task ends with that outcome.
                let finished = settle(outcome);
                return detach(&call, futures::future::ready(finished));
            }
        }
    }
    detach(&call, async move { settle(handler.await) })
}

/// Runs `handler` as the task `call` became, and answers the call with the task.
fn detach(
    call: &TaskCall,
    handler: impl std::future::Future<Output = Result<CallToolResult, ErrorObject>> + Send + 'static,
) -> Result<Called, ErrorObject> {
    let (Some(live), Some(record)) = (call.running(), call.record()) else {
        return Err(ErrorObject::internal("the call did not become a task"));
    };
    call.tasks
        .run(live.clone(), call.policy, call.tool_errors_fail(), handler);
    Ok(Called::Task(Box::new(record.clone())))
}

/// A handler's outcome as the call's: a tool error is an `isError` result, unless it asks to be
/// a protocol error.
fn settle(outcome: Result<CallToolResult, ToolError>) -> Result<CallToolResult, ErrorObject> {
    match outcome {
        Ok(result) => Ok(result),
        Err(error) => match error.into_protocol() {
            Ok(message) => Ok(CallToolResult::error_text(message)),
            Err(protocol) => Err(protocol),
        },
    }
}

/// Reads the resource at `uri`: a fixed resource first, else the first template it matches.
///
/// # Errors
/// [`resource_not_found`] when nothing matches; the reader's errors.
pub(crate) async fn read_resource(
    uri: String,
    ctx: Context,
) -> Result<ReadResourceResult, ErrorObject> {
    let server = ctx.shared().clone();
    if let Some(entry) = server.resources.get(&uri) {
        may_read(&server, &uri, &uri, ctx.auth())?;
        return (entry.handler)(uri, HashMap::new(), ctx).await;
    }
    for entry in server.templates.snapshot() {
        if let Some(vars) = entry.parsed.matches(&uri) {
            may_read(&server, &entry.template.uri_template, &uri, ctx.auth())?;
            return (entry.handler)(uri, vars, ctx).await;
        }
    }
    Err(resource_not_found(&uri))
}

/// Refuses `uri` to a principal without the scopes its resource needs
/// (`ServerBuilder::resource_scopes`): the resource's own, else those of the first template it
/// matches — what [`read_resource`] would serve it from. A URI the server does not offer needs
/// nothing here (it is refused as unknown where it is used).
///
/// # Errors
/// `-32003` naming the scopes.
pub(crate) fn check_resource_scopes(
    server: &ServerInner,
    uri: &str,
    principal: Option<&Principal>,
) -> Result<(), ErrorObject> {
    if server.resource_scopes.is_empty() {
        return Ok(());
    }
    if server.resources.get(uri).is_some() {
        return may_read(server, uri, uri, principal);
    }
    for entry in server.templates.snapshot() {
        if entry.parsed.matches(uri).is_some() {
            return may_read(server, &entry.template.uri_template, uri, principal);
        }
    }
    Ok(())
}

/// Refuses `uri`, served from `key` (a resource's URI or a template), to a principal without
/// the scopes `key` needs.
fn may_read(
    server: &ServerInner,
    key: &str,
    uri: &str,
    principal: Option<&Principal>,
) -> Result<(), ErrorObject> {
    match server.resource_scopes.get(key) {
        Some(needed) => require(needed, principal, || format!("the resource {uri}")),
        None => Ok(()),
    }
}

/// Refuses a principal (or none) without every scope in `needed`; `what` names what needs them.
fn require(
    needed: &[String],
    principal: Option<&Principal>,
    what: impl FnOnce() -> String,
) -> Result<(), ErrorObject> {
    if needed
        .iter()
        .all(|scope| principal.is_some_and(|p| p.has_scope(scope)))
    {
        Ok(())
    } else {
        Err(ErrorObject::insufficient_scope(&what(), needed))
    }
}

/// Gets prompt `params.name`, once its required arguments are there.
///
/// # Errors
/// `-32602` for an unknown prompt or a missing required argument; the handler's errors.
pub(crate) async fn get_prompt(
    params: GetPromptParams,
    ctx: Context,
) -> Result<GetPromptResult, ErrorObject> {
    let Some(entry) = ctx.shared().prompts.get(&params.name) else {
        return Err(ErrorObject::invalid_params(format!(
            "unknown prompt: {}",
            excerpt(&params.name)
        )));
    };
    let args: HashMap<String, String> = params.arguments.unwrap_or_default().into_iter().collect();
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
            excerpt(&params.name),
            missing.join(", ")
        )));
    }
    (entry.handler)(args, ctx).await
}

/// Completes an argument with the server's completion handler (none: no suggestions).
///
/// # Errors
/// The handler's.
pub(crate) async fn complete(
    params: CompleteParams,
    ctx: Context,
) -> Result<CompleteResult, ErrorObject> {
    match ctx.shared().completion.clone() {
        Some(complete) => complete(params, ctx).await,
        None => Ok(CompleteResult::new(Vec::new())),
    }
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

/// A result as JSON.
pub(crate) fn reply<T: Serialize>(result: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(result).map_err(ErrorObject::internal)
}
