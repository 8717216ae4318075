//! [`RequestObserver`]: what watches the requests a session sends — to carry trace context in
//! their `_meta` and time them (`tidewire-otel`), say — without the engine knowing of it.

use std::sync::Arc;

use serde_json::Value;

use super::SessionError;
use crate::jsonrpc::RequestId;

/// Watches each request a session sends: set one with
/// [`SessionOptions::observe_requests`](super::SessionOptions::observe_requests). Without one
/// (the default) the engine does nothing more per request.
pub trait RequestObserver: Send + Sync + 'static {
    /// `method` (id `id`) is about to be sent with `params`, which the observer may add to
    /// (`_meta` members, for one). What it returns is told how the request ended; dropped
    /// without being told, the request was abandoned (its future dropped, or cancelled).
    fn sending(
        &self,
        method: &str,
        id: &RequestId,
        params: &mut Option<Value>,
    ) -> Option<Box<dyn ObservedRequest>>;
}

/// One request being watched (see [`RequestObserver::sending`]).
pub trait ObservedRequest: Send {
    /// The request ended: its result, or why it failed.
    fn ended(self: Box<Self>, outcome: Result<&Value, &SessionError>);
}

/// The observer a session's options hold, if any (`Debug` shows only whether there is one).
#[derive(Clone, Default)]
pub(crate) struct ObserverSlot(pub(crate) Option<Arc<dyn RequestObserver>>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}
