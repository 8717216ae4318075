//! [`Serve`]: what starts the engine of each connection a server transport accepts.

use super::Driver;
use crate::transport::Transport;

/// Starts the engine of each new connection (or HTTP session) a server transport accepts: give
/// the HTTP, SSE and WebSocket servers a `tidewire_server::Server` (cloned per connection), or
/// any `Fn(transport) -> Driver` for an engine of your own. The transport spawns the driver.
pub trait Serve<T: Transport>: Send + Sync + 'static {
    /// Sets up the connection over `transport` and returns the future that runs it.
    fn serve_connection(&self, transport: T) -> Driver;
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
}

impl<T> std::fmt::Debug for BoxedServe<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedServe")
    }
}
