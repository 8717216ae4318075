//! The session engine: one connection's requests, responses, progress and cancellation.
//!
//! [`Session::new`] takes a transport and a [`Handler`] and returns a [`Peer`] (a cheap handle to
//! send requests and notifications) and a [`Driver`] (the future that runs the connection, like
//! hyper's `Connection`). [`Session::spawn`] runs the driver on tokio for you.
//!
//! # Outbound requests
//! `peer.request::<M>(params)` returns a builder: set a timeout, a reset-on-progress hard
//! maximum, a progress callback or stream, then `.await` it for the typed result. Progress is
//! asked for with `_meta.progressToken` (tidewire uses the request id as the token).
//!
//! # Cancel safety
//! Dropping a request future before its response arrives cancels the request: the peer receives
//! `notifications/cancelled` with the reason "the caller dropped the request", and a response
//! that arrives later is ignored. A timeout does the same. [`CancelHandle`] cancels explicitly.
//! This holds on every transport, because it happens here, above them.
//!
//! # Inbound requests
//! Each runs in its own task with a [`RequestContext`]: progress reporting (inert without a
//! token, refusing values that do not rise), cancellation (`cancelled()` / `is_cancelled()`),
//! notifications and requests back to the peer, all routed to the request. When the peer cancels,
//! the token fires and, under [`CancelPolicy::Abort`] (the default), the task is aborted; no
//! response is sent. A per-connection cap bounds how many run at once. `ping` is answered by the
//! engine.
//!
//! A cancelled request keeps its in-flight slot until its handler has stopped (its task has
//! returned or, once aborted, been dropped), so cancelling cannot lift the cap; its id is free
//! again at once, and a new request that reuses it is tracked on its own.

mod context;
mod drained;
mod driver;
mod error;
mod handler;
mod observe;
mod options;
mod peer;
mod request;
mod run;
mod serve;
mod state;
pub(crate) mod stream;

use std::sync::Arc;

pub use context::{OnCancel, ProgressTracker, RequestContext};
pub use drained::{Watched, watch_drain};
pub use driver::Driver;
pub use error::{Cancelled, SessionError};
pub use handler::{Answer, Handler, NoHandler};
pub use observe::{ObservedRequest, RequestObserver};
pub use options::{CancelPolicy, SessionOptions};
pub use peer::Peer;
pub use request::{
    CancelHandle, InFlight, ProgressCallback, ProgressStream, RequestBuilder, RequestSettings,
};
pub use run::{Answered, RequestRun};
pub use serve::{BoxedServe, Serve, ServeRequest};
pub use stream::{RequestStream, RequestStreamReceiver, request_stream};

use crate::transport::Transport;

/// Builds connections.
#[derive(Debug)]
pub struct Session;

impl Session {
    /// Sets up a connection over `transport`, served by `handler`. Nothing happens until the
    /// returned [`Driver`] is polled.
    #[allow(clippy::new_ret_no_self)]
    pub fn new<T: Transport, H: Handler>(
        transport: T,
        handler: H,
        options: SessionOptions,
    ) -> (Peer, Driver) {
        Self::with_shared_handler(transport, Arc::new(handler), options)
    }

    /// Like [`new`](Self::new), for a handler shared between connections.
    pub fn with_shared_handler<T: Transport, H: Handler>(
        transport: T,
        handler: Arc<H>,
        options: SessionOptions,
    ) -> (Peer, Driver) {
        use crate::transport::TransportSender;
        // Split now: what the engine asks of the transport is the sender's to say.
        let (sender, receiver) = transport.split();
        let profile = sender.profile();
        let shared = Arc::new(peer::Connection::new(options, profile));
        let peer = Peer::unrouted(shared.clone());
        (peer, driver::driver(sender, receiver, handler, shared))
    }

    /// Sets up a connection and spawns its driver on the current tokio runtime.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub fn spawn<T: Transport, H: Handler>(
        transport: T,
        handler: H,
        options: SessionOptions,
    ) -> Peer {
        let (peer, driver) = Self::new(transport, handler, options);
        tokio::spawn(async move {
            if let Err(error) = driver.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
        peer
    }
}
