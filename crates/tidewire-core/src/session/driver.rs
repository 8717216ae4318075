//! The driver: the future that runs one connection.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::RequestContext;
use super::drained::{Watched, watch_drain};
use super::peer::{Connection, Peer, Queued};
use super::state::{Inbound, ProgressDelivery, Refusal};
use super::{Answer, CancelPolicy, Handler, SessionError};
use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorCode, ErrorObject, Message, Notification, Request, RequestId, Response};
use crate::lifecycle::{RefusalReason, draining_error};
use crate::progress::ProgressParams;
use crate::schema::compat::{self, PayloadKind};
use crate::text::excerpt;
use crate::transport::{
    Envelope, ReplySlot, SessionEvent, TransportError, TransportReceiver, TransportSender,
};

/// The future that runs a connection: it reads messages and dispatches them, and writes what the
/// peers and handlers send. Poll it (or spawn it) for the connection to make progress.
///
/// It resolves when the peer closes the connection (`Ok`), when [`Peer::close`] is called
/// (`Ok`), or when the transport fails (`Err`). Then every pending outbound request fails with
/// [`SessionError::Closed`] and every running handler is cancelled.
///
/// Awaited outside a task on a multi-threaded runtime (the body of `#[tokio::main]`, which
/// `block_on` runs on the main thread), it moves itself onto the runtime as a task on its first
/// poll: otherwise every request would cross from the main thread, which reads and writes, to a
/// worker, which runs its handler, and back — two thread wake-ups per burst of requests, the
/// largest cost of a stdio server. Dropping the driver stops the connection either way.
#[must_use = "a connection does nothing unless its driver is polled"]
pub struct Driver {
    run: Run,
}

enum Run {
    /// Polled where it is awaited.
    Here(BoxFuture<'static, Result<(), TransportError>>),
    /// Moved onto the runtime (see [`Driver`]); aborted when the driver is dropped.
    Spawned(tokio::task::JoinHandle<Result<(), TransportError>>),
    /// Finished.
    Done,
}

impl Future for Driver {
    type Output = Result<(), TransportError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Run::Here(_) = &this.run
            && outside_a_worker()
            && let Run::Here(future) = std::mem::replace(&mut this.run, Run::Done)
        {
            this.run = Run::Spawned(tokio::spawn(future));
        }
        let outcome = match &mut this.run {
            Run::Here(future) => std::task::ready!(future.as_mut().poll(cx)),
            Run::Spawned(handle) => match std::task::ready!(Pin::new(handle).poll(cx)) {
                Ok(outcome) => outcome,
                Err(failed) => Err(TransportError::other(std::io::Error::other(format!(
                    "the connection's driver task ended: {failed}"
                )))),
            },
            Run::Done => Err(TransportError::closed()),
        };
        this.run = Run::Done;
        Poll::Ready(outcome)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Run::Spawned(handle) = &self.run {
            handle.abort();
        }
    }
}

/// True when polled by `block_on` (not inside a task) on a multi-threaded Tokio runtime, whose
/// workers are other threads.
fn outside_a_worker() -> bool {
    tokio::task::try_id().is_none()
        && tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        })
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

pub(crate) fn driver<S: TransportSender, R: TransportReceiver, H: Handler>(
    sender: S,
    receiver: R,
    handler: Arc<H>,
    shared: Arc<Connection>,
) -> Driver {
    Driver {
        run: Run::Here(Box::pin(run(sender, receiver, handler, shared))),
    }
}

async fn run<S: TransportSender, R: TransportReceiver, H: Handler>(
    sender: S,
    receiver: R,
    handler: Arc<H>,
    shared: Arc<Connection>,
) -> Result<(), TransportError> {
    let peer = Peer::unrouted(shared.clone());
    let mut reader = Box::pin(read_loop(receiver, handler, peer));
    let mut writer = Box::pin(write_loop(sender, shared.clone()));
    // The reader first: the answers it queues (a handler that answered at once) are written
    // in the same poll, not in another turn of this task, which would wake it again (on a
    // multi-threaded runtime, a task that wakes itself also wakes a sleeping worker).
    let result = tokio::select! {
        biased;
        read = &mut reader => {
            if read.is_ok() && !shared.closing.is_cancelled() {
                // The peer closed its side: let running handlers finish and answer first.
                // Boxed: the drain runs once per connection, so its state need not sit in every
                // idle connection's driver.
                tokio::select! {
                    () = Box::pin(drain(&shared)) => {}
                    written = &mut writer => {
                        finish(&shared, &describe_write(&written));
                        return read.and(written);
                    }
                }
            }
            // Flush what is queued, then close.
            shared.begin_closing();
            let written = writer.await;
            let reason = match &read {
                Ok(()) => "the peer closed the connection".to_owned(),
                Err(e) => describe(e),
            };
            finish(&shared, &reason);
            read.and(written)
        }
        written = &mut writer => {
            finish(&shared, &describe_write(&written));
            written
        }
    };
    result
}

/// Waits, within the drain timeout, until no inbound request is running. Outbound requests fail
/// first: the peer will send nothing more, so their answers cannot come.
async fn drain(shared: &Connection) {
    shared
        .remote_closed
        .store(true, std::sync::atomic::Ordering::Release);
    let pending = shared.state().drain_pending();
    for p in pending {
        let _ = p.responder.send(Err(SessionError::Closed(
            "the peer closed the connection".to_owned(),
        )));
    }
    let deadline = tokio::time::sleep(shared.options.drain_timeout);
    tokio::pin!(deadline);
    loop {
        let idle = shared.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if shared.state().inbound_len() == 0 {
            return;
        }
        tokio::select! {
            () = idle => {}
            () = &mut deadline => return,
            () = shared.closing.cancelled() => return,
        }
    }
}

fn describe_write(written: &Result<(), TransportError>) -> String {
    match written {
        Ok(()) => "the session was closed locally".to_owned(),
        Err(e) => describe(e),
    }
}

/// A transport error with its causes, on one line.
fn describe(e: &TransportError) -> String {
    crate::text::chain(e)
}

/// Ends the session: fails pending requests, cancels running handlers, wakes `closed()`.
fn finish(shared: &Connection, reason: &str) {
    *shared
        .close_reason
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason.to_owned());
    let (pending, inbound) = shared.state().drain();
    for p in pending {
        let _ = p
            .responder
            .send(Err(SessionError::Closed(reason.to_owned())));
    }
    // The end of the connection cancels what still runs: an aborting handler is dropped; a
    // cooperative one is told, and runs to its own return (its sends fail, its answer is
    // dropped), as on a cancellation.
    for i in inbound {
        i.cancel.cancel();
        if let Some(abort) = i.abort.filter(|_| !i.cooperative) {
            abort.abort();
        }
    }
    shared.begin_closing();
    shared.closed.cancel();
    tracing::debug!(%reason, "session closed");
}

async fn write_loop<S: TransportSender>(
    mut sender: S,
    shared: Arc<Connection>,
) -> Result<(), TransportError> {
    let written = write_all(&mut sender, &shared).await;
    // Closed however the writing ended, so a transport can say goodbye (Streamable HTTP sends
    // DELETE, stdio closes the child's stdin).
    let closed = sender.close().await;
    written.and(closed)
}

async fn write_all<S: TransportSender>(
    sender: &mut S,
    shared: &Connection,
) -> Result<(), TransportError> {
    // Until the queue closes (the session is closing) and what was queued before is sent.
    // Everything queued by the time one message is written goes into the same write: a burst
    // of replies costs one flush (one system call on a stream), as the input's burst cost one
    // read.
    let mut told = None;
    while let Some(envelope) = shared.outbound.pop().await {
        write_one(sender, shared, envelope, &mut told).await?;
        while let Some(next) = shared.outbound.try_pop() {
            write_one(sender, shared, next, &mut told).await?;
        }
        sender.flush().await?;
    }
    Ok(())
}

/// The handshake messages a sender is told about (see [`SessionEvent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Opening,
    Opened,
}

fn handshake_step(message: &Message) -> Option<Step> {
    match message {
        Message::Request(Request { method, .. }) if method == "initialize" => Some(Step::Opening),
        Message::Notification(Notification { method, .. })
            if method == "notifications/initialized" =>
        {
            Some(Step::Opened)
        }
        _ => None,
    }
}

/// What a failed send needs to know about the message it lost (kept instead of a copy of the
/// whole message, which would cost a deep clone per message sent).
enum Sent {
    Response(RequestId),
    Request(RequestId),
    Other(&'static str),
}

impl Sent {
    fn of(message: &Message) -> Self {
        match message {
            Message::Response(Response { id: Some(id), .. }) => Sent::Response(id.clone()),
            Message::Request(Request { id, .. }) => Sent::Request(id.clone()),
            Message::Response(_) => Sent::Other("an error response without an id"),
            Message::Notification(_) => Sent::Other("a notification"),
        }
    }
}

/// Tells the sender the negotiated revision, once per revision: on the client side before
/// `notifications/initialized`, on the server side before the first response written after the
/// `initialize` handler recorded it (its answer), so a transport never reads it from a message.
async fn tell_version<S: TransportSender>(
    sender: &mut S,
    shared: &Connection,
    told: &mut Option<ProtocolVersion>,
) {
    if let Some(version) = shared.protocol_version()
        && *told != Some(version)
    {
        *told = Some(version);
        sender
            .session_event(SessionEvent::Negotiated { version })
            .await;
    }
}

async fn write_one<S: TransportSender>(
    sender: &mut S,
    shared: &Connection,
    envelope: Queued,
    told: &mut Option<ProtocolVersion>,
) -> Result<(), TransportError> {
    let sent = Sent::of(&envelope.message);
    let route = match sent {
        Sent::Response(_) => Some((envelope.route.clone(), envelope.reply.clone())),
        _ => None,
    };
    let step = handshake_step(&envelope.message);
    match step {
        Some(Step::Opening) => {
            *told = None;
            sender.session_event(SessionEvent::Opening).await;
        }
        Some(Step::Opened) => tell_version(sender, shared, told).await,
        None if matches!(sent, Sent::Response(_)) => tell_version(sender, shared, told).await,
        None => {}
    }
    match sender.feed(*envelope).await {
        Ok(()) => {
            if step == Some(Step::Opened) {
                // What the event follows is written before the transport acts on it.
                sender.flush().await?;
                sender.session_event(SessionEvent::Opened).await;
            }
            Ok(())
        }
        Err(e) if e.is_recoverable() => {
            // This one message could not go out (too large); tell whoever waits for it.
            match sent {
                Sent::Response(id) => {
                    let error =
                        ErrorObject::internal(format!("the response could not be sent: {e}"));
                    let (route, reply) = route.unwrap_or_default();
                    let fallback = Envelope::new(Response::error(Some(id), error))
                        .with_route(route)
                        .with_reply(reply);
                    sender.feed(fallback).await
                }
                Sent::Request(id) => {
                    if let Some(p) = shared.state().take_pending(&id) {
                        let _ = p.responder.send(Err(SessionError::Transport(e)));
                    }
                    Ok(())
                }
                Sent::Other(what) => {
                    tracing::warn!(error = %e, "dropped {what} that could not be sent");
                    Ok(())
                }
            }
        }
        Err(e) => Err(e),
    }
}

async fn read_loop<R: TransportReceiver, H: Handler>(
    mut receiver: R,
    handler: Arc<H>,
    peer: Peer,
) -> Result<(), TransportError> {
    let shared = peer.shared.clone();
    // Made once: waiting for the close does not register anew for every message.
    let closing = shared.closing.cancelled();
    tokio::pin!(closing);
    loop {
        // A message that is there is taken without polling the close (a flood cannot keep the
        // session open: the writer ends it once it is closing).
        let item = tokio::select! {
            biased;
            item = receiver.recv() => item,
            () = &mut closing => return Ok(()),
        };
        match item {
            None => return Ok(()),
            Some(Err(e)) if e.is_session_ended() => {
                tracing::info!(error = %e, "the transport's session ended; the connection goes on");
                shared.sessions_ended.send_modify(|n| *n += 1);
            }
            Some(Err(e)) if e.is_recoverable() => {
                tracing::debug!(error = %e, "bad inbound message");
                if let Some(lifecycle) = &shared.options.lifecycle {
                    lifecycle.refused(if e.is_too_large() {
                        RefusalReason::TooLarge
                    } else {
                        RefusalReason::Malformed
                    });
                }
                if let Some(response) = e.error_response()
                    && let Some(reply) = peer.try_send_envelope(Envelope::new(response.clone()))
                {
                    Box::pin(wait_to_send(&shared, reply)).await;
                }
            }
            Some(Err(e)) => return Err(e),
            // Synchronous: handlers run in their own tasks, so the reader's future stays small
            // (it is part of every idle connection).
            Some(Ok(envelope)) => {
                if let Some(reply) = dispatch(envelope, &handler, &peer) {
                    // Rare (the queue is full): boxed, so its state is not part of every idle
                    // connection's reader.
                    Box::pin(wait_to_send(&shared, reply)).await;
                }
            }
        }
    }
}

/// Queues a reply of the engine's own once the outbound queue has room (or drops it when the
/// connection closes meanwhile).
async fn wait_to_send(shared: &Connection, reply: Queued) {
    let _ = shared.outbound.push(reply).await;
}

/// Hands a message to its handler. Returns a reply of the engine's own (to a ping, a refused
/// request) that found the outbound queue full, for the reader to send when there is room.
fn dispatch<H: Handler>(envelope: Envelope, handler: &Arc<H>, peer: &Peer) -> Option<Queued> {
    let Envelope {
        message,
        extensions,
        reply,
        ..
    } = envelope;
    match message {
        Message::Request(request) => start_request(request, extensions, reply, handler, peer),
        Message::Notification(notification) => {
            on_notification(notification, handler, peer);
            None
        }
        Message::Response(response) => {
            on_response(response, peer);
            None
        }
    }
}

fn start_request<H: Handler>(
    request: Request,
    extensions: crate::Extensions,
    reply: Option<ReplySlot>,
    handler: &Arc<H>,
    peer: &Peer,
) -> Option<Queued> {
    let shared = &peer.shared;
    let id = request.id.clone();
    // Everything sent for the request carries the transport's reply slot back out.
    let routed = peer.routed_to(id.clone(), reply);
    // A stateless (2026-07-28) request has no `ping`: its handler answers it with an error.
    if request.method == "ping"
        && shared.options.answer_ping
        && !crate::version::is_stateless_request(request.params.as_ref())
    {
        let pong = Response::result(id, Value::Object(Default::default()));
        return routed.try_send_envelope(routed.envelope(pong));
    }
    // Its own token, not a child of the connection's: `finish` cancels every request in the
    // table when the connection ends, and a child token costs a lock on the parent's tree to
    // attach and again to detach, for every request.
    let cancel = CancellationToken::new();
    let policy = handler
        .cancel_policy(&request)
        .unwrap_or(shared.options.cancel_policy);
    let added = shared.state().add_inbound(
        id.clone(),
        Inbound::new(
            cancel.clone(),
            policy == CancelPolicy::Cooperative,
            routed.reply.clone(),
        ),
    );
    let generation = match added {
        Ok(generation) => generation,
        Err(refusal) => {
            if let Some(lifecycle) = &shared.options.lifecycle {
                lifecycle.refused(match refusal {
                    Refusal::Full(_) => RefusalReason::Busy,
                    Refusal::Duplicate => RefusalReason::Malformed,
                });
            }
            let error = refused(refusal, &id);
            return routed.try_send_envelope(routed.envelope(Response::error(Some(id), error)));
        }
    };
    let ctx = RequestContext::new(
        id.clone(),
        &request.method,
        request.params.as_ref(),
        extensions,
        routed.clone(),
        cancel.clone(),
        policy,
    );
    // Told, below, when the answer does not come at once.
    let reply_slot = routed.reply.clone();
    // Made here, not in the task: a task aborted before its first poll still frees its slot.
    let slot = Slot {
        _in_flight: routed.shared.options.lifecycle.as_ref().map(|l| l.track()),
        peer: routed,
        id: id.clone(),
        generation,
    };
    let mut task = Box::pin(run_request(
        handler.clone(),
        request,
        ctx,
        (cancel, policy),
        slot,
    ));
    // Polled once here first: a handler that answers at once (and finds room for its answer)
    // costs no task and no hand-off to another thread. One that waits is spawned, and the
    // runtime polls it again at once, with its own waker, so the no-op waker of this first
    // poll is never the one that wakes it.
    if (&mut task).now_or_never().is_some() {
        return None;
    }
    let abort = tokio::spawn(task).abort_handle();
    shared.state().set_abort(&id, generation, abort);
    if let Some(reply) = &reply_slot {
        reply.defer();
    }
    None
}

/// The answer to a request that the table of running requests refused.
fn refused(refusal: Refusal, id: &RequestId) -> ErrorObject {
    match refusal {
        Refusal::Full(limit) => ErrorObject::new(
            ErrorCode::SERVER_BUSY,
            format!("too many requests in flight on this connection (limit {limit}); retry later"),
        ),
        // A string id is the peer's text: quoted as an excerpt, as in every error we answer.
        Refusal::Duplicate => ErrorObject::invalid_request(format!(
            "request id {} is already in use by a request in flight",
            excerpt(&id.to_string())
        )),
    }
}

/// An inbound request's hold on its in-flight slot, owned by its task. Dropping it frees the
/// slot: when the handler has returned and its answer is queued, or when the task is aborted
/// (its future is dropped then, even if it never ran). Never earlier: a cancelled handler that
/// is still running (cooperative, or busy between two `.await`s) keeps its slot, so cancelling
/// cannot lift the in-flight cap. The slot is named by its generation, not only by its id, so a
/// new request that reuses the id is not freed in its place.
struct Slot {
    /// The handle routed to the request, which its answer is sent through.
    peer: Peer,
    id: RequestId,
    generation: u64,
    /// The request's count in the server's lifecycle; dropped after `drop` below has run.
    _in_flight: Option<crate::lifecycle::InFlight>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.peer.shared.finish_inbound(&self.id, self.generation);
    }
}

async fn run_request<H: Handler>(
    handler: Arc<H>,
    request: Request,
    ctx: RequestContext,
    (cancel, policy): (CancellationToken, CancelPolicy),
    slot: Slot,
) {
    let method = request.method.clone();
    // A drain past its deadline cancels what still runs: such a request is still answered
    // (its own return, or the draining error), so its client learns and may retry elsewhere.
    // The handler is pinned in this block, so one the drain stopped is dropped at its end,
    // before its answer goes (its `on_cancel` guards run first).
    let (outcome, drained) = {
        let work =
            std::pin::pin!(AssertUnwindSafe(handler.answer_request(request, ctx)).catch_unwind());
        match slot.peer.shared.options.lifecycle.as_ref() {
            Some(lifecycle) => match watch_drain(work, lifecycle, &cancel, policy).await {
                Watched::Returned(outcome) => (outcome, false),
                Watched::Stopped(outcome) => (outcome, true),
                Watched::Dropped => (Ok(Err(draining_error())), true),
            },
            None => (work.await, false),
        }
    };
    if cancel.is_cancelled() && !drained {
        // Cancelled: the spec asks for no response. The slot is freed as `slot` drops.
        return;
    }
    let peer = &slot.peer;
    let envelope = match outcome {
        Ok(Ok(Answer::Tree(mut result))) => {
            if let Some(version) = peer.protocol_version() {
                compat::adapt_outgoing(version, &method, PayloadKind::Result, &mut result);
            }
            peer.envelope(Response::result(slot.id.clone(), result))
        }
        Ok(Ok(Answer::Encoded(result))) => match result.response_text(&slot.id) {
            // The message keeps only what the engine and the transports read of a response
            // (its id); the wire form carries the result.
            Ok(wire) => {
                let mut envelope = peer.envelope(Response::result(slot.id.clone(), Value::Null));
                envelope.wire = Some(wire.into());
                envelope
            }
            Err(error) => peer.envelope(Response::error(
                Some(slot.id.clone()),
                ErrorObject::internal(error),
            )),
        },
        Ok(Err(error)) => peer.envelope(Response::error(Some(slot.id.clone()), error)),
        Err(_) => {
            let method = excerpt(&method);
            tracing::error!(%method, "a request handler panicked");
            peer.envelope(Response::error(
                Some(slot.id.clone()),
                ErrorObject::internal(format!("the handler for {method} panicked")),
            ))
        }
    };
    // Queued before the slot is freed (when `slot` drops), so a drain that waits for the table
    // to empty never closes the connection ahead of this response. A cancel that lands while
    // the answer waits for room still stops it: the peer may already reuse the id.
    let queued = peer.send_envelope(envelope);
    if drained {
        // The drain fired the token itself; the connection closes once this is written.
        let _ = queued.await;
        return;
    }
    tokio::select! {
        biased;
        _ = queued => {}
        () = cancel.cancelled() => {}
    }
}

fn on_notification<H: Handler>(notification: Notification, handler: &Arc<H>, peer: &Peer) {
    match notification.method.as_str() {
        "notifications/cancelled" => {
            let id = notification
                .params
                .as_ref()
                .and_then(|p| p.get("requestId"))
                .and_then(RequestId::from_json);
            let Some(id) = id else {
                tracing::debug!("ignored a cancellation without a valid requestId");
                return;
            };
            // The request leaves the id table (the peer may reuse the id) but keeps its slot
            // until its task has stopped (see `Slot`).
            let entry = peer.shared.state().cancel_inbound(&id);
            match entry {
                Some(inbound) => {
                    inbound.cancel.cancel();
                    // No answer will come: the transport ends what it holds for the request
                    // now, even while a cooperative handler runs on to its return.
                    if let Some(reply) = &inbound.reply {
                        reply.abandon();
                    }
                    if !inbound.cooperative
                        && let Some(abort) = inbound.abort
                    {
                        abort.abort();
                    }
                }
                None => tracing::debug!(
                    id = %excerpt(&id.to_string()),
                    "ignored a cancellation of an unknown or finished request"
                ),
            }
            handler.handle_notification(notification, peer);
        }
        "notifications/progress" => {
            let params = notification
                .params
                .clone()
                .and_then(|p| serde_json::from_value::<ProgressParams>(p).ok());
            match params {
                Some(p) => {
                    let delivery = peer
                        .shared
                        .state()
                        .deliver_progress(&p.progress_token, p.progress);
                    if delivery == ProgressDelivery::Unknown {
                        tracing::debug!(
                            token = %excerpt(&p.progress_token.to_string()),
                            "progress for no active request"
                        );
                    }
                }
                None => tracing::debug!("ignored a malformed progress notification"),
            }
            handler.handle_notification(notification, peer);
        }
        _ => handler.handle_notification(notification, peer),
    }
}

fn on_response(response: Response, peer: &Peer) {
    let Some(id) = response.id else {
        if let Err(error) = response.outcome {
            tracing::warn!(
                error = %excerpt(&error.to_string()),
                "the peer could not read one of our messages"
            );
        }
        return;
    };
    let pending = peer.shared.state().take_pending(&id);
    match pending {
        Some(pending) => {
            let outcome = response.outcome.map_err(SessionError::Remote);
            let _ = pending.responder.send(outcome);
        }
        None => tracing::debug!(
            id = %excerpt(&id.to_string()),
            "ignored a response to no pending request"
        ),
    }
}
