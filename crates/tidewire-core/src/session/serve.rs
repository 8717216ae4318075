//! [`Serve`]: what starts the engine of each connection a server transport accepts, and
//! [`ServeRequest`]: what serves a request that needs no session.

use std::sync::Arc;

use super::{Driver, RequestRun, RequestStream};
use crate::jsonrpc::Request;
use crate::lifecycle::Lifecycle;
use crate::transport::Transport;
use crate::version::Eras;

/// Starts the engine of each new connection (or HTTP session) a server transport accepts: give
/// the HTTP, SSE and WebSocket servers a `tidewire_server::Server` (cloned per connection), or
/// any `Fn(transport) -> Driver` for an engine of your own. The transport spawns the driver.
pub trait Serve<T: Transport>: Send + Sync + 'static {
    /// Sets up the connection over `transport` and returns the future that runs it.
    fn serve_connection(&self, transport: T) -> Driver;

    /// What serves requests that need no session (the 2026-07-28 wire over HTTP), straight
    /// from the transport: `None` (the default, and what a closure gives) makes the transport
    /// run each such request in a one-shot session through
    /// [`serve_connection`](Self::serve_connection) instead. A `tidewire_server::Server` has
    /// one. Asked once, when the transport is built.
    fn request_server(&self) -> Option<Arc<dyn ServeRequest>> {
        None
    }

    /// The server's [`Lifecycle`]: while it drains, the transport refuses new sessions and
    /// new stateless requests. `None` (the default, and what a closure gives): the transport
    /// keeps one of its own, which never drains. A `tidewire_server::Server` has one. Asked
    /// once, when the transport is built.
    fn lifecycle(&self) -> Option<Lifecycle> {
        None
    }

    /// Which eras the server serves, for a transport that decides something by era before the
    /// server sees a message (the Streamable HTTP endpoint answers GET and DELETE 405 when the
    /// session era is off). `None` (the default, and what a closure gives): the transport's
    /// own setting. A `tidewire_server::Server` says its own (`ServerBuilder::eras`), so the
    /// eras are configured in one place. Asked once, when the transport is built.
    fn eras(&self) -> Option<Eras> {
        None
    }
}

/// Serves one request that needs no session, as a stateless (2026-07-28) request over HTTP
/// does: no engine session, driver task or queue is built for it.
///
/// The transport decodes and checks the request, then polls the returned [`RequestRun`] where
/// it answers; `stream` is the request's own response stream (what the handler sends before
/// the response). Dropping the run cancels the request.
pub trait ServeRequest: Send + Sync + 'static {
    /// Starts serving `request`, with what the transport knows of it in `extensions` (headers,
    /// principal, [`RequestLimits`](crate::transport::RequestLimits)).
    fn serve_request(
        &self,
        request: Request,
        extensions: crate::Extensions,
        stream: RequestStream,
    ) -> RequestRun;
}

impl<T, F> Serve<T> for F
where
    T: Transport,
    F: Fn(T) -> Driver + Send + Sync + 'static,
{
    fn serve_connection(&self, transport: T) -> Driver {
        self(transport)
    }
}

/// A [`Serve`] in a box, as a server transport keeps it. Its `Debug` shows nothing of it (a
/// closure has nothing to show), so the state holding it can derive `Debug`.
pub struct BoxedServe<T>(Box<dyn Serve<T>>);

impl<T: Transport> BoxedServe<T> {
    /// Boxes `serve`.
    pub fn new(serve: impl Serve<T>) -> Self {
        Self(Box::new(serve))
    }

    /// Sets up the connection over `transport` (see [`Serve::serve_connection`]).
    pub fn serve_connection(&self, transport: T) -> Driver {
        self.0.serve_connection(transport)
    }

    /// What serves requests that need no session, if anything (see
    /// [`Serve::request_server`]).
    pub fn request_server(&self) -> Option<Arc<dyn ServeRequest>> {
        self.0.request_server()
    }

    /// The server's lifecycle, or a new one that never drains (see [`Serve::lifecycle`]).
    pub fn lifecycle(&self) -> Lifecycle {
        self.0.lifecycle().unwrap_or_default()
    }

    /// The eras the server says it serves, if it says (see [`Serve::eras`]).
    pub fn eras(&self) -> Option<Eras> {
        self.0.eras()
    }
}

impl<T> std::fmt::Debug for BoxedServe<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedServe")
    }
}
