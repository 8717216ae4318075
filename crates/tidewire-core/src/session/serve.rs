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
