//! Multi round-trip requests (2026-07-28), invisible to the caller: when `tools/call`,
//! `resources/read` or `prompts/get` answer `input_required`, the client answers the questions
//! with the same handlers a session-era server request would reach, and retries the request
//! with a new id, the answers (`inputResponses`) and the server's `requestState` as it came —
//! round after round, up to [`ClientBuilder::max_input_rounds`](crate::ClientBuilder::max_input_rounds).
//!
//! One timeout (and one reset-on-progress hard maximum) spans every round, one progress callback
//! hears them all, and one cancel stops whichever round is running. The MRTR fields live only
//! in this call's params.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tidewire_core::jsonrpc::{Request, RequestId};
use tidewire_core::schema::{JsonObject, RESULT_TYPE_TASK, RequestType, result_type};
use tidewire_core::session::{
    CancelHandle, InFlight, ProgressCallback, RequestContext, SessionError,
};

use crate::client::Client;
use crate::error::ClientError;

/// Questions one `input_required` round may ask at most: a server asking more gets an error,
/// not that many handler calls.
const MAX_QUESTIONS: usize = 64;

/// A progress callback shared by the rounds of one call; the handle it gets cancels the running
/// round.
pub(crate) type ProgressSink = Arc<Mutex<ProgressCallback>>;

/// How each round of one call is sent.
pub(crate) struct Options {
    /// As the caller set it: `Some(None)` is no timeout; `None` the session's default per round.
    pub(crate) timeout: Option<Option<Duration>>,
    pub(crate) reset_max: Option<Duration>,
    pub(crate) progress: Option<ProgressSink>,
    /// When the call began: the timeout counts from here, across rounds.
    pub(crate) started: Instant,
    /// `_meta` entries every round carries over the client's own (the tasks extension
    /// declared in the request's capabilities, say).
    pub(crate) meta: Option<Map<String, Value>>,
}

impl Options {
    pub(crate) fn plain() -> Self {
        Self {
            timeout: None,
            reset_max: None,
            progress: None,
            started: Instant::now(),
            meta: None,
        }
    }
}

/// Cancels whichever round of a call is running.
///
/// A cancel that returns true is kept: the call then ends cancelled, even if its last round's
/// result was already in (as a session-era call that loses the race ignores its late response).
#[derive(Default)]
pub(crate) struct Cancel {
    state: Mutex<CancelState>,
}

#[derive(Default)]
struct CancelState {
    cancelled: bool,
    /// The call has handed out its result.
    done: bool,
    current: Option<CancelHandle>,
}

impl Cancel {
    /// Cancels the call; false if it had already completed (or was cancelled already).
    pub(crate) fn cancel(&self, reason: &str) -> bool {
        let mut state = self.lock();
        if state.done || state.cancelled {
            return false;
        }
        state.cancelled = true;
        if let Some(handle) = &state.current {
            handle.cancel(reason);
        }
        true
    }

    /// Cancelling reaches `handle`'s round (the first one).
    pub(crate) fn cancel_on(&self, handle: CancelHandle) {
        self.lock().current = Some(handle);
    }

    fn running(&self, handle: CancelHandle) -> Result<(), ClientError> {
        let mut state = self.lock();
        state.current = Some(handle);
        if state.cancelled {
            return Err(cancelled());
        }
        Ok(())
    }

    /// The call is about to hand out `result`: unless it was cancelled first.
    fn complete(&self, result: Value) -> Result<Value, ClientError> {
        let mut state = self.lock();
        if state.cancelled {
            return Err(cancelled());
        }
        state.done = true;
        Ok(result)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CancelState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn cancelled() -> ClientError {
    ClientError::Session(SessionError::Cancelled("the call was cancelled".to_owned()))
}

/// Sends one round of `method` with `params`.
pub(crate) async fn send_round(
    client: &Client,
    method: &str,
    params: &Value,
    options: &Options,
) -> Result<InFlight<Value>, ClientError> {
    let mut request = client.request_raw(method, params.clone());
    if let Some(meta) = &options.meta {
        request = request.merge_meta(meta.clone());
    }
    let elapsed = options.started.elapsed();
    match options.timeout {
        Some(Some(total)) => request = request.timeout(total.saturating_sub(elapsed)),
        Some(None) => request = request.no_timeout(),
        None => {}
    }
    if let Some(hard_max) = options.reset_max {
        request = request.reset_timeout_on_progress(hard_max.saturating_sub(elapsed));
    }
    if let Some(sink) = &options.progress {
        let sink = sink.clone();
        // The handle is this round's: cancelling it ends the round, and with it the call.
        request = request.on_progress_with_cancel(move |p, call| {
            let mut callback = sink
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            callback(p, call);
        });
    }
    Ok(request.send().await?)
}

impl Client {
    /// A request that may take rounds of questions on the stateless revision; a plain request
    /// on a session.
    pub(crate) async fn call_in_rounds<M: RequestType>(
        &self,
        params: M::Params,
    ) -> Result<M::Result, ClientError> {
        if self.inner.envelope.is_none() {
            return self.call::<M>(params).await;
        }
        let invalid = |reason: String| ClientError::InvalidResponse {
            method: M::METHOD.to_owned(),
            reason,
        };
        let params = serde_json::to_value(params).map_err(|e| {
            ClientError::Session(SessionError::InvalidParams {
                method: M::METHOD.to_owned(),
                reason: e.to_string(),
            })
        })?;
        let key = if self.fresh {
            None
        } else {
            crate::cache::ResultCache::key(M::METHOD, &params)
        };
        if let Some(hit) = key.as_ref().and_then(|k| self.inner.cache.get(k)) {
            return serde_json::from_value(hit).map_err(|e| invalid(e.to_string()));
        }
        let result = run(self, M::METHOD, params, Options::plain()).await?;
        if let Some(key) = key {
            self.inner.cache.put(key, &result);
        }
        serde_json::from_value(result).map_err(|e| invalid(e.to_string()))
    }
}

/// Runs a whole call: every round until the result is complete.
pub(crate) async fn run(
    client: &Client,
    method: &'static str,
    params: Value,
    options: Options,
) -> Result<Value, ClientError> {
    let first = send_round(client, method, &params, &options).await?.await?;
    finish(client, method, params, first, options, Arc::default()).await
}

/// Goes on from the result of a round: answers its questions and retries, until a result is
/// complete.
pub(crate) async fn finish(
    client: &Client,
    method: &'static str,
    mut params: Value,
    mut result: Value,
    options: Options,
    cancel: Arc<Cancel>,
) -> Result<Value, ClientError> {
    let limit = client.inner.max_input_rounds;
    let mut rounds = 1;
    loop {
        match result.get("resultType") {
            // A server of an older revision sends no resultType: complete.
            None => return cancel.complete(result),
            Some(Value::String(kind)) if kind == result_type::COMPLETE => {
                return cancel.complete(result);
            }
            // A task (the tasks extension): the caller follows it.
            Some(Value::String(kind)) if kind == RESULT_TYPE_TASK => {
                return cancel.complete(result);
            }
            Some(Value::String(kind)) if kind == result_type::INPUT_REQUIRED => {}
            Some(other) => {
                return Err(ClientError::InvalidResponse {
                    method: method.to_owned(),
                    reason: format!("unknown resultType {other}"),
                });
            }
        }
        if rounds >= limit {
            return Err(ClientError::InvalidResponse {
                method: method.to_owned(),
                reason: format!("the server still asks for input after {limit} rounds"),
            });
        }
        let answers = answer_all(client, &result).await?;
        let Value::Object(object) = &mut params else {
            return Err(ClientError::InvalidResponse {
                method: method.to_owned(),
                reason: "the request has no params object to retry with".to_owned(),
            });
        };
        object.insert("inputResponses".to_owned(), Value::Object(answers));
        match result.get("requestState") {
            Some(Value::String(state)) => {
                object.insert("requestState".to_owned(), Value::from(state.as_str()));
            }
            // The server sent none this time: send none back.
            _ => {
                object.remove("requestState");
            }
        }
        let round = send_round(client, method, &params, &options).await?;
        cancel.running(round.cancel_handle())?;
        result = round.await?;
        rounds += 1;
    }
}

/// Answers every question of an `input_required` result, at once, with the client's handlers.
pub(crate) async fn answer_all(client: &Client, result: &Value) -> Result<JsonObject, ClientError> {
    let questions = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if questions.len() > MAX_QUESTIONS {
        return Err(ClientError::InvalidResponse {
            method: "input_required".to_owned(),
            reason: format!(
                "the server asked {} questions in one round; the most this client answers is \
                 {MAX_QUESTIONS}",
                questions.len()
            ),
        });
    }
    let answers = questions.into_iter().map(|(key, question)| async move {
        let method = question
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = question.get("params").cloned();
        let id = RequestId::String(key.clone().into());
        let ctx = RequestContext::detached(id.clone(), &method, params.as_ref(), client.peer());
        let request = Request { id, method, params };
        let answer = client
            .inner
            .answerers
            .answer(request, ctx)
            .await
            .map_err(|error| ClientError::Input {
                key: key.clone(),
                error,
            })?;
        Ok::<_, ClientError>((key, answer))
    });
    futures::future::try_join_all(answers)
        .await
        .map(|pairs| pairs.into_iter().collect())
}
