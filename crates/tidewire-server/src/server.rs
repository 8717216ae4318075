//! The server handle: one per server, cloned per connection. It serves connections, changes
//! what is offered at run time, and announces changes to every client.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use tidewire_core::lifecycle::Lifecycle;
use tidewire_core::schema::{CallToolResult, Tool};
use tidewire_core::session::{Driver, Peer, Serve, ServeRequest, Session};
use tidewire_core::transport::{Transport, TransportSender};
use tidewire_core::version::Eras;

use crate::bus::BusEvent;
use crate::context::{Context, ServerInner};
use crate::dispatch::ConnectionHandler;
use crate::error::ToolError;
use crate::registry::{ToolEntry, boxed_tool};
use crate::served::RequestServer;

/// An MCP server: tools, resources, prompts and completion, served over any transport.
///
/// Cheap to clone (an `Arc` inside); clones are the same server. One server serves any number of
/// connections; each has its own negotiated revision, log level and subscriptions.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use tidewire_core::schema::{CallToolResult, Implementation};
/// use tidewire_server::Server;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Echo {
///     /// The text to send back.
///     text: String,
/// }
///
/// let server = Server::builder(Implementation::new("demo", "1.0.0"))
///     .tool("echo", "Sends the text back", |args: Echo, _ctx| async move {
///         Ok(CallToolResult::text(args.text))
///     })
///     .build();
/// assert_eq!(server.tools().len(), 1);
/// ```
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<ServerInner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.inner.info.name)
            .finish_non_exhaustive()
    }
}

/// A server serves every connection a transport's server accepts: give it (cloned) to
/// `StreamableHttp::new`, `LegacySse::new` or `WebSocket::new`. A transport that carries
/// sessions only (HTTP+SSE) is served the session era whatever [`ServerBuilder::eras`](crate::ServerBuilder::eras) says.
impl<T: Transport> Serve<T> for Server {
    fn serve_connection(&self, transport: T) -> Driver {
        let (sender, receiver) = transport.split();
        let eras = if sender.profile().carries_stateless {
            self.inner.eras
        } else {
            Eras::Legacy
        };
        self.serve_eras((sender, receiver), eras).1
    }

    /// Stateless requests are served without a session when this server serves the
    /// 2026-07-28 revision (see [`ServeRequest`]).
    fn request_server(&self) -> Option<Arc<dyn ServeRequest>> {
        self.inner
            .eras
            .modern()
            .then(|| Arc::new(RequestServer::new(self.inner.clone())) as Arc<dyn ServeRequest>)
    }

    /// The transport refuses new sessions and stateless requests while this server drains
    /// ([`drain`](Server::drain)).
    fn lifecycle(&self) -> Option<Lifecycle> {
        Some(self.inner.lifecycle.clone())
    }

    /// The eras set with [`ServerBuilder::eras`](crate::ServerBuilder::eras): the transport
    /// follows them (an HTTP endpoint's own setting is not needed).
    fn eras(&self) -> Option<tidewire_core::version::Eras> {
        Some(self.inner.eras)
    }
}

/// How long [`Server::drain`] waits for its connections to write what is queued and close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How long a cooperative handler cancelled by [`Server::drain`] at its deadline has to return
/// on its own before its connection closes and it is dropped.
pub const DRAIN_CANCEL_GRACE: Duration = Duration::from_secs(2);

/// What a [`Server::drain`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Requests still in flight at the deadline, which the drain then cancelled: one under
    /// [`CancelPolicy::Abort`](tidewire_core::session::CancelPolicy::Abort) was dropped and
    /// answered with the draining error (`-32000`, retry elsewhere); a cooperative one was told
    /// and had [`DRAIN_CANCEL_GRACE`] to return on its own, its return sent as its answer.
    /// Zero when every request finished in time.
    pub cancelled: usize,
    /// Of those, the requests still running when the grace ended (cooperative handlers that
    /// did not return in time): dropped as their connections closed, unanswered.
    pub unfinished: usize,
    /// How long the drain took.
    pub took: Duration,
}

impl Server {
    /// Sets up one connection over `transport`. Poll (or spawn) the [`Driver`]; the [`Peer`]
    /// reaches the client.
    pub fn serve<T: Transport>(&self, transport: T) -> (Peer, Driver) {
        self.serve_eras(transport, self.inner.eras)
    }

    /// As [`serve`](Self::serve), serving only `eras` on this connection (the deprecated
    /// HTTP+SSE transport, for one, carries sessions only: `Eras::Legacy`).
    pub fn serve_eras<T: Transport>(&self, transport: T, eras: Eras) -> (Peer, Driver) {
        let connection = Arc::new(self.inner.connection(eras));
        // Every request counts in the server's lifecycle until its answer is queued.
        let options = self
            .inner
            .session_options
            .clone()
            .track_in(self.inner.lifecycle.clone());
        // Its questions to the client (sampling, elicitation, roots) carry the trace along.
        #[cfg(feature = "otel")]
        let options = options.observe_requests(Arc::new(tidewire_otel::TracingObserver));
        let (peer, driver) = Session::new(
            transport,
            ConnectionHandler::new(self.inner.clone(), connection.clone()),
            options,
        );
        connection.set_peer(peer.clone());
        self.inner.register(&connection);
        (peer, driver)
    }

    /// Serves one connection until it ends.
    ///
    /// # Errors
    /// When the transport fails (a clean close by the client is `Ok`).
    pub async fn run<T: Transport>(
        &self,
        transport: T,
    ) -> Result<(), tidewire_core::transport::TransportError> {
        let (_peer, driver) = self.serve(transport);
        driver.await
    }

    /// The tools offered now, in order.
    pub fn tools(&self) -> Vec<Tool> {
        self.inner
            .tools
            .snapshot()
            .iter()
            .map(|e| e.tool.clone())
            .collect()
    }

    /// Adds (or replaces) a tool at run time and tells connected clients the list changed.
    pub async fn add_tool<F, Fut>(&self, tool: Tool, handler: F)
    where
        F: Fn(Value, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        self.inner.tools.insert(ToolEntry {
            tool,
            handler: boxed_tool(handler),
        });
        self.notify_tools_changed().await;
    }

    /// Removes a tool at run time; tells clients when one was removed.
    pub async fn remove_tool(&self, name: &str) -> bool {
        let removed = self.inner.tools.remove(name);
        if removed {
            self.notify_tools_changed().await;
        }
        removed
    }

    /// Announces that the tool list changed: `notifications/tools/list_changed` to every
    /// session-era client, and to every `subscriptions/listen` stream that asked for it.
    ///
    /// It goes through the server's [notification bus](crate::bus) (so, with a shared bus, to
    /// the clients of every process). Like every broadcast, it never waits on a client. A client
    /// whose outbound queue is full (it stopped reading, or reads slower than the server writes)
    /// is owed the change: it gets one `list_changed` of each kind it missed once its queue has
    /// room, however many it missed. That is counted
    /// ([`dropped_notifications`](Self::dropped_notifications)) and logged.
    pub async fn notify_tools_changed(&self) {
        self.inner.bus.publish(BusEvent::ToolsListChanged);
    }

    /// Announces that the resource list changed, to sessions and listen streams, without
    /// waiting on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_resources_changed(&self) {
        self.inner.bus.publish(BusEvent::ResourcesListChanged);
    }

    /// Announces that the prompt list changed, to sessions and listen streams, without waiting
    /// on any (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_prompts_changed(&self) {
        self.inner.bus.publish(BusEvent::PromptsListChanged);
    }

    /// Announces that the resource at `uri` changed: `notifications/resources/updated` to every
    /// session subscribed to it (`resources/subscribe`) and every listen stream that named it,
    /// without waiting on any (a client that does not keep up loses it; see
    /// [`notify_tools_changed`](Self::notify_tools_changed)).
    pub async fn notify_resource_updated(&self, uri: &str) {
        self.inner.bus.publish(BusEvent::ResourceUpdated {
            uri: uri.to_owned(),
        });
    }

    /// Ends every open `subscriptions/listen` stream with its `complete` result (for example,
    /// before shutting down). Streams opened later are not affected.
    pub fn end_subscriptions(&self) {
        self.inner.listen_epoch.send_modify(|epoch| *epoch += 1);
    }

    /// The tasks running in this process by status (`working`, `input_required`), and how
    /// many it ended by status since it was built: what an operator graphs.
    pub fn task_counts(&self) -> crate::tasks::TaskCounts {
        self.inner.tasks.counts()
    }

    /// Open `subscriptions/listen` streams.
    pub fn listener_count(&self) -> usize {
        self.inner.listeners.load(Ordering::Acquire)
    }

    /// How many broadcast notifications found a client's outbound queue full since the server
    /// was built: list changes, which are then owed and sent later (one of each kind), and
    /// resource updates, which are lost (see [`notify_tools_changed`](Self::notify_tools_changed)).
    pub fn dropped_notifications(&self) -> u64 {
        self.inner.dropped_notifications.load(Ordering::Relaxed)
    }

    /// The number of live connections.
    pub fn connection_count(&self) -> usize {
        self.inner.live_peers(|_| true).len()
    }

    /// Whether this server drains and how many requests it serves now. Its transports got it
    /// when they were built ([`Serve::lifecycle`]); a readiness check reads it
    /// (`tidewire_http::server::health`).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.inner.lifecycle
    }

    /// Drains the server, for a shutdown that loses no work: from now on its transports refuse
    /// new sessions and new stateless requests (HTTP 503 with `Retry-After`, a JSON-RPC error
    /// on a connection already open), every `subscriptions/listen` stream ends with its
    /// `complete` result, and requests in flight — in the sessions already open too — run to
    /// their end, for at most `deadline`. A request counts until its answer is queued for its
    /// transport. What still runs at the deadline is cancelled, cooperative handlers first:
    /// every handler is told (its context's cancellation fires); one under
    /// [`CancelPolicy::Abort`](tidewire_core::session::CancelPolicy::Abort) is dropped and
    /// answered with the draining error (`-32000`, so its client retries on another server),
    /// a cooperative one has [`DRAIN_CANCEL_GRACE`] to return and its return is its answer
    /// ([`Drained::cancelled`]). Then every connection closes, its queued messages written
    /// first (the engine ends its session on the transport: an HTTP session's streams end
    /// cleanly), and what still runs is dropped ([`Drained::unfinished`]).
    ///
    /// It returns once the connections have closed (a few seconds at most after the deadline
    /// and the grace);
    /// then stop accepting connections. Draining cannot be undone. Tasks running in the background
    /// ([`Context::continue_as_task`](crate::Context::continue_as_task), `task_support`) are
    /// not waited for: their state stays in the task store.
    pub async fn drain(&self, deadline: Duration) -> Drained {
        let started = Instant::now();
        let lifecycle = &self.inner.lifecycle;
        lifecycle.start_draining();
        self.end_subscriptions();
        let finished = tokio::time::timeout(deadline, lifecycle.idle())
            .await
            .is_ok();
        let cancelled = if finished { 0 } else { lifecycle.in_flight() };
        let mut unfinished = 0;
        if cancelled > 0 {
            tracing::warn!(
                cancelled,
                ?deadline,
                "the drain's deadline passed: cancelling the requests still in flight"
            );
            // Cooperative first: every handler still running is told; those that return in
            // the grace are answered with what they return, the others answered with the
            // draining error at once.
            lifecycle.cancel_in_flight();
            if tokio::time::timeout(DRAIN_CANCEL_GRACE, lifecycle.idle())
                .await
                .is_err()
            {
                unfinished = lifecycle.in_flight();
                tracing::warn!(
                    unfinished,
                    "requests still ran after the drain's cancel grace: dropping them"
                );
            }
        }
        // Every connection closes: what is queued for it (the last answers) is written first.
        let peers = self.inner.live_peers(|_| true);
        for peer in &peers {
            peer.close();
        }
        let closed = futures::future::join_all(peers.iter().map(Peer::closed));
        if tokio::time::timeout(CLOSE_WAIT, closed).await.is_err() {
            tracing::warn!("a connection did not close within {CLOSE_WAIT:?} of the drain");
        }
        Drained {
            cancelled,
            unfinished,
            took: started.elapsed(),
        }
    }
}

impl Context {
    /// The server this request reached (to announce list changes or resource updates, or to
    /// change what it offers).
    pub fn server(&self) -> Server {
        Server {
            inner: self.shared().clone(),
        }
    }
}
