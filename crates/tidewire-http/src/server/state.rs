//! What the endpoint's handlers share: the settings, the session table, the event store, the
//! budgets, and how a session's engine is started.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use tidewire_core::http::sessions::SessionTable;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, RequestId};
use tidewire_core::lifecycle::Lifecycle;
use tidewire_core::session::{BoxedServe, ServeRequest};
use tidewire_core::transport::Codec;

use super::body::BodyBudget;
use super::config::HttpConfig;
use super::event_store::{EventStore, MemoryEventStore};
use super::session::{HttpReceiver, HttpSender, HttpSession, HttpTransport};

/// The endpoint's shared state.
pub(crate) struct State {
    pub(crate) config: HttpConfig,
    pub(crate) codec: Codec,
    pub(crate) make_driver: BoxedServe<HttpTransport>,
    /// What serves stateless requests without a session, when `make_driver` has it; without
    /// it each runs in a one-shot session.
    pub(crate) requests: Option<Arc<dyn ServeRequest>>,
    pub(crate) store: Arc<dyn EventStore>,
    /// The events of stateless requests' one-shot sessions: never resumed (their events have
    /// no ids), so always in this process's memory, whatever store sessions use.
    pub(crate) one_shot_store: Arc<dyn EventStore>,
    pub(crate) sessions: Arc<SessionTable<HttpSession>>,
    /// Numbers the one-shot sessions (their key in the event store).
    pub(crate) stateless_seq: AtomicU64,
    /// Stateless (2026-07-28) requests running now.
    pub(crate) stateless_running: AtomicUsize,
    /// Bytes of POST bodies being read at once, over the endpoint.
    pub(crate) body_budget: BodyBudget,
    /// Refused bodies being read and thrown away now.
    pub(crate) drains: Arc<AtomicUsize>,
    /// The server's: while it drains, new sessions and stateless requests get 503.
    pub(crate) lifecycle: Lifecycle,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The event store is the user's, and may have nothing to show.
        f.debug_struct("State")
            .field("config", &self.config)
            .field("sessions", &self.sessions)
            .field("body_bytes_reading", &self.body_budget.in_use())
            .field("stateless_running", &self.stateless_running)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The state of an endpoint with `config`, whose sessions `make_driver` serves.
    pub(crate) fn new(mut config: HttpConfig, make_driver: BoxedServe<HttpTransport>) -> Self {
        // One place for the eras: the server's, when it says (a `tidewire_server::Server`).
        if let Some(eras) = make_driver.eras() {
            config.eras = eras;
        }
        let memory = || -> Arc<dyn EventStore> {
            Arc::new(MemoryEventStore::with_limits(
                config
                    .event_store_limits
                    .events_per_stream(config.stream_capacity),
            ))
        };
        let (store, one_shot_store) = match &config.event_store {
            Some(store) => (store.clone(), memory()),
            None => {
                let store = memory();
                (store.clone(), store)
            }
        };
        let lifecycle = make_driver.lifecycle();
        Self {
            codec: Codec::new(config.limits.max_message_size),
            requests: make_driver.request_server(),
            make_driver,
            store,
            one_shot_store,
            sessions: Arc::new(
                SessionTable::new(config.limits.max_sessions, config.limits.idle_timeout)
                    .with_lifecycle(lifecycle.clone()),
            ),
            lifecycle,
            stateless_seq: AtomicU64::new(0),
            stateless_running: AtomicUsize::new(0),
            body_budget: BodyBudget::new(config.body_bytes_total),
            drains: Arc::default(),
            config,
        }
    }

    /// Starts a session's engine on a fresh transport; the session is removed when it stops.
    /// A `one_shot` session (a stateless request's) keeps its events in memory.
    pub(crate) fn start_session(
        self: &Arc<Self>,
        id: Arc<str>,
        one_shot: bool,
    ) -> Arc<HttpSession> {
        let store = if one_shot {
            &self.one_shot_store
        } else {
            &self.store
        };
        let session = Arc::new(HttpSession::new(
            id,
            self.config.inbound_queue,
            store.clone(),
            self.config.stream_capacity,
            self.config.stream_patience,
            self.config.max_streams_per_session,
            self.config.body_bytes_per_session,
        ));
        let transport = (
            HttpSender {
                session: session.clone(),
                codec: self.codec,
            },
            HttpReceiver {
                session: session.clone(),
            },
        );
        let driver = self.make_driver.serve_connection(transport);
        let weak: Weak<State> = Arc::downgrade(self);
        let ended = session.clone();
        tokio::spawn(async move {
            // A session the server ended reaches its engine as a closed transport: no error.
            if let Err(error) = driver.await
                && !error.is_closed()
            {
                tracing::debug!(%error, "an HTTP session's engine stopped with an error");
            }
            ended.close();
            if let Some(state) = weak.upgrade() {
                state.sessions.remove(&ended.id);
            }
        });
        session
    }
}

/// A place among the stateless requests running at once, bounded by
/// [`HttpConfig::max_stateless_requests`](HttpConfig::max_stateless_requests).
pub(crate) struct StatelessSlot(Arc<State>);

impl StatelessSlot {
    pub(crate) fn take(state: &Arc<State>) -> Option<Self> {
        let before = state.stateless_running.fetch_add(1, Ordering::AcqRel);
        let slot = Self(state.clone());
        (before < state.config.max_stateless_requests).then_some(slot)
    }
}

/// The answer when every [`StatelessSlot`] is taken: 503, `-32001`, `Retry-After: 1`.
pub(crate) fn server_busy(state: &State, id: RequestId) -> axum::response::Response {
    let mut response = super::checks::error_for(
        http::StatusCode::SERVICE_UNAVAILABLE,
        Some(id),
        ErrorObject::new(
            ErrorCode::SERVER_BUSY,
            format!(
                "Service Unavailable: the server runs its most stateless requests at once ({}); \
                 retry later",
                state.config.max_stateless_requests
            ),
        ),
    );
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    response
}

impl Drop for StatelessSlot {
    fn drop(&mut self) {
        self.0.stateless_running.fetch_sub(1, Ordering::AcqRel);
    }
}
