//! The stateless era (2026-07-28): every request carries its version, capabilities and identity
//! in `_meta`, and is served on its own, with no session.
//!
//! [`serve`] is the dispatcher of such requests. It shares everything with the session era — the
//! registry, the handlers, the [`Context`] — and differs only in the wire form: `resultType` and
//! `serverInfo` on every result, caching hints, `server/discover`, `subscriptions/listen`,
//! questions to the client as `input_required` rounds ([`rounds`]), and no `initialize`, `ping`,
//! `logging/setLevel` or `resources/(un)subscribe`.

mod cache;
mod headers;
mod listen;
mod rounds;
mod seal;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Request};
use tidewire_core::schema::{
    CallToolParams, CompleteParams, CompleteResult, DiscoverResult, GetPromptParams,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    ListenParams, Meta, PaginatedParams, ReadResourceParams, meta_keys, result_type,
};
use tidewire_core::session::RequestContext;
use tidewire_core::stateless::RequestMeta;
use tidewire_core::transport::text::excerpt;
use tidewire_core::transport::{HttpHeaders, Principal};
use tidewire_core::version::STATELESS_VERSIONS;

pub(crate) use cache::CacheHints;
pub use cache::{CacheHint, CacheItem, CacheScope};
pub(crate) use rounds::Rounds;
pub(crate) use rounds::StatePolicy;
use rounds::{Binding, Outcome};
pub use seal::{KeyRing, KeyRingError};

use crate::connection::Connection;
use crate::context::Context;
use crate::listing::Listing;

/// How long a `requestState` stays valid by default.
pub(crate) const DEFAULT_STATE_TTL: Duration = Duration::from_secs(600);
/// The largest `requestState` payload by default (the answers gathered so far).
pub(crate) const DEFAULT_STATE_BYTES: usize = 256 * 1024;

/// What a stateless request's handler knows of it: its `_meta`, and its rounds of questions
/// when it may ask any.
#[derive(Debug)]
pub(crate) struct StatelessCall {
    pub(crate) meta: RequestMeta,
    pub(crate) rounds: Option<Rounds>,
}

/// Serves one stateless request.
pub(crate) async fn serve(
    connection: &Arc<Connection>,
    request: Request,
    ctx: RequestContext,
) -> Result<Value, ErrorObject> {
    let server = connection.server_inner();
    let meta = RequestMeta::from_params(request.params.as_ref())?;
    let method = request.method.as_str();
    let params = request.params;
    let mut result = match method {
        "server/discover" => reply(discover(connection))?,
        "tools/list" => listed::<ListToolsResult>(connection, &parse(method, params)?)?,
        "resources/list" => listed::<ListResourcesResult>(connection, &parse(method, params)?)?,
        "resources/templates/list" => {
            listed::<ListResourceTemplatesResult>(connection, &parse(method, params)?)?
        }
        "prompts/list" => listed::<ListPromptsResult>(connection, &parse(method, params)?)?,
        "tools/call" => {
            let mut params: CallToolParams = parse(method, params)?;
            if let Some(HttpHeaders(headers)) = ctx.extensions().get::<HttpHeaders>()
                && let Some(entry) = server.tools.get(&params.name)
            {
                headers::check_params(&entry.tool, params.arguments.as_ref(), headers)?;
            }
            let arguments = params.arguments.clone().map(Value::Object);
            let call = retryable(
                connection,
                meta,
                Binding::new(method, &params.name, arguments.as_ref(), principal(&ctx)),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let context = Context::stateless(ctx, connection.clone(), call.clone());
            match round(&call, connection.call_tool(params, context)).await? {
                Some(result) => reply(result)?,
                None => input_required(&call)?,
            }
        }
        "resources/read" => {
            let mut params: ReadResourceParams = parse(method, params)?;
            let uri = params.uri.clone();
            let call = retryable(
                connection,
                meta,
                Binding::new(method, &uri, None, principal(&ctx)),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let context = Context::stateless(ctx, connection.clone(), call.clone());
            let read = connection.read_resource(params.uri, context);
            match round(&call, read).await {
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
        "prompts/get" => {
            let mut params: GetPromptParams = parse(method, params)?;
            let arguments = serde_json::to_value(&params.arguments).ok();
            let call = retryable(
                connection,
                meta,
                Binding::new(method, &params.name, arguments.as_ref(), principal(&ctx)),
                params.request_state.take(),
                params.input_responses.take(),
            )?;
            let context = Context::stateless(ctx, connection.clone(), call.clone());
            match round(&call, connection.get_prompt(params, context)).await? {
                Some(result) => reply(result)?,
                None => input_required(&call)?,
            }
        }
        "completion/complete" => {
            let params: CompleteParams = parse(method, params)?;
            let call = Arc::new(StatelessCall { meta, rounds: None });
            let context = Context::stateless(ctx, connection.clone(), call);
            let result = match &server.completion {
                Some(complete) => complete(params, context).await?,
                None => CompleteResult::new(Vec::new()),
            };
            reply(result)?
        }
        "subscriptions/listen" => {
            let params: ListenParams = parse(method, params)?;
            // Its result is already in final form (its `_meta` names the subscription).
            return listen::listen(server, params, &ctx).await;
        }
        // Everything the session era has and this one does not (`initialize`, `ping`,
        // `logging/setLevel`, `resources/subscribe`, …) is an unknown method here.
        other => return Err(ErrorObject::method_not_found(&excerpt(other))),
    };
    finish(&mut result, server.info_json());
    Ok(result)
}

/// The `server/discover` result.
fn discover(connection: &Connection) -> DiscoverResult {
    let server = connection.server_inner();
    let hint = server.cache.default;
    DiscoverResult {
        supported_versions: STATELESS_VERSIONS
            .iter()
            .map(|v| v.as_str().to_owned())
            .collect(),
        capabilities: server.capabilities(),
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
    connection: &Connection,
    params: &PaginatedParams,
) -> Result<Value, ErrorObject> {
    let server = connection.server_inner();
    let mut result = reply(connection.list::<L>(params)?)?;
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

/// The hint of `resources/read` for `uri`: its resource's, or its template's, or the default.
fn read_hint(server: &crate::server::Inner, uri: &str) -> CacheHint {
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
    connection: &Connection,
    meta: RequestMeta,
    binding: Binding,
    state: Option<String>,
    responses: Option<tidewire_core::schema::JsonObject>,
) -> Result<Arc<StatelessCall>, ErrorObject> {
    let rounds = Rounds::begin(
        connection.server_inner().state_policy.clone(),
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
async fn round<T>(
    call: &StatelessCall,
    handler: impl std::future::Future<Output = Result<T, ErrorObject>>,
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

fn principal(ctx: &RequestContext) -> Option<String> {
    ctx.extensions().get::<Principal>().map(|p| p.0.clone())
}

fn parse<T: DeserializeOwned>(method: &str, params: Option<Value>) -> Result<T, ErrorObject> {
    crate::connection::parse(method, params)
}

fn reply<T: Serialize>(result: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(result).map_err(ErrorObject::internal)
}

/// Builds the state policy of a server.
pub(crate) fn state_policy(keys: Option<KeyRing>, ttl: Duration, max_bytes: usize) -> StatePolicy {
    let keys = keys.unwrap_or_else(|| {
        KeyRing::random().unwrap_or_else(|error| {
            // Without randomness, a fixed key would let anyone forge state: refuse all instead.
            tracing::error!(%error, "no random key for requestState: stateless questions will fail");
            KeyRing::unusable()
        })
    });
    StatePolicy {
        keys,
        ttl,
        max_bytes,
    }
}
