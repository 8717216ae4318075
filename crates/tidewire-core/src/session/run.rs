//! The run of a request served without a session ([`RequestRun`]), which a transport polls in
//! place of an engine session and a driver task, and what it resolves to ([`Answered`]).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::options::CancelPolicy;
use crate::jsonrpc::{EncodedResult, Response};

/// How a request served without a session is answered: what its [`RequestRun`] resolves to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Answered {
    /// A response message (an error, or a result as a `Value`).
    Response(Response),
    /// A success result already in wire form, framed by the transport as the response to the
    /// request.
    Result(EncodedResult),
}

impl From<Response> for Answered {
    fn from(response: Response) -> Self {
        Self::Response(response)
    }
}

/// The run of one request served without a session: a future of its response, polled by the
/// transport where it answers (no task of its own).
///
/// Dropping it before it is done is how the transport cancels the request (the client closed
/// the response): the request's cancellation token fires, then under [`CancelPolicy::Abort`]
/// the handler is dropped (its `on_cancel` guards run); under [`CancelPolicy::Cooperative`] it
/// goes on in a task of its own to its own return, its sends failing and its result dropped.
/// What the transport [holds](Self::hold) on the request (its place among the requests running
/// at once) is released only when the handler has stopped, so cancelling cannot lift a cap.
#[must_use = "a request runs only when its run is polled"]
pub struct RequestRun {
    handler: Option<BoxFuture<'static, Option<Answered>>>,
    cancel: CancellationToken,
    policy: CancelPolicy,
    held: Vec<Box<dyn Any + Send>>,
}

impl std::fmt::Debug for RequestRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestRun")
            .field("done", &self.handler.is_none())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl RequestRun {
    /// The run of `handler`, whose context is cancelled through `cancel` under `policy`.
    /// What `handler` answers is sent, whether or not `cancel` fired: `None` sends nothing.
    /// (Dropping the run is how its client's cancellation arrives, and then nothing is sent
    /// anyway; a server that cancels a request itself, as a drain past its deadline does, still
    /// answers it: see [`watch_drain`](super::watch_drain).)
    pub fn new(
        handler: BoxFuture<'static, Option<Answered>>,
        cancel: CancellationToken,
        policy: CancelPolicy,
    ) -> Self {
        Self {
            handler: Some(handler),
            cancel,
            policy,
            held: Vec::new(),
        }
    }

    /// Keeps `value` until the handler has stopped (answered, dropped, or — cooperative —
    /// returned after a cancellation), then drops it.
    pub fn hold(&mut self, value: impl Any + Send) {
        self.held.push(Box::new(value));
    }

    /// What a cancellation does to this request's handler.
    pub fn cancel_policy(&self) -> CancelPolicy {
        self.policy
    }
}

impl Future for RequestRun {
    type Output = Option<Answered>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(handler) = self.handler.as_mut() else {
            return Poll::Ready(None);
        };
        let response = std::task::ready!(handler.as_mut().poll(cx));
        self.handler = None;
        self.held.clear();
        // The handler decides what a cancelled request answers (`new`): nothing when its
        // client went away, the draining error or its own return when a drain cancelled it.
        Poll::Ready(response)
    }
}

impl Drop for RequestRun {
    fn drop(&mut self) {
        let Some(handler) = self.handler.take() else {
            return;
        };
        self.cancel.cancel();
        if self.policy != CancelPolicy::Cooperative {
            // Aborted: the handler is dropped here, after its token fired, so its `on_cancel`
            // guards run; then what was held goes.
            drop(handler);
            return;
        }
        let held = std::mem::take(&mut self.held);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    // Its result goes nowhere: the request was cancelled.
                    let _ = handler.await;
                    drop(held);
                });
            }
            // No runtime to finish on (the process is shutting down): dropped, as aborted.
            Err(_) => drop(handler),
        }
    }
}
