//! What the session engine tells a transport besides the messages: when a request it sent is
//! over, and when a session opens. A transport that keeps per-request or per-session state
//! (Streamable HTTP, HTTP+SSE) learns it here instead of reading the messages it carries.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorObject, RequestId};

use super::TransportError;

/// The engine's side of one request it sent, attached to the request's [`Envelope`]
/// (`envelope.exchange`) for a transport that asks for it
/// ([`TransportProfile::tracks_requests`]).
///
/// [`over`](Self::over) resolves once the engine no longer waits for the response: it arrived,
/// the request was cancelled or timed out, its caller gave up, or the connection closed. The
/// transport then stops whatever it runs for the request (on Streamable HTTP, reading the
/// request's stream). [`fail`](Self::fail) and [`fail_transport`](Self::fail_transport) are how
/// a transport ends a request it cannot complete (a refused POST, a stream that broke for
/// good): the caller gets the error, and no response message is made up.
///
/// [`Envelope`]: super::Envelope
/// [`TransportProfile::tracks_requests`]: super::TransportProfile::tracks_requests
#[derive(Clone)]
pub struct Exchange {
    id: RequestId,
    over: CancellationToken,
    owner: Weak<dyn Settle>,
}

/// How a transport ended a request it could not complete.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Failure {
    /// As though the peer had answered with this error (the caller sees
    /// `SessionError::Remote`).
    Answer(ErrorObject),
    /// The transport failed the request (the caller sees `SessionError::Transport`): an HTTP
    /// status that is not success ([`TransportError::http`]), for one.
    Transport(TransportError),
}

/// The engine's table of pending requests, as an exchange sees it.
pub(crate) trait Settle: Send + Sync {
    /// Fails pending request `id` with `failure`, if it is still pending.
    fn fail_pending(&self, id: &RequestId, failure: Failure);
}

impl Exchange {
    pub(crate) fn new(id: RequestId, over: CancellationToken, owner: Weak<dyn Settle>) -> Self {
        Self { id, over, owner }
    }

    /// The id of the request.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// True once the engine no longer waits for the response.
    pub fn is_over(&self) -> bool {
        self.over.is_cancelled()
    }

    /// Resolves once the engine no longer waits for the response. Owns what it needs, so a
    /// spawned task can hold it.
    pub fn over(&self) -> impl Future<Output = ()> + Send + 'static {
        self.over.clone().cancelled_owned()
    }

    /// Ends the request with `error`, as though the peer had answered so. Does nothing once the
    /// request is over.
    pub fn fail(&self, error: ErrorObject) {
        self.end_with(Failure::Answer(error));
    }

    /// Ends the request with a transport error (an HTTP status that is not success, say): the
    /// caller sees it as the transport's failure, not as the peer's answer. Does nothing once
    /// the request is over.
    pub fn fail_transport(&self, error: TransportError) {
        self.end_with(Failure::Transport(error));
    }

    fn end_with(&self, failure: Failure) {
        if self.is_over() {
            return;
        }
        if let Some(owner) = self.owner.upgrade() {
            owner.fail_pending(&self.id, failure);
        }
    }
}

/// The far end of an exchange made without a session engine ([`Exchange::standalone`]).
#[derive(Debug)]
pub struct Standalone {
    owner: Arc<StandaloneOwner>,
    failure: oneshot::Receiver<Failure>,
}

#[derive(Debug)]
struct StandaloneOwner {
    over: CancellationToken,
    failure: Mutex<Option<oneshot::Sender<Failure>>>,
}

impl Settle for StandaloneOwner {
    fn fail_pending(&self, _id: &RequestId, failure: Failure) {
        let taken = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(tx) = taken {
            let _ = tx.send(failure);
        }
        self.over.cancel();
    }
}

impl Standalone {
    /// Ends the exchange, as the engine does when it stops waiting.
    pub fn end(&self) {
        self.owner.over.cancel();
    }

    /// How the transport failed the request; `None` when it ended otherwise.
    pub async fn failure(self) -> Option<Failure> {
        let Self { owner, failure } = self;
        tokio::select! {
            biased;
            error = failure => error.ok(),
            () = owner.over.cancelled() => None,
        }
    }
}

impl Exchange {
    /// An exchange with no session engine behind it, for driving a transport directly (tests,
    /// tools): the [`Standalone`] ends it and receives its failure.
    pub fn standalone(id: RequestId) -> (Self, Standalone) {
        let (tx, rx) = oneshot::channel();
        let owner = Arc::new(StandaloneOwner {
            over: CancellationToken::new(),
            failure: Mutex::new(Some(tx)),
        });
        let weak: Weak<dyn Settle> = Arc::downgrade(&owner) as Weak<dyn Settle>;
        let exchange = Self::new(id, owner.over.clone(), weak);
        (exchange, Standalone { owner, failure: rx })
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("id", &self.id)
            .field("over", &self.is_over())
            .finish()
    }
}

/// A step of the session handshake, told to the sender around the messages that make it
/// ([`TransportSender::session_event`](super::TransportSender::session_event)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// An `initialize` request is about to be sent: whatever session the transport had is
    /// gone, and the request opens a new one.
    Opening,
    /// The `initialize` answer was read and `notifications/initialized` is about to be sent:
    /// the messages from now on belong to a session of this revision.
    Negotiated {
        /// The negotiated protocol revision.
        version: ProtocolVersion,
    },
    /// `notifications/initialized` was sent: the session is open (a transport may now open
    /// what it holds outside requests, such as the Streamable HTTP GET stream).
    Opened,
}
