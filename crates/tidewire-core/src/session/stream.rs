//! A request served without a session (the 2026-07-28 wire over HTTP): its own response stream
//! ([`RequestStream`]) and the run of its handler ([`RequestRun`]), which a transport polls in
//! place of an engine session, a driver task and their queues.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error::SessionError;
use super::options::CancelPolicy;
use crate::jsonrpc::{EncodedResult, Response};
use crate::transport::TransportError;

/// The response stream of one request served without a session: what its handler sends before
/// the response (progress, logs, a listen's notifications) goes here, encoded as JSON-RPC
/// notifications, in order.
///
/// Bounded in messages (a handler that sends faster than the client reads waits for room) and
/// in the size of each (a notification over the limit is refused, as a codec would). Once the
/// transport has dropped the other end (the client closed the response, which cancels the
/// request), every send fails with [`SessionError::Closed`]: nothing more is sent for it.
#[derive(Clone, Debug)]
pub struct RequestStream {
    tx: mpsc::Sender<Bytes>,
    max_message_size: usize,
}

/// The transport's end of a [`RequestStream`]: the encoded notifications, one JSON text each.
#[derive(Debug)]
pub struct RequestStreamReceiver {
    rx: mpsc::Receiver<Bytes>,
}

/// A request's stream holding at most `capacity` messages (at least one) of at most
/// `max_message_size` bytes each, and the transport's end of it.
pub fn request_stream(
    capacity: usize,
    max_message_size: usize,
) -> (RequestStream, RequestStreamReceiver) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (
        RequestStream {
            tx,
            max_message_size,
        },
        RequestStreamReceiver { rx },
    )
}

/// A notification in wire form, written straight from its parameters' type (no `Value` tree).
#[derive(Serialize)]
struct Wire<'a, P: ?Sized> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

/// Notification `method` with `params` as JSON text, written straight from the params' type.
pub(crate) fn wire_notification<P: Serialize + ?Sized>(
    method: &str,
    params: Option<&P>,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    serde_json::to_writer(
        &mut out,
        &Wire {
            jsonrpc: "2.0",
            method,
            params,
        },
    )?;
    Ok(out)
}

impl RequestStream {
    /// Sends a notification `method` with `params` on the stream, waiting for room.
    ///
    /// # Errors
    /// [`SessionError::Closed`] once the client has closed the response;
    /// [`SessionError::InvalidParams`] when the params do not serialize;
    /// [`SessionError::Transport`] ([`is_too_large`](crate::transport::TransportError::is_too_large))
    /// when the message is over the size limit (nothing is sent either way; the stream goes on).
    pub async fn notify<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&P>,
    ) -> Result<(), SessionError> {
        let bytes = self.encode(method, params)?;
        self.tx
            .send(bytes)
            .await
            .map_err(|_| SessionError::Closed("the client closed the request's stream".into()))
    }

    /// Waits for room for one message; the permit sends it without waiting again (so a caller
    /// can decide what to send, under a lock, once there is room).
    ///
    /// # Errors
    /// [`SessionError::Closed`] once the client has closed the response.
    pub(crate) async fn reserve(&self) -> Result<mpsc::Permit<'_, Bytes>, SessionError> {
        self.tx
            .reserve()
            .await
            .map_err(|_| SessionError::Closed("the client closed the request's stream".into()))
    }

    /// A notification's JSON text, within the size limit.
    pub(crate) fn encode<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&P>,
    ) -> Result<Bytes, SessionError> {
        let invalid = |reason: String| SessionError::InvalidParams {
            method: method.to_owned(),
            reason,
        };
        let out = wire_notification(method, params).map_err(|e| invalid(e.to_string()))?;
        self.within_limit(Bytes::from(out))
    }

    /// A message's JSON text, made by the caller, as bytes to send, within the size limit.
    pub(crate) fn within_limit(&self, out: Bytes) -> Result<Bytes, SessionError> {
        if out.len() > self.max_message_size {
            return Err(SessionError::Transport(TransportError::too_large(
                out.len(),
                self.max_message_size,
                false,
            )));
        }
        Ok(out)
    }

    /// True once the transport has dropped the other end.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl RequestStreamReceiver {
    /// The next notification; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.rx.recv().await
    }

    /// Polls for the next notification (see [`recv`](Self::recv)).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.rx.poll_recv(cx)
    }

    /// A notification already there, without waiting.
    pub fn try_recv(&mut self) -> Option<Bytes> {
        self.rx.try_recv().ok()
    }
}

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
