//! Multi round-trip requests (2026-07-28): how `ctx.elicit`, `ctx.create_message` and
//! `ctx.list_roots` work when the server may not send the client a request.
//!
//! The handler runs. When it asks a question nobody has answered yet, the question is noted and
//! the handler waits for ever; once the handler can go no further, the request is answered
//! `input_required` with every question noted (several asked at once travel in one round) and a
//! sealed `requestState`. The client answers and retries the same request with
//! `inputResponses` and the state; the handler runs again from the start, and each question it
//! asks again is answered from what was recorded, until it finishes or asks something new.
//!
//! The state records, under the server's [`KeyRing`]: which request it belongs to (method, name
//! or URI, a digest of the arguments, the principal), when it expires, the questions asked so far
//! (key and a digest of the question) and the answers already used. So an answer is taken only
//! for a question that was asked, in the form it was asked; tampered, expired or foreign state
//! is refused with `-32602`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{InputRequest, InputRequiredResult, JsonObject};

use crate::seal::KeyRing;

/// The version of the state's payload.
const FORMAT: u8 = 1;

/// Which request a state belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// `tools/call`, `resources/read` or `prompts/get`.
    pub(crate) method: &'static str,
    /// The tool or prompt name, or the URI.
    pub(crate) name: String,
    /// A digest of the arguments.
    pub(crate) arguments: Digest,
    /// Who the request acts for, when authentication says.
    pub(crate) principal: Option<String>,
}

impl Binding {
    /// A binding to `method` on `name`, whose arguments have the digest `arguments` (see
    /// [`digest`] and [`digest_object`]).
    pub(crate) fn new(
        method: &'static str,
        name: &str,
        arguments: Digest,
        principal: Option<String>,
    ) -> Self {
        Self {
            method,
            name: name.to_owned(),
            arguments,
            principal,
        }
    }
}

/// One question asked: its key and a digest of what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    k: String,
    d: String,
}

/// What a sealed `requestState` holds.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    v: u8,
    m: String,
    n: String,
    a: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    /// Expiry, in milliseconds since the Unix epoch.
    x: u64,
    #[serde(default)]
    q: Vec<Asked>,
    #[serde(default)]
    r: BTreeMap<String, Value>,
    /// The handler's own state, when it answered `input_required` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    u: Option<String>,
}

/// How a state is sealed, how long it lives, how large it may grow.
#[derive(Debug, Clone)]
pub(crate) struct StatePolicy {
    pub(crate) keys: KeyRing,
    pub(crate) ttl: Duration,
    pub(crate) max_bytes: usize,
}

impl Default for StatePolicy {
    /// A random key for this process, valid 10 minutes, at most 256 KiB of answers.
    fn default() -> Self {
        let keys = KeyRing::random().unwrap_or_else(|error| {
            // Without randomness, a fixed key would let anyone forge state: refuse all instead.
            tracing::error!(%error, "no random key for requestState: stateless questions will fail");
            KeyRing::unusable()
        });
        Self {
            keys,
            ttl: Duration::from_secs(600),
            max_bytes: 256 * 1024,
        }
    }
}

/// One run of a retryable request's handler, with the answers it may use.
#[derive(Debug)]
pub(crate) struct Rounds {
    policy: Arc<StatePolicy>,
    binding: Binding,
    /// Answers recorded by earlier rounds, and this retry's answers to questions asked then.
    answers: BTreeMap<String, Value>,
    /// The questions asked in earlier rounds.
    asked_before: Vec<Asked>,
    /// The handler's own state from the last round.
    user_state: Option<String>,
    /// This retry's `inputResponses`, as sent.
    responses: Option<JsonObject>,
    run: Mutex<Run>,
}

#[derive(Debug, Default)]
struct Run {
    /// Questions asked in this run, in order.
    asked: Vec<Asked>,
    /// Answers used in this run.
    used: BTreeMap<String, Value>,
    /// Questions with no answer yet.
    pending: BTreeMap<String, InputRequest>,
    /// An `input_required` result the handler made itself.
    own: Option<InputRequiredResult>,
    /// The task running the handler, woken when a question is asked off its poll.
    waker: Option<Waker>,
}

/// How a run ended.
pub(crate) enum Outcome<T> {
    /// The handler finished.
    Done(T),
    /// The handler waits for answers.
    NeedInput,
}

impl Rounds {
    /// A run for a request that carries `state` and `responses` (a first try carries neither).
    ///
    /// # Errors
    /// `-32602` when the state is not one this server sealed for this very request, or expired.
    pub(crate) fn begin(
        policy: Arc<StatePolicy>,
        binding: Binding,
        state: Option<&str>,
        responses: Option<JsonObject>,
    ) -> Result<Self, ErrorObject> {
        let mut rounds = Self {
            policy,
            binding,
            answers: BTreeMap::new(),
            asked_before: Vec::new(),
            user_state: None,
            responses,
            run: Mutex::new(Run::default()),
        };
        // Answers come from the state (used in earlier rounds) and from this retry; a recorded
        // answer is never replaced. An answer nobody asked for is harmless (the client answers
        // its own user's questions either way): it is taken if the handler asks that key, and
        // ignored otherwise.
        let mut fresh = BTreeMap::new();
        if let Some(responses) = &rounds.responses {
            for (key, answer) in responses {
                // `null` is no answer: the question is asked again.
                if !answer.is_null() {
                    fresh.insert(key.clone(), answer.clone());
                }
            }
        }
        if let Some(state) = state {
            let refuse =
                |why: &str| ErrorObject::invalid_params(format!("requestState refused: {why}"));
            let bytes = rounds.policy.keys.open(state).map_err(refuse)?;
            let state: State =
                serde_json::from_slice(&bytes).map_err(|_| refuse("its payload is malformed"))?;
            if state.v != FORMAT {
                return Err(refuse("it is of another format"));
            }
            if now_ms() >= state.x {
                return Err(refuse("it expired; start the request again without it"));
            }
            let binding = &rounds.binding;
            if state.m != binding.method
                || state.n != binding.name
                || state.a != binding.arguments.hex()
                || state.p != binding.principal
            {
                return Err(refuse(
                    "it was issued for another request (method, name, arguments or principal \
                     differ)",
                ));
            }
            rounds.answers = state.r;
            rounds.asked_before = state.q;
            rounds.user_state = state.u;
        }
        for (key, answer) in fresh {
            rounds.answers.entry(key).or_insert(answer);
        }
        Ok(rounds)
    }

    /// The answer to the question `key` (or the next numbered question when `key` is `None`),
    /// when it was asked before in this form and answered with a `T`; otherwise the question is
    /// noted for this round and `None` comes back (the caller then waits for ever).
    pub(crate) fn answer<T: DeserializeOwned>(
        &self,
        key: Option<&str>,
        request: InputRequest,
    ) -> Option<T> {
        let mut run = self.lock();
        let key = match key {
            Some(key) => key.to_owned(),
            None => {
                let kind = match &request {
                    InputRequest::Elicit(_) => "elicitation",
                    InputRequest::CreateMessage(_) => "sampling",
                    InputRequest::ListRoots => "roots",
                };
                format!("{kind}-{}", run.asked.len() + 1)
            }
        };
        let asked = Asked {
            k: key.clone(),
            d: digest(&request.to_value()).hex(),
        };
        // A handler that asks something else under a key it asked before gets the new question
        // asked: an answer is only taken for the question as it was asked.
        let changed = self
            .asked_before
            .iter()
            .any(|before| before.k == asked.k && before.d != asked.d);
        let answer = (!changed)
            .then(|| self.answers.get(&key))
            .flatten()
            .and_then(|value| {
                serde_json::from_value::<T>(value.clone())
                    .ok()
                    .map(|typed| (typed, value.clone()))
            });
        if !run.asked.iter().any(|a| a.k == key) {
            run.asked.push(asked);
        }
        match answer {
            Some((typed, raw)) => {
                run.used.insert(key, raw);
                Some(typed)
            }
            None => {
                run.pending.insert(key, request);
                if let Some(waker) = run.waker.take() {
                    waker.wake();
                }
                None
            }
        }
    }

    /// The handler answers `input_required` itself with `result`.
    pub(crate) fn own_result(&self, result: InputRequiredResult) {
        let mut run = self.lock();
        run.own = Some(result);
        if let Some(waker) = run.waker.take() {
            waker.wake();
        }
    }

    /// The handler's own `requestState` from its last `input_required`, unsealed.
    pub(crate) fn user_state(&self) -> Option<&str> {
        self.user_state.as_deref()
    }

    /// This retry's `inputResponses`, as the client sent them.
    pub(crate) fn responses(&self) -> Option<&JsonObject> {
        self.responses.as_ref()
    }

    /// Runs `handler` until it finishes, or until it waits with a question outstanding.
    ///
    /// The handler is pinned where the caller keeps it: taken by value, it would be held twice
    /// in this future (as the argument and as the pinned local), and again in every async
    /// caller that passes it on, which made a stateless request's future 6 KiB.
    pub(crate) async fn run<T, F: Future<Output = T>>(
        &self,
        mut handler: Pin<&mut F>,
    ) -> Outcome<T> {
        std::future::poll_fn(|cx| {
            if let Poll::Ready(value) = handler.as_mut().poll(cx) {
                return Poll::Ready(Outcome::Done(value));
            }
            let mut run = self.lock();
            if !run.pending.is_empty() || run.own.is_some() {
                return Poll::Ready(Outcome::NeedInput);
            }
            run.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// The `input_required` answer of a run that ended waiting: its questions and a fresh
    /// sealed state.
    ///
    /// # Errors
    /// `-32603` when the state would exceed its size limit, or cannot be sealed.
    pub(crate) fn input_required(&self) -> Result<InputRequiredResult, ErrorObject> {
        let mut run = self.lock();
        let own = run.own.take();
        let mut requests = std::mem::take(&mut run.pending);
        let mut user_state = None;
        if let Some(own) = own {
            user_state = own.request_state;
            for (key, request) in own.input_requests.unwrap_or_default() {
                let asked = Asked {
                    k: key.clone(),
                    d: digest(&request.to_value()).hex(),
                };
                if !run.asked.iter().any(|a| a.k == key) {
                    run.asked.push(asked);
                }
                requests.insert(key, request);
            }
        }
        let state = State {
            v: FORMAT,
            m: self.binding.method.to_owned(),
            n: self.binding.name.clone(),
            a: self.binding.arguments.hex(),
            p: self.binding.principal.clone(),
            x: now_ms()
                .saturating_add(u64::try_from(self.policy.ttl.as_millis()).unwrap_or(u64::MAX)),
            q: run.asked.clone(),
            r: run.used.clone(),
            u: user_state,
        };
        let payload = serde_json::to_vec(&state).map_err(ErrorObject::internal)?;
        if payload.len() > self.policy.max_bytes {
            return Err(ErrorObject::internal(format!(
                "the answers this request has gathered ({} bytes) exceed the limit of its \
                 requestState ({} bytes)",
                payload.len(),
                self.policy.max_bytes
            )));
        }
        let sealed = self
            .policy
            .keys
            .seal(&payload)
            .map_err(ErrorObject::internal)?;
        Ok(InputRequiredResult::new(requests, Some(sealed)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Run> {
        self.run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A digest of a JSON value that does not depend on the order of object members.
pub(crate) fn digest(value: &Value) -> Digest {
    let mut hasher = Sha256::new();
    canonical(value, &mut hasher);
    Digest::of(hasher)
}

/// The [`digest`] of an object's members (`None`: of `null`), without building a [`Value`].
pub(crate) fn digest_object(map: Option<&JsonObject>) -> Digest {
    let mut hasher = Sha256::new();
    match map {
        Some(map) => canonical_object(map, &mut hasher),
        None => hasher.update(b"null"),
    }
    Digest::of(hasher)
}

/// The first 16 bytes of a SHA-256, kept as bytes: a request that never seals a state never
/// writes it out ([`hex`](Self::hex) does, for a sealed state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest([u8; 16]);

impl Digest {
    fn of(hasher: Sha256) -> Self {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&hasher.finalize()[..16]);
        Self(bytes)
    }

    /// In lowercase hex, as a sealed state holds it.
    pub(crate) fn hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(32);
        for byte in self.0 {
            text.push(char::from(DIGITS[usize::from(byte >> 4)]));
            text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
        text
    }
}

/// Feeds what serde_json writes straight into a hash.
struct Feed<'a>(&'a mut Sha256);

impl std::io::Write for Feed<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => canonical_object(map, out),
        Value::Array(items) => {
            out.update(b"[");
            for item in items {
                canonical(item, out);
                out.update(b",");
            }
            out.update(b"]");
        }
        // A scalar's JSON text (writing into a hash cannot fail).
        other => {
            let _ = serde_json::to_writer(Feed(out), other);
        }
    }
}

/// An object's members in the order of their keys. A map that already iterates in that order
/// (serde_json's default `BTreeMap`) is not sorted again.
fn canonical_object(map: &JsonObject, out: &mut Sha256) {
    out.update(b"{");
    let member = |key: &String, value: &Value, out: &mut Sha256| {
        let _ = serde_json::to_writer(Feed(out), key);
        out.update(b":");
        canonical(value, out);
        out.update(b",");
    };
    if map.keys().is_sorted() {
        for (key, value) in map {
            member(key, value, out);
        }
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_by(|a, b| a.0.cmp(b.0));
        for (key, value) in members {
            member(key, value, out);
        }
    }
    out.update(b"}");
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tidewire_core::schema::{ElicitParams, ElicitResult, ElicitationSchema};

    use super::*;

    fn policy() -> Arc<StatePolicy> {
        Arc::new(StatePolicy {
            keys: KeyRing::new("t", [9u8; 32]).expect("ring"),
            ttl: Duration::from_secs(60),
            max_bytes: 64 * 1024,
        })
    }

    /// The digest is SHA-256 over a canonical text (members sorted, each followed by a comma),
    /// its first 16 bytes in hex: a state sealed by another replica or an earlier build of
    /// this format must still match.
    #[test]
    fn digests_are_canonical_and_stable() {
        let value = json!({"b": ["x", 2], "a": 1});
        assert_eq!(digest(&value).hex(), "b6ca5608e262d4b7951492b2faf5d6d4");
        let Value::Object(map) = &value else {
            panic!("an object")
        };
        assert_eq!(digest_object(Some(map)), digest(&value));
        assert_eq!(digest_object(None), digest(&Value::Null));
        assert_ne!(digest_object(None), digest_object(Some(&JsonObject::new())));
    }

    fn binding() -> Binding {
        Binding::new(
            "tools/call",
            "greet",
            digest(&json!({"b": 1, "a": 2})),
            None,
        )
    }

    fn question(text: &str) -> InputRequest {
        InputRequest::Elicit(ElicitParams::form(text, ElicitationSchema::default()))
    }

    fn accept() -> Value {
        json!({"action": "accept", "content": {"name": "Ada"}})
    }

    /// A handler asking two questions, one after the other.
    async fn handler(rounds: &Rounds) -> String {
        let first: Option<ElicitResult> = rounds.answer(Some("first"), question("one?"));
        if first.is_none() {
            std::future::pending::<()>().await;
        }
        let second: Option<ElicitResult> = rounds.answer(None, question("two?"));
        if second.is_none() {
            std::future::pending::<()>().await;
        }
        "done".to_owned()
    }

    /// Seals a round that needs input: checks which questions it asks, returns its state.
    fn asked_for(round: &Rounds, keys: &[&str]) -> String {
        let asked = round.input_required().expect("seals");
        let asked_keys: Vec<&String> = asked
            .input_requests
            .as_ref()
            .expect("asks")
            .keys()
            .collect();
        assert_eq!(asked_keys, keys);
        asked.request_state.expect("state")
    }

    fn retry(state: &str, responses: Value) -> Rounds {
        let responses = responses.as_object().cloned();
        Rounds::begin(policy(), binding(), Some(state), responses).expect("state accepted")
    }

    #[tokio::test]
    async fn questions_are_asked_one_round_at_a_time_and_answers_carry_over() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let first = Rounds::begin(policy(), binding(), None, None).expect("begins");
            assert!(matches!(
                first.run(std::pin::pin!(handler(&first))).await,
                Outcome::NeedInput
            ));
            let state = asked_for(&first, &["first"]);

            let second = retry(&state, json!({"first": accept(), "unasked": accept()}));
            assert!(matches!(
                second.run(std::pin::pin!(handler(&second))).await,
                Outcome::NeedInput
            ));
            let state = asked_for(&second, &["elicitation-2"]);

            // The first answer travels in the state; only the second is sent now.
            let third = retry(&state, json!({"elicitation-2": accept()}));
            match third.run(std::pin::pin!(handler(&third))).await {
                Outcome::Done(text) => assert_eq!(text, "done"),
                Outcome::NeedInput => panic!("every question was answered"),
            }
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn a_missing_or_malformed_answer_asks_again() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let first = Rounds::begin(policy(), binding(), None, None).expect("begins");
            let _ = first.run(std::pin::pin!(handler(&first))).await;
            let state = first
                .input_required()
                .expect("seals")
                .request_state
                .expect("state");
            for responses in [json!({}), json!({"first": 12345}), json!({"first": null})] {
                let again = retry(&state, responses.clone());
                assert!(
                    matches!(
                        again.run(std::pin::pin!(handler(&again))).await,
                        Outcome::NeedInput
                    ),
                    "{responses}"
                );
                let asked = again.input_required().expect("seals");
                assert!(asked.input_requests.expect("asks").contains_key("first"));
            }
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn tampered_foreign_and_expired_state_is_refused() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let first = Rounds::begin(policy(), binding(), None, None).expect("begins");
            let _ = first.run(std::pin::pin!(handler(&first))).await;
            let state = first
                .input_required()
                .expect("seals")
                .request_state
                .expect("state");
            let refused = |policy: Arc<StatePolicy>, binding: Binding, state: &str| {
                Rounds::begin(policy, binding, Some(state), None).expect_err("refused")
            };
            let error = refused(policy(), binding(), &format!("{state}-TAMPERED"));
            assert_eq!(error.code, -32602);
            // Same arguments in another order are the same request…
            let reordered = Binding::new(
                "tools/call",
                "greet",
                digest(&json!({"a": 2, "b": 1})),
                None,
            );
            assert!(Rounds::begin(policy(), reordered, Some(&state), None).is_ok());
            // …other arguments, another tool, another principal are not.
            let other_args = Binding::new("tools/call", "greet", digest(&json!({"a": 3})), None);
            assert_eq!(refused(policy(), other_args, &state).code, -32602);
            let other_tool = Binding::new(
                "tools/call",
                "other",
                digest(&json!({"a": 2, "b": 1})),
                None,
            );
            assert_eq!(refused(policy(), other_tool, &state).code, -32602);
            let mut other_principal = binding();
            other_principal.principal = Some("mallory".into());
            assert_eq!(refused(policy(), other_principal, &state).code, -32602);
            // Another server's key.
            let mut foreign = policy();
            Arc::make_mut(&mut foreign).keys = KeyRing::new("t", [8u8; 32]).expect("ring");
            assert_eq!(refused(foreign, binding(), &state).code, -32602);
            // Expired.
            let mut short = policy();
            Arc::make_mut(&mut short).ttl = Duration::ZERO;
            let soon = Rounds::begin(short.clone(), binding(), None, None).expect("begins");
            let _ = soon.run(std::pin::pin!(handler(&soon))).await;
            let old = soon
                .input_required()
                .expect("seals")
                .request_state
                .expect("state");
            assert_eq!(refused(short, binding(), &old).code, -32602);
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn questions_asked_together_travel_in_one_round() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let rounds = Rounds::begin(policy(), binding(), None, None).expect("begins");
            let both = async {
                let a = async {
                    if rounds
                        .answer::<ElicitResult>(Some("a"), question("a?"))
                        .is_none()
                    {
                        std::future::pending::<()>().await;
                    }
                };
                let b = async {
                    if rounds
                        .answer::<Value>(Some("b"), InputRequest::ListRoots)
                        .is_none()
                    {
                        std::future::pending::<()>().await;
                    }
                };
                futures::join!(a, b);
            };
            assert!(matches!(
                rounds.run(std::pin::pin!(both)).await,
                Outcome::NeedInput
            ));
            let asked = rounds.input_required().expect("seals");
            assert_eq!(asked.input_requests.expect("asks").len(), 2);
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn an_answer_without_state_is_taken_by_key_but_a_changed_question_is_asked_again() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let responses = json!({"first": accept(), "extra": accept()});
            let rounds = Rounds::begin(policy(), binding(), None, responses.as_object().cloned())
                .expect("begins");
            assert!(matches!(
                rounds.run(std::pin::pin!(handler(&rounds))).await,
                Outcome::NeedInput
            ));
            let asked = rounds.input_required().expect("seals");
            assert_eq!(
                asked
                    .input_requests
                    .expect("asks")
                    .keys()
                    .collect::<Vec<_>>(),
                ["elicitation-2"]
            );
            // The state recorded "first" as "one?"; a handler now asking "changed?" under that key
            // is not answered from the record.
            let state = asked.request_state.expect("state");
            let again = retry(&state, json!({}));
            let answer: Option<ElicitResult> = again.answer(Some("first"), question("changed?"));
            assert!(answer.is_none());
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[test]
    fn state_over_its_limit_is_an_error_not_a_huge_token() {
        let mut small = policy();
        Arc::make_mut(&mut small).max_bytes = 10;
        let rounds = Rounds::begin(small, binding(), None, None).expect("begins");
        let _ = rounds.answer::<Value>(Some("k"), InputRequest::ListRoots);
        assert_eq!(rounds.input_required().expect_err("too big").code, -32603);
    }
}
