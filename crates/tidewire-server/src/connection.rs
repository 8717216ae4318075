//! One client connection's state: what it negotiated, its log level, its subscriptions, and the
//! list changes it is owed. The dispatch of its requests is in [`dispatch`](crate::dispatch).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{ClientCapabilities, Implementation, LoggingLevel};
use tidewire_core::session::Peer;
use tidewire_core::version::Eras;

use crate::catch_up::Owed;

/// The longest URI a client may subscribe to, in bytes (subscriptions last as long as the
/// connection, so each is bounded in size as well as in number).
pub(crate) const MAX_SUBSCRIBED_URI: usize = 8 * 1024;

/// The server side of one connection.
pub(crate) struct Connection {
    peer: OnceLock<Peer>,
    /// What `initialize` said; `None` until then.
    client: RwLock<Option<(ClientCapabilities, Implementation)>>,
    initialized: AtomicBool,
    /// 0 = not set by the client; otherwise 1 + the level's index.
    log_level: AtomicU8,
    /// The level in force until the client sets one.
    default_log_level: LoggingLevel,
    subscriptions: Mutex<HashSet<String>>,
    max_subscriptions: usize,
    /// List changes it missed while its queue was full.
    owed: Arc<Owed>,
    /// The eras served on this connection.
    eras: Eras,
    /// It carried a stateless request.
    served_stateless: AtomicBool,
    /// When it was made, for `mcp.server.session.duration` (feature `otel`).
    #[cfg(feature = "otel")]
    opened: std::time::Instant,
}

/// A session (a connection that ran `initialize`) ends: its duration, with its revision, in
/// `mcp.server.session.duration`.
#[cfg(feature = "otel")]
impl Drop for Connection {
    fn drop(&mut self) {
        let initialized = self
            .client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some();
        if !initialized {
            return;
        }
        let mut attributes = Vec::new();
        if let Some(version) = self.peer.get().and_then(Peer::protocol_version) {
            attributes.push(opentelemetry::KeyValue::new(
                tidewire_otel::semconv::MCP_PROTOCOL_VERSION,
                version.as_str(),
            ));
        }
        tidewire_otel::metrics::server_session_duration()
            .record(self.opened.elapsed().as_secs_f64(), &attributes);
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("initialized", &self.initialized.load(Ordering::Relaxed))
            .field("eras", &self.eras)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection that has said nothing yet.
    pub(crate) fn new(
        eras: Eras,
        default_log_level: LoggingLevel,
        max_subscriptions: usize,
    ) -> Self {
        Self {
            peer: OnceLock::new(),
            client: RwLock::new(None),
            initialized: AtomicBool::new(false),
            log_level: AtomicU8::new(0),
            default_log_level,
            subscriptions: Mutex::new(HashSet::new()),
            max_subscriptions,
            owed: Arc::default(),
            eras,
            served_stateless: AtomicBool::new(false),
            #[cfg(feature = "otel")]
            opened: std::time::Instant::now(),
        }
    }

    pub(crate) fn eras(&self) -> Eras {
        self.eras
    }

    pub(crate) fn owed(&self) -> &Arc<Owed> {
        &self.owed
    }

    pub(crate) fn set_peer(&self, peer: Peer) {
        let _ = self.peer.set(peer);
    }

    pub(crate) fn peer(&self) -> Option<&Peer> {
        self.peer.get()
    }

    pub(crate) fn is_live(&self) -> bool {
        self.peer.get().is_some_and(|p| !p.is_closed())
    }

    /// `initialize` ran: the client's capabilities and identity.
    pub(crate) fn set_client(&self, capabilities: ClientCapabilities, info: Implementation) {
        *self
            .client
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((capabilities, info));
    }

    /// `notifications/initialized` came.
    pub(crate) fn set_initialized(&self) {
        self.initialized.store(true, Ordering::Relaxed);
    }

    /// It carried a stateless request (from then on it hears broadcasts only through
    /// `subscriptions/listen`, unless it is also a session).
    pub(crate) fn set_served_stateless(&self) {
        self.served_stateless.store(true, Ordering::Relaxed);
    }

    pub(crate) fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|c| c.0.clone())
    }

    pub(crate) fn client_info(&self) -> Option<Implementation> {
        self.client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|c| c.1.clone())
    }

    /// `logging/setLevel`.
    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        let index = LoggingLevel::ALL
            .iter()
            .position(|l| *l == level)
            .unwrap_or(0);
        self.log_level
            .store(u8::try_from(index + 1).unwrap_or(1), Ordering::Relaxed);
    }

    pub(crate) fn should_log(&self, level: LoggingLevel) -> bool {
        let threshold = match self.log_level.load(Ordering::Relaxed) {
            0 => self.default_log_level,
            n => LoggingLevel::ALL
                .get(usize::from(n) - 1)
                .copied()
                .unwrap_or(LoggingLevel::Debug),
        };
        level >= threshold
    }

    /// Whether broadcasts (list changes, resource updates) go to this connection: a session
    /// (`initialize` ran), or a connection that has said nothing yet. One that carried only
    /// stateless requests hears them through `subscriptions/listen`, never unasked.
    pub(crate) fn hears_broadcasts(&self) -> bool {
        let session = self
            .client
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some();
        session || !self.served_stateless.load(Ordering::Relaxed)
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(uri)
    }

    /// `resources/subscribe`.
    ///
    /// # Errors
    /// `-32602` for a URI over [`MAX_SUBSCRIBED_URI`] or one subscription too many.
    pub(crate) fn subscribe(&self, uri: String) -> Result<(), ErrorObject> {
        // Kept for the connection's life: each one is bounded in size, not only in number.
        if uri.len() > MAX_SUBSCRIBED_URI {
            return Err(ErrorObject::invalid_params(format!(
                "the URI to subscribe to is {} bytes; the limit is {MAX_SUBSCRIBED_URI}",
                uri.len()
            )));
        }
        let mut subs = self
            .subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if subs.len() >= self.max_subscriptions && !subs.contains(&uri) {
            return Err(ErrorObject::invalid_params(format!(
                "too many subscriptions on this connection (limit {})",
                self.max_subscriptions
            )));
        }
        subs.insert(uri);
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub(crate) fn unsubscribe(&self, uri: &str) {
        self.subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uri);
    }
}
