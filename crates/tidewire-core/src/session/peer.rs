//! The handle to the other side of a connection: send requests and notifications.

use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::SessionOptions;
use super::error::SessionError;
use super::state::State;
use crate::ProtocolVersion;
use crate::jsonrpc::{Message, Notification, RequestId};
use crate::queue::BoundedQueue;
use crate::schema::NotificationType;
use crate::transport::{Envelope, Failure, ReplySlot, Route, Settle, TransportProfile};

/// An envelope waiting for the writer. Boxed so the queue's slots stay small (8 bytes each).
pub(crate) type Queued = Box<Envelope>;

/// What a connection shares between its peer handles, its driver and its handler tasks.
pub(crate) struct Connection {
    pub(crate) outbound: Arc<BoundedQueue<Queued>>,
    pub(crate) state: Mutex<State>,
    pub(crate) options: SessionOptions,
    /// Asks the driver to stop.
    pub(crate) closing: CancellationToken,
    /// Fired when the driver has stopped.
    pub(crate) closed: CancellationToken,
    /// Set as `closing` fires (and so before `closed` does): what every outbound message
    /// checks, read without the lock a token's `is_cancelled` takes.
    stopping: std::sync::atomic::AtomicBool,
    pub(crate) close_reason: Mutex<Option<String>>,
    /// Set when the peer has closed its side: nothing it could answer will come.
    pub(crate) remote_closed: std::sync::atomic::AtomicBool,
    /// Woken whenever the last running inbound request finishes.
    pub(crate) idle: Notify,
    pub(crate) next_id: AtomicI64,
    /// 0 = not negotiated; otherwise 1 + index into `ProtocolVersion::ALL`.
    version: AtomicU8,
    /// What the transport asked of the engine.
    pub(crate) profile: TransportProfile,
    /// Counts the sessions the server ended under a live connection.
    pub(crate) sessions_ended: watch::Sender<u64>,
}

impl Settle for Connection {
    fn fail_pending(&self, id: &RequestId, failure: Failure) {
        if let Some(pending) = self.state().take_pending(id) {
            let error = match failure {
                Failure::Answer(error) => SessionError::Remote(error),
                Failure::Transport(error) => SessionError::Transport(error),
            };
            let _ = pending.responder.send(Err(error));
        }
    }
}

impl Connection {
    pub(crate) fn new(options: SessionOptions, profile: TransportProfile) -> Self {
        Self {
            outbound: Arc::new(BoundedQueue::new(options.outbound_queue)),
            state: Mutex::new(State::new(
                options.max_pending_outbound,
                options.max_inflight_inbound,
            )),
            options,
            closing: CancellationToken::new(),
            closed: CancellationToken::new(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            close_reason: Mutex::new(None),
            remote_closed: std::sync::atomic::AtomicBool::new(false),
            idle: Notify::new(),
            next_id: AtomicI64::new(1),
            version: AtomicU8::new(0),
            profile,
            sessions_ended: watch::channel(0).0,
        }
    }

    /// Asks the driver to stop: the writer sends what is queued, then ends; nothing more is
    /// queued.
    pub(crate) fn begin_closing(&self) {
        self.stopping.store(true, Ordering::Release);
        self.closing.cancel();
        self.outbound.close();
    }

    /// Whether the connection is closing or closed (`closing` or `closed` has fired): nothing
    /// more is queued.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Locks the tables. A poisoned lock (a panic while holding it) is recovered: the tables are
    /// plain maps that stay consistent between statements.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Frees the slot of an inbound request whose task has stopped (see
    /// [`State::finish_inbound`]) and wakes a drain waiting for idle.
    pub(crate) fn finish_inbound(&self, id: &RequestId, generation: u64) {
        let mut state = self.state();
        state.finish_inbound(id, generation);
        if state.inbound_len() == 0 {
            self.idle.notify_waiters();
        }
    }

    /// The negotiated protocol revision, once known.
    pub(crate) fn protocol_version(&self) -> Option<ProtocolVersion> {
        match self.version.load(Ordering::Acquire) {
            0 => None,
            n => ProtocolVersion::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    pub(crate) fn close_reason(&self) -> String {
        self.close_reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the session ended".to_owned())
    }

    /// Queues a message without waiting (for use in `Drop`). Falls back to a spawned send when the
    /// queue is full; drops the message only when no runtime is running.
    pub(crate) fn enqueue_nowait(&self, envelope: Envelope) {
        if self.closed.is_cancelled() {
            return;
        }
        if let Err(envelope) = self.outbound.try_push(Box::new(envelope))
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let queue = self.outbound.clone();
            handle.spawn(async move {
                let _ = queue.push(envelope).await;
            });
        }
    }

    /// Abandons an outbound request: removes it and, if it was still pending, tells the peer.
    /// Returns whether it was still pending.
    pub(crate) fn cancel_outbound(&self, id: &RequestId, method: &str, reason: &str) -> bool {
        let Some(pending) = self.state().take_pending(id) else {
            return false;
        };
        let _ = pending
            .responder
            .send(Err(SessionError::Cancelled(reason.to_owned())));
        // The spec forbids cancelling `initialize`. A transport that cancels by closing the
        // request's exchange has done so as the entry went — for a request of the stateless
        // revision, or one sent before any revision was negotiated (a probe); a session era
        // negotiated over such a transport is told with `notifications/cancelled`.
        let closed_by_transport = self.profile.cancels_by_closing
            && self
                .protocol_version()
                .is_none_or(|v| crate::version::STATELESS_VERSIONS.contains(&v));
        if method != "initialize" && !closed_by_transport && !self.closed.is_cancelled() {
            let params = serde_json::json!({ "requestId": id, "reason": reason });
            self.enqueue_nowait(Envelope::new(Notification::new(
                "notifications/cancelled",
                Some(params),
            )));
        }
        true
    }
}

/// A cheap, cloneable handle to the peer on the other end of a connection.
///
/// Use it to send requests ([`request`](Self::request)) and notifications
/// ([`notify`](Self::notify)). Clones share the connection (an `Arc` inside). A handle obtained
/// from a request's context is *routed*: what it sends is marked as related to that request, so
/// Streamable HTTP delivers it on that request's stream.
#[derive(Clone)]
pub struct Peer {
    pub(crate) shared: Arc<Connection>,
    pub(crate) route: Route,
    /// The transport's reply slot of the request this handle is routed to, when it gave one.
    pub(crate) reply: Option<ReplySlot>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("route", &self.route)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Sends a typed notification.
    ///
    /// # Errors
    /// [`SessionError::Closed`] when the connection is closed; `InvalidParams` when the params
    /// do not serialise.
    pub async fn notify<N: NotificationType>(&self, params: N::Params) -> Result<(), SessionError> {
        let params = to_params(N::METHOD, &params)?;
        self.notify_raw(N::METHOD, params).await
    }

    /// Sends a notification for any method.
    ///
    /// # Errors
    /// [`SessionError::Closed`] when the connection is closed.
    pub async fn notify_raw(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), SessionError> {
        let envelope = self.envelope(Notification::new(method, params));
        self.send_envelope(envelope).await
    }

    /// Notification `method` whose whole JSON text the caller wrote (`wire`), routed as this
    /// handle's messages are: the transport sends those bytes as they are (see
    /// [`Envelope::wire`]), checked against its size limit, with no `Value` tree made for its
    /// params.
    pub(crate) fn wire_envelope(&self, method: &str, wire: Bytes) -> Envelope {
        let mut envelope = self.envelope(Notification::new(method, None));
        envelope.wire = Some(wire);
        envelope
    }

    /// Sends a typed notification if the outbound queue has room now; never waits.
    ///
    /// For a message that may be lost rather than wait on a peer that does not keep up: a
    /// broadcast to many connections, where one slow reader must not hold up the others.
    ///
    /// # Errors
    /// [`SessionError::QueueFull`] when the queue is full (nothing was sent);
    /// [`SessionError::Closed`] when the connection is closed; `InvalidParams` when the params do
    /// not serialise.
    pub fn try_notify<N: NotificationType>(&self, params: N::Params) -> Result<(), SessionError> {
        let params = to_params(N::METHOD, &params)?;
        self.try_notify_raw(N::METHOD, params)
    }

    /// Sends a notification for any method if the outbound queue has room now; never waits.
    /// See [`try_notify`](Self::try_notify).
    ///
    /// # Errors
    /// [`SessionError::QueueFull`] when the queue is full (nothing was sent);
    /// [`SessionError::Closed`] when the connection is closed.
    pub fn try_notify_raw(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), SessionError> {
        let shared = &self.shared;
        if shared.is_stopping() {
            return Err(SessionError::Closed(shared.close_reason()));
        }
        let envelope = self.envelope(Notification::new(method, params));
        let queue = &shared.outbound;
        match queue.try_push(Box::new(envelope)) {
            Ok(()) => Ok(()),
            Err(_) if queue.is_closed() => Err(SessionError::Closed(shared.close_reason())),
            Err(_) => Err(SessionError::QueueFull(shared.options.outbound_queue)),
        }
    }

    /// Rewrites outgoing params for an older negotiated revision (see [`crate::schema::compat`]).
    pub(crate) fn adapt_params(&self, method: &str, params: &mut Option<Value>) {
        if let (Some(version), Some(value)) = (self.protocol_version(), params.as_mut()) {
            crate::schema::compat::adapt_outgoing(
                version,
                method,
                crate::schema::compat::PayloadKind::Params,
                value,
            );
        }
    }

    /// Queues a message the engine itself answers with (a ping reply, a refusal) without
    /// waiting. When the queue is full the message comes back, for the caller to wait for room
    /// (the reader does, which keeps a flooding peer in check); when the connection is closed,
    /// it is dropped.
    pub(crate) fn try_send_envelope(&self, envelope: Envelope) -> Option<Queued> {
        self.try_queue(envelope).err().flatten()
    }

    /// Queues a message if the outbound queue has room now. `Err(Some(_))` gives it back when
    /// the queue is full (for [`queue`](Self::queue)), `Err(None)` when the connection is
    /// closing (it is dropped).
    pub(crate) fn try_queue(&self, envelope: Envelope) -> Result<(), Option<Queued>> {
        if self.shared.is_stopping() {
            return Err(None);
        }
        let queue = &self.shared.outbound;
        match queue.try_push(Box::new(envelope)) {
            Ok(()) => Ok(()),
            Err(_) if queue.is_closed() => Err(None),
            Err(queued) => Err(Some(queued)),
        }
    }

    /// Queues a message [`try_queue`](Self::try_queue) gave back, waiting for room.
    pub(crate) async fn queue(&self, queued: Queued) -> Result<(), SessionError> {
        self.shared
            .outbound
            .push(queued)
            .await
            .map_err(|_| SessionError::Closed(self.shared.close_reason()))
    }

    pub(crate) async fn send_envelope(&self, envelope: Envelope) -> Result<(), SessionError> {
        if self.shared.is_stopping() {
            return Err(SessionError::Closed(self.shared.close_reason()));
        }
        self.queue(Box::new(envelope)).await
    }

    /// The same peer, with what it sends marked as related to `route`.
    #[must_use]
    pub fn with_route(&self, route: Route) -> Self {
        Self {
            shared: self.shared.clone(),
            route,
            reply: None,
        }
    }

    /// A handle routed to nothing.
    pub(crate) fn unrouted(shared: Arc<Connection>) -> Self {
        Self {
            shared,
            route: Route::Unrelated,
            reply: None,
        }
    }

    /// The same peer, routed to an inbound request and to the reply slot its transport gave.
    pub(crate) fn routed_to(&self, id: RequestId, reply: Option<ReplySlot>) -> Self {
        Self {
            shared: self.shared.clone(),
            route: Route::Request(id),
            reply,
        }
    }

    /// An envelope for a message sent through this handle: its route and reply slot.
    pub(crate) fn envelope(&self, message: impl Into<Message>) -> Envelope {
        Envelope::new(message)
            .with_route(self.route.clone())
            .with_reply(self.reply.clone())
    }

    /// The route of this handle.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The protocol revision negotiated on this connection, once known.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.shared.protocol_version()
    }

    /// Records the negotiated protocol revision (the server and client APIs do this during
    /// `initialize`); it decides, for example, whether progress carries a `message`.
    pub fn set_protocol_version(&self, version: ProtocolVersion) {
        let index = ProtocolVersion::ALL
            .iter()
            .position(|v| *v == version)
            .unwrap_or(0);
        let code = u8::try_from(index + 1).unwrap_or(0);
        self.shared.version.store(code, Ordering::Release);
    }

    /// What the connection's transport asked of the engine (see
    /// [`TransportSender::profile`](crate::transport::TransportSender::profile)): whether it
    /// carries the stateless revision, whether a client builds routing headers.
    pub fn transport_profile(&self) -> TransportProfile {
        self.shared.profile
    }

    /// Counts the sessions the server ended while the connection went on (Streamable HTTP: a
    /// 404 to a request carrying the session id). Wait on
    /// [`changed`](watch::Receiver::changed) to start a new session when it happens (the client
    /// API does so on its own).
    pub fn sessions_ended(&self) -> watch::Receiver<u64> {
        self.shared.sessions_ended.subscribe()
    }

    /// Asks the connection to close: queued messages are flushed, the transport is closed,
    /// in-flight requests fail with [`SessionError::Closed`] and running handlers are cancelled.
    pub fn close(&self) {
        self.shared.begin_closing();
    }

    /// True once the connection has stopped.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Waits until the connection has stopped.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// Why the connection stopped, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.is_closed().then(|| self.shared.close_reason())
    }

    /// Outbound requests waiting for their responses.
    pub fn pending_requests(&self) -> usize {
        self.shared.state().pending_len()
    }

    /// Inbound requests whose handlers are running.
    pub fn inflight_requests(&self) -> usize {
        self.shared.state().inbound_len()
    }
}

fn to_params<P: Serialize>(method: &str, params: &P) -> Result<Option<Value>, SessionError> {
    serde_json::to_value(params)
        .map(Some)
        .map_err(|e| SessionError::InvalidParams {
            method: method.to_owned(),
            reason: e.to_string(),
        })
}
