//! [`ClientBuilder`]: client identity, capabilities, handlers, and the handshake.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tidewire_core::ProtocolVersion;
use tidewire_core::schema::{
    ClientCapabilities, Discover, DiscoverResult, EmptyParams, Implementation, Initialize,
    InitializeParams, InitializeResult, InitializedNotification, JsonObject, Root, RootsCapability,
    SamplingCapability, ServerNotification, meta_keys,
};
use tidewire_core::session::{Driver, Peer, Session, SessionError, SessionOptions};
use tidewire_core::transport::Transport;
use tokio::sync::broadcast;

use crate::client::{Client, Inner};
use crate::dispatch::{Answerers, Dispatcher};
use crate::era::{self, Era};
use crate::error::ClientError;
use crate::handlers::{
    DynElicitation, DynRoots, DynSampling, ElicitationHandler, ElicitationModes, RootsHandler,
    SamplingHandler, StaticRoots,
};
use crate::notifications::NotificationCallback;

/// Notifications buffered per [`NotificationStream`](crate::NotificationStream) by default.
pub const DEFAULT_NOTIFICATION_BUFFER: usize = 256;

/// Pages a `list_all_*` call follows by default before giving up.
pub const DEFAULT_MAX_LIST_PAGES: usize = 1024;

/// Rounds of questions (`input_required`) one stateless call may take by default.
pub const DEFAULT_MAX_INPUT_ROUNDS: usize = 16;

/// How long [`Era::Auto`] waits for the `server/discover` probe when no handshake timeout is
/// set: a server that ignores it is taken for a session-era one.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Configures a client and connects it.
///
/// Setters never fail; problems surface when connecting. The capabilities the client declares
/// follow from the handlers set: `sampling` with a sampling handler, `elicitation` with an
/// elicitation handler (in the modes chosen), `roots` (with `listChanged`) with a roots handler.
///
/// ```no_run
/// # async fn demo(transport: tidewire_core::transport::memory::MemoryTransport) -> Result<(), tidewire_client::ClientError> {
/// use tidewire_client::ClientBuilder;
/// use tidewire_core::schema::{Implementation, Root};
///
/// let client = ClientBuilder::new(Implementation::new("my-agent", "0.3.0"))
///     .roots([Root::new("file:///home/me/project")])
///     .on_notification(|n| tracing::info!(method = n.method(), "server notification"))
///     .connect(transport)
///     .await?;
/// println!("connected to {} ({})", client.server_info().name, client.protocol_version());
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until it connects"]
pub struct ClientBuilder {
    info: Implementation,
    version: ProtocolVersion,
    options: SessionOptions,
    handshake_timeout: Option<Duration>,
    sampling: Option<Arc<dyn DynSampling>>,
    sampling_capability: SamplingCapability,
    elicitation: Option<Arc<dyn DynElicitation>>,
    elicitation_modes: ElicitationModes,
    roots: Option<Arc<dyn DynRoots>>,
    experimental: Option<JsonObject>,
    callback: Option<NotificationCallback>,
    notification_buffer: usize,
    max_list_pages: usize,
    era: Era,
    max_input_rounds: usize,
    reinitialize: bool,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("info", &self.info)
            .field("version", &self.version)
            .field("capabilities", &self.capabilities())
            .field("notification_buffer", &self.notification_buffer)
            .field("max_list_pages", &self.max_list_pages)
            .field("era", &self.era)
            .field("reinitialize", &self.reinitialize)
            .finish_non_exhaustive()
    }
}

// Here rather than in `client.rs`, which then needs nothing of the builder (the builder makes
// clients; a client does not make builders).
impl Client {
    /// A builder; the same as [`ClientBuilder::new`].
    pub fn builder(info: Implementation) -> ClientBuilder {
        ClientBuilder::new(info)
    }
}

impl ClientBuilder {
    /// A client that introduces itself as `info`, offers the newest handshake revision
    /// ([`ProtocolVersion::LATEST_HANDSHAKE`]) and declares no capabilities.
    pub fn new(info: Implementation) -> Self {
        Self {
            info,
            version: ProtocolVersion::LATEST_HANDSHAKE,
            options: SessionOptions::default(),
            handshake_timeout: None,
            sampling: None,
            sampling_capability: SamplingCapability::default(),
            elicitation: None,
            elicitation_modes: ElicitationModes::FORM,
            roots: None,
            experimental: None,
            callback: None,
            notification_buffer: DEFAULT_NOTIFICATION_BUFFER,
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            era: Era::default(),
            max_input_rounds: DEFAULT_MAX_INPUT_ROUNDS,
            reinitialize: true,
        }
    }

    /// Which era to speak: [`Era::Auto`] (the default: probe with `server/discover`, fall back
    /// to `initialize`), [`Era::Modern`] (the stateless revision 2026-07-28 only) or
    /// [`Era::Legacy`] (`initialize`). Over a transport built around sessions (the session-era
    /// Streamable HTTP and HTTP+SSE clients) `Auto` is the session era; on Streamable HTTP,
    /// `StatelessHttpConnector` carries the stateless revision.
    pub fn era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// How many rounds of questions (`input_required`) one stateless call may take before it
    /// fails (default [`DEFAULT_MAX_INPUT_ROUNDS`]).
    pub fn max_input_rounds(mut self, rounds: usize) -> Self {
        self.max_input_rounds = rounds.max(1);
        self
    }

    /// The revision to offer in `initialize` (default [`ProtocolVersion::LATEST_HANDSHAKE`]).
    ///
    /// The client accepts whichever handshake revision the server answers with. The stateless
    /// revision 2026-07-28 has no handshake; offering it is read as offering
    /// [`ProtocolVersion::LATEST_HANDSHAKE`].
    pub fn protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.version = version;
        self
    }

    /// Whether the client starts a new session when the server ends one under a live connection
    /// (Streamable HTTP: a 404 to a request carrying the session id). On by default: the
    /// client runs a real `initialize` and keeps what it says
    /// ([`Client::reinitializations`](crate::Client::reinitializations)); the calls that were in
    /// flight fail, and later ones go to the new session. Off, the connection is closed instead.
    pub fn reinitialize(mut self, enabled: bool) -> Self {
        self.reinitialize = enabled;
        self
    }

    /// Settings of the connection: default request timeout, limits, buffers.
    pub fn session_options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// How long to wait for the `initialize` result (default: the session's default timeout).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = Some(timeout);
        self
    }

    /// Serves `sampling/createMessage` and declares the `sampling` capability.
    pub fn sampling_handler(mut self, handler: impl SamplingHandler) -> Self {
        self.sampling = Some(Arc::new(handler));
        self
    }

    /// Declares `sampling.tools` (2025-11-25): the sampling handler accepts `tools` and
    /// `toolChoice`. Without it such requests are refused with `-32602`.
    pub fn sampling_tools(mut self, enabled: bool) -> Self {
        self.sampling_capability.tools = enabled.then(JsonObject::new);
        self
    }

    /// Declares `sampling.context` (2025-11-25): the sampling handler honours `includeContext`
    /// values other than `none`. Without it such requests are refused with `-32602`.
    pub fn sampling_context(mut self, enabled: bool) -> Self {
        self.sampling_capability.context = enabled.then(JsonObject::new);
        self
    }

    /// Serves `elicitation/create` and declares the `elicitation` capability (form mode unless
    /// [`elicitation_modes`](Self::elicitation_modes) says otherwise).
    pub fn elicitation_handler(mut self, handler: impl ElicitationHandler) -> Self {
        self.elicitation = Some(Arc::new(handler));
        self
    }

    /// The elicitation modes to declare (default [`ElicitationModes::FORM`]). A request in an
    /// undeclared mode is refused with `-32602` before the handler runs.
    pub fn elicitation_modes(mut self, modes: ElicitationModes) -> Self {
        self.elicitation_modes = modes.normalised();
        self
    }

    /// Serves `roots/list` with `handler` and declares `roots` with `listChanged`: tell the
    /// server about changes with [`Client::notify_roots_changed`].
    pub fn roots_handler(mut self, handler: impl RootsHandler) -> Self {
        self.roots = Some(Arc::new(handler));
        self
    }

    /// Serves `roots/list` from a fixed list. To change it while connected, pass a
    /// [`StaticRoots`] you keep a clone of to [`roots_handler`](Self::roots_handler) instead.
    pub fn roots(self, roots: impl IntoIterator<Item = Root>) -> Self {
        self.roots_handler(StaticRoots::new(roots))
    }

    /// Declares non-standard capabilities (`capabilities.experimental`).
    pub fn experimental_capabilities(mut self, experimental: JsonObject) -> Self {
        self.experimental = Some(experimental);
        self
    }

    /// Calls `callback` with every notification the server sends, in order, on the
    /// connection's reader (including those sent during the handshake). Keep it short; hand
    /// long work to a task. A panic in it is caught and logged.
    pub fn on_notification(
        mut self,
        callback: impl Fn(&ServerNotification) + Send + Sync + 'static,
    ) -> Self {
        self.callback = Some(Arc::new(callback));
        self
    }

    /// Notifications buffered per [`NotificationStream`](crate::NotificationStream) before
    /// the oldest are dropped and reported as lag (default 256, at least 1).
    pub fn notification_buffer(mut self, capacity: usize) -> Self {
        self.notification_buffer = capacity.max(1);
        self
    }

    /// The most pages a `list_all_*` call follows (default 1024, at least 1), so a server that
    /// keeps returning `nextCursor` cannot keep the client paging forever.
    pub fn max_list_pages(mut self, pages: usize) -> Self {
        self.max_list_pages = pages.max(1);
        self
    }

    /// The capabilities this configuration declares.
    pub fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities {
            experimental: self.experimental.clone(),
            roots: self.roots.as_ref().map(|_| RootsCapability {
                list_changed: Some(true),
                ..RootsCapability::default()
            }),
            sampling: self
                .sampling
                .as_ref()
                .map(|_| self.sampling_capability.clone()),
            elicitation: self
                .elicitation
                .as_ref()
                .map(|_| self.elicitation_modes.capability()),
            ..ClientCapabilities::default()
        }
    }

    /// Connects over `transport`: runs the connection on the current tokio runtime, sends
    /// `initialize`, checks the revision the server chose, records it, and sends
    /// `notifications/initialized`.
    ///
    /// # Errors
    /// [`ClientError::UnsupportedVersion`] when the server chose a revision this client cannot
    /// speak; [`ClientError::Session`] when `initialize` failed (error answer, timeout, closed
    /// connection); [`ClientError::InvalidResponse`] when its result does not decode. The
    /// connection is closed in every case.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub async fn connect<T: Transport>(self, transport: T) -> Result<Client, ClientError> {
        let (connecting, driver) = self.connect_with_driver(transport);
        tokio::spawn(async move {
            if let Err(error) = driver.await {
                tracing::debug!(%error, "client connection ended with an error");
            }
        });
        connecting.await
    }

    /// Like [`connect`](Self::connect), but hands the connection's [`Driver`] to the caller
    /// instead of spawning it (to run it on another executor, or in a `select!`). The
    /// [`Connecting`] future completes the handshake, and only makes progress while the driver
    /// is polled too:
    ///
    /// ```no_run
    /// # async fn demo(transport: tidewire_core::transport::memory::MemoryTransport) -> Result<(), tidewire_client::ClientError> {
    /// # use tidewire_core::schema::Implementation;
    /// let (connecting, driver) = tidewire_client::ClientBuilder::new(Implementation::new("c", "1"))
    ///     .connect_with_driver(transport);
    /// let driver = tokio::spawn(driver);
    /// let client = connecting.await?;
    /// client.close().await;
    /// # let _ = driver.await; Ok(()) }
    /// ```
    pub fn connect_with_driver<T: Transport>(self, transport: T) -> (Connecting, Driver) {
        let capabilities = self.capabilities();
        let (tx, first) = broadcast::channel(self.notification_buffer);
        let template = first.resubscribe();
        let answerers = Arc::new(Answerers {
            sampling: self
                .sampling
                .map(|handler| (handler, self.sampling_capability.clone())),
            elicitation: self
                .elicitation
                .map(|handler| (handler, self.elicitation_modes)),
            roots: self.roots,
        });
        let cache = Arc::new(crate::cache::ResultCache::default());
        let dispatcher = Dispatcher {
            answerers: answerers.clone(),
            cache: cache.clone(),
            callback: self.callback,
            notifications: tx,
        };
        #[cfg(feature = "otel")]
        let options = self
            .options
            .observe_requests(std::sync::Arc::new(tidewire_otel::TracingObserver));
        #[cfg(not(feature = "otel"))]
        let options = self.options;
        let (peer, driver) = Session::new(transport, dispatcher, options);
        // A transport built around sessions cannot carry a stateless probe: Auto speaks the
        // session era over it, and Modern is told so when it tries.
        let session_only = !peer.transport_profile().carries_stateless;
        let era = match self.era {
            Era::Auto if session_only => Era::Legacy,
            era => era,
        };
        let offered = if self.version.uses_handshake() {
            self.version
        } else {
            tracing::warn!(
                version = %self.version,
                "the client cannot offer a stateless revision; offering the newest handshake revision"
            );
            ProtocolVersion::LATEST_HANDSHAKE
        };
        let settings = Settings {
            capabilities,
            info: self.info,
            offered,
            handshake_timeout: self.handshake_timeout,
            max_list_pages: self.max_list_pages,
            first,
            template,
            era,
            session_only,
            answerers,
            cache,
            max_input_rounds: self.max_input_rounds,
            reinitialize: self.reinitialize,
        };
        let future = Box::pin(handshake(peer, settings));
        (Connecting { future }, driver)
    }
}

/// What the handshake needs besides the peer.
struct Settings {
    capabilities: ClientCapabilities,
    info: Implementation,
    offered: ProtocolVersion,
    handshake_timeout: Option<Duration>,
    max_list_pages: usize,
    first: broadcast::Receiver<ServerNotification>,
    template: broadcast::Receiver<ServerNotification>,
    era: Era,
    /// The transport carries sessions only.
    session_only: bool,
    answerers: Arc<Answerers>,
    cache: Arc<crate::cache::ResultCache>,
    max_input_rounds: usize,
    /// Start a new session when the server ends one.
    reinitialize: bool,
}

/// Closes the connection when dropped while armed: a failed or abandoned handshake leaves
/// nothing running.
struct CloseOnDrop(Option<Peer>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.0.take() {
            peer.close();
        }
    }
}

async fn handshake(peer: Peer, settings: Settings) -> Result<Client, ClientError> {
    let mut guard = CloseOnDrop(Some(peer.clone()));
    let client = match settings.era {
        Era::Modern if settings.session_only => {
            return Err(ClientError::Session(SessionError::NotSupported(
                "the stateless revision over a session-era transport (on Streamable HTTP, \
                 connect with tidewire_http::client::StatelessHttpConnector)"
                    .to_owned(),
            )));
        }
        Era::Legacy => initialize(&peer, settings).await?,
        Era::Modern => stateless(&peer, settings, false).await?,
        Era::Auto => stateless(&peer, settings, true).await?,
    };
    guard.0 = None;
    Ok(client)
}

/// The session era: `initialize`, then `notifications/initialized`.
async fn initialize(peer: &Peer, settings: Settings) -> Result<Client, ClientError> {
    let params = InitializeParams::new(
        settings.offered,
        settings.capabilities.clone(),
        settings.info.clone(),
    );
    let mut request = peer.request::<Initialize>(params);
    if let Some(timeout) = settings.handshake_timeout {
        request = request.timeout(timeout);
    }
    let result = request.await?;
    let version = match result.version() {
        Some(version) if version.uses_handshake() => version,
        _ => {
            return Err(ClientError::UnsupportedVersion {
                offered: settings.offered,
                answered: result.protocol_version,
            });
        }
    };
    peer.set_protocol_version(version);
    peer.notify::<InitializedNotification>(EmptyParams::new())
        .await?;
    tracing::debug!(
        server = %result.server_info.name,
        %version,
        "MCP client connected"
    );
    Ok(client(peer, result, version, None, settings))
}

/// The stateless revision: `server/discover` (retried once at a version both serve after a
/// `-32022`). With `fallback`, an answer that is not the stateless era's, or none in time, means
/// the session era on the same connection.
async fn stateless(peer: &Peer, settings: Settings, fallback: bool) -> Result<Client, ClientError> {
    let mut version = ProtocolVersion::V2026_07_28;
    let mut retried = false;
    loop {
        let envelope = era::envelope(version, &settings.capabilities, &settings.info);
        let mut request = peer
            .request::<Discover>(EmptyParams::new())
            .merge_meta(envelope.clone());
        match (settings.handshake_timeout, fallback) {
            (Some(timeout), _) => request = request.timeout(timeout),
            (None, true) => request = request.timeout(PROBE_TIMEOUT),
            (None, false) => {}
        }
        let answer = request.await;
        match answer {
            Ok(result)
                if result
                    .supported_versions
                    .iter()
                    .any(|v| v == version.as_str()) =>
            {
                tracing::debug!(%version, "MCP client speaks the stateless revision");
                let init = discovered(version, result);
                return Ok(client(peer, init, version, Some(envelope), settings));
            }
            Ok(result) if !fallback => {
                return Err(ClientError::UnsupportedVersion {
                    offered: version,
                    answered: result.supported_versions.join(", "),
                });
            }
            Err(SessionError::Remote(error))
                if era::is_stateless_error(error.code, error.data.as_ref()) =>
            {
                let shared = era::shared_version(error.data.as_ref());
                match shared {
                    // Once, even at the same version: a server may refuse a first request
                    // whatever it says (and the spec asks a client to retry).
                    Some(shared) if !retried => {
                        version = shared;
                        retried = true;
                    }
                    _ => {
                        return Err(ClientError::UnsupportedVersion {
                            offered: version,
                            answered: error
                                .data
                                .as_ref()
                                .and_then(|d| d.get("supported"))
                                .map_or_else(String::new, ToString::to_string),
                        });
                    }
                }
            }
            Err(error) if !fallback || error.is_closed() => return Err(error.into()),
            // Anything else (an unknown method, another error, no answer in time, a result
            // without this revision): a server of the session era.
            _ => {
                tracing::debug!("server/discover was not answered as 2026-07-28: initialize");
                return initialize(peer, settings).await;
            }
        }
    }
}

/// What a client keeps of a discover result, in the form `initialize` gives it.
fn discovered(version: ProtocolVersion, result: DiscoverResult) -> InitializeResult {
    let info = result
        .meta
        .as_ref()
        .and_then(|m| m.get(meta_keys::SERVER_INFO))
        .and_then(|v| serde_json::from_value::<Implementation>(v.clone()).ok())
        // The server did not say who it is (it SHOULD).
        .unwrap_or_else(|| Implementation::new("unknown", "unknown"));
    let mut init = InitializeResult::new(version, result.capabilities, info);
    init.instructions = result.instructions;
    init
}

fn client(
    peer: &Peer,
    init: InitializeResult,
    version: ProtocolVersion,
    envelope: Option<JsonObject>,
    settings: Settings,
) -> Client {
    let session = envelope.is_none();
    let renewal = settings.reinitialize.then(|| {
        let params = InitializeParams::new(
            settings.offered,
            settings.capabilities.clone(),
            settings.info.clone(),
        );
        (params, settings.handshake_timeout)
    });
    let inner = Arc::new(Inner {
        peer: peer.clone(),
        init: RwLock::new(Arc::new(init)),
        version,
        reinitializations: AtomicU64::new(0),
        marks: crate::tool_headers::Marks::default(),
        spoken: if envelope.is_some() {
            Era::Modern
        } else {
            Era::Legacy
        },
        envelope,
        answerers: settings.answerers,
        cache: settings.cache,
        max_input_rounds: settings.max_input_rounds,
        log_level: Mutex::new(None),
        capabilities: settings.capabilities,
        first_notifications: Mutex::new(Some(settings.first)),
        template: settings.template,
        max_list_pages: settings.max_list_pages,
        #[cfg(feature = "otel")]
        session_clock: session.then(|| crate::telemetry::SessionClock::start(peer)),
    });
    if session {
        crate::reinit::watch(Arc::downgrade(&inner), peer.clone(), renewal);
    }
    Client {
        fresh: false,
        inner,
    }
}

/// The handshake of a client connected with
/// [`ClientBuilder::connect_with_driver`]: resolves to the [`Client`] once `initialize` is done.
///
/// It only makes progress while the connection's [`Driver`] is polled. Dropping it before it
/// completes closes the connection.
#[must_use = "the handshake does nothing unless awaited"]
pub struct Connecting {
    future: BoxFuture<'static, Result<Client, ClientError>>,
}

impl Future for Connecting {
    type Output = Result<Client, ClientError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.future.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Connecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connecting").finish_non_exhaustive()
    }
}
