//! Connecting to a [`Target`]: Streamable HTTP (falling back to legacy HTTP+SSE when the server
//! refuses it), WebSocket, or a server process over stdio. A new transport is one more arm in
//! [`connect_observed`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args;
use tidewire_client::schema::Implementation;
use tidewire_client::{Client, ClientError, Era};
use tidewire_core::http::RequestHeaders;
use tidewire_core::jsonrpc::Message;
use tidewire_core::transport::{Envelope, Transport, TransportError, TransportReceiver};
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire_sse::client::LegacySseConnector;
use tidewire_stdio::client::{ChildHandle, ShutdownTimeouts, StderrMode, StdioConnector};
use tidewire_ws::client::WebSocketConnector;

use tidewire_auth::client::OAuthSession;

use crate::error::{CliError, describe};
use crate::oauth;
use crate::sanitize;
use crate::target::Target;
use crate::ui::Ui;

/// How long the `initialize` handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing may take before the program gives up waiting (per step).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Options for reaching a server, shared by `call`, `list`, `read` and `prompt`.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ConnectArgs {
    /// HTTP and WebSocket targets: send this header with every request, as NAME:VALUE
    /// (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub(crate) headers: Vec<String>,

    /// HTTP and WebSocket targets: send `Authorization: Bearer TOKEN` with every request. The
    /// token is then on the command line, which other users of the machine can read: prefer
    /// --bearer-env or --bearer-file.
    #[arg(long, value_name = "TOKEN", group = "bearer_token")]
    pub(crate) bearer: Option<String>,

    /// As --bearer, with the token read from the environment variable NAME.
    #[arg(long, value_name = "NAME", group = "bearer_token")]
    pub(crate) bearer_env: Option<String>,

    /// As --bearer, with the token read from the file PATH (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH", group = "bearer_token")]
    pub(crate) bearer_file: Option<std::path::PathBuf>,

    /// Stdio targets: show the server's stderr (dimmed on a terminal). Hidden otherwise, but
    /// its last line is quoted if the connection fails.
    #[arg(long)]
    pub(crate) show_stderr: bool,

    /// Which protocol era to speak: `auto` (the default: ask the server with server/discover,
    /// the newest revision both speak, falling back to initialize and then to legacy
    /// HTTP+SSE), `modern` (the stateless revision 2026-07-28 only: every request on its own)
    /// or `legacy` (initialize only).
    #[arg(long, value_name = "ERA", default_value = "auto", value_parser = parse_era)]
    pub(crate) era: CliEra,

    /// HTTP targets: log in with OAuth when the server asks (a 401): the authorization URL is
    /// printed (and opened in a browser), the browser comes back to a loopback port, and the
    /// tokens are kept in the token file and refreshed. Without it, a saved login (`tidewire
    /// auth login`) is still used, and on a terminal a 401 starts the login by itself.
    #[arg(long, conflicts_with = "bearer_token")]
    pub(crate) oauth: bool,

    /// With OAuth: print the authorization URL only; do not open a browser.
    #[arg(long)]
    pub(crate) no_browser: bool,

    /// Where OAuth tokens are kept (default: $TIDEWIRE_TOKEN_FILE, else
    /// tidewire/tokens.json in the user's config directory; written with mode 0600).
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<std::path::PathBuf>,
}

/// The longest token `--bearer-file` reads.
const MAX_TOKEN_FILE: u64 = 64 * 1024;

impl ConnectArgs {
    /// Whether a token of the user's own is given (`--bearer`, `--bearer-env`,
    /// `--bearer-file`): then no OAuth login is tried.
    pub(crate) fn has_bearer(&self) -> bool {
        self.bearer.is_some() || self.bearer_env.is_some() || self.bearer_file.is_some()
    }

    /// The token given with `--bearer`, `--bearer-env` or `--bearer-file`, if any.
    ///
    /// # Errors
    /// The variable is unset or empty; the file cannot be read, is too large, or is empty.
    pub(crate) fn bearer_token(&self) -> Result<Option<String>, CliError> {
        if let Some(token) = &self.bearer {
            return Ok(Some(token.clone()));
        }
        if let Some(name) = &self.bearer_env {
            return match std::env::var(name) {
                Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_owned())),
                _ => Err(CliError::new(format!(
                    "--bearer-env {name}: the variable is not set (or is empty)"
                ))),
            };
        }
        if let Some(path) = &self.bearer_file {
            let cannot =
                |why: String| CliError::new(format!("--bearer-file {}: {why}", path.display()));
            let file = std::fs::File::open(path).map_err(|e| cannot(e.to_string()))?;
            let mut text = String::new();
            std::io::Read::read_to_string(
                &mut std::io::Read::take(file, MAX_TOKEN_FILE + 1),
                &mut text,
            )
            .map_err(|e| cannot(e.to_string()))?;
            if text.len() as u64 > MAX_TOKEN_FILE {
                return Err(cannot(format!("longer than {MAX_TOKEN_FILE} bytes")));
            }
            let token = text.trim();
            if token.is_empty() {
                return Err(cannot("the file is empty".to_owned()));
            }
            return Ok(Some(token.to_owned()));
        }
        Ok(None)
    }
}

/// The `--era` of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CliEra {
    Legacy,
    Modern,
    #[default]
    Auto,
}

pub(crate) fn parse_era(text: &str) -> Result<CliEra, String> {
    match text {
        "legacy" => Ok(CliEra::Legacy),
        "modern" => Ok(CliEra::Modern),
        "auto" => Ok(CliEra::Auto),
        other => Err(format!(
            "unknown era {other:?} (expected legacy, modern or auto)"
        )),
    }
}

impl CliEra {
    fn era(self) -> Era {
        match self {
            Self::Legacy => Era::Legacy,
            Self::Modern => Era::Modern,
            Self::Auto => Era::Auto,
        }
    }
}

/// A connected client, and the server process behind it for stdio targets.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) client: Client,
    child: Option<ChildHandle>,
}

impl Connection {
    fn remote(client: Client) -> Self {
        Self {
            client,
            child: None,
        }
    }

    /// Closes the session and, for stdio, waits (briefly) for the server process to exit.
    pub(crate) async fn close(self) {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.client.close()).await;
        if let Some(child) = self.child {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT * 2, child.shutdown()).await;
        }
    }

    /// Something that kills the server process at once (stdio targets), for a second Ctrl-C
    /// while the connection closes.
    pub(crate) fn kill_switch(&self) -> impl Fn() + use<> {
        let child = self.child.clone();
        move || {
            if let Some(child) = &child {
                let _ = child.kill();
            }
        }
    }
}

/// The last line the server wrote on stderr.
type Tail = Arc<Mutex<Option<String>>>;

/// Sees each message from the server as it arrives, before the session does.
pub(crate) type Observer = Arc<dyn Fn(&Message) + Send + Sync>;

/// Connects to `target` and completes the handshake.
pub(crate) async fn connect(
    target: &Target,
    args: &ConnectArgs,
    ui: &Ui,
) -> Result<Connection, CliError> {
    connect_observed(target, args, ui, None).await
}

/// [`connect`], with an observer of every message that arrives.
pub(crate) async fn connect_observed(
    target: &Target,
    args: &ConnectArgs,
    ui: &Ui,
    observer: Option<Observer>,
) -> Result<Connection, CliError> {
    match target {
        Target::Http(url) => {
            let auth = saved_login(url, args, ui).await?;
            let Some(session) = auth else {
                return match connect_http(url, args, observer.clone(), target, None).await {
                    Err(failure) if !args.has_bearer() && unauthorized(&failure) => {
                        if !ui.is_interactive() {
                            return Err(CliError::new(format!(
                                "{} (run again with --oauth to log in, or `tidewire auth \
                                 login {url}` first)",
                                failure.error
                            )));
                        }
                        let session = login_session(url, args, ui, true).await?;
                        connect_authorized(url, args, observer, target, session).await
                    }
                    other => other.map_err(|f| f.error),
                };
            };
            connect_authorized(url, args, observer, target, session).await
        }
        Target::WebSocket(url) => {
            let builder = WebSocketConnector::new(url).request_headers(request_headers(args)?);
            let transport = builder.connect().await.map_err(|e| {
                CliError::new(format!(
                    "cannot connect to {url}: {}",
                    plainly(describe(&e))
                ))
            })?;
            let client = handshake(tap(transport, observer), target, None, args.era.era())
                .await
                .map_err(|f| f.error)?;
            Ok(Connection::remote(client))
        }
        Target::Stdio {
            program,
            args: argv,
        } => {
            let tail = Tail::default();
            let transport = StdioConnector::command(program)
                .args(argv)
                .stderr(stderr_mode(args.show_stderr, ui.clone(), tail.clone()))
                .shutdown_timeouts(ShutdownTimeouts::new(CLOSE_TIMEOUT, CLOSE_TIMEOUT))
                .spawn()
                .map_err(|e| CliError::new(describe(&e)))?;
            // Kills the server if the handshake fails or is abandoned (Ctrl-C drops this
            // future), at once rather than from a task that may never run again.
            let mut guard = KillOnDrop(Some(transport.handle()));
            let client = handshake(
                tap(transport, observer),
                target,
                Some(&tail),
                args.era.era(),
            )
            .await
            .map_err(|f| f.error)?;
            Ok(Connection {
                client,
                child: guard.0.take(),
            })
        }
    }
}

/// An HTTP target: the stateless wire first unless `--era legacy`, then (unless `--era
/// modern`) Streamable HTTP sessions, then legacy HTTP+SSE for an older server; each transport
/// authorized by `auth`. An error that could be an era mismatch says which `--era` to try.
async fn connect_http(
    url: &str,
    args: &ConnectArgs,
    observer: Option<Observer>,
    target: &Target,
    auth: Option<OAuthSession>,
) -> Result<Connection, Failure> {
    let plain = |error: CliError| Failure { error, cause: None };
    if args.era != CliEra::Legacy {
        // The era decides the transport: the stateless wire first.
        let transport = stateless_transport(url, args, auth.clone())
            .await
            .map_err(plain)?;
        match handshake(tap(transport, observer.clone()), target, None, Era::Modern).await {
            Ok(client) => return Ok(Connection::remote(client)),
            Err(failure) if stateless_refusal(&failure) => return Err(failure),
            Err(Failure { error, cause }) if args.era == CliEra::Modern => {
                let error = error.hint(
                    "it did not answer as a server of the 2026-07-28 revision: \
                     `--era auto` also tries sessions and legacy HTTP+SSE",
                );
                return Err(Failure { error, cause });
            }
            // Not a server of the stateless revision: sessions, as below.
            Err(_) => {}
        }
    }
    let transport = http_transport(url, args, auth.clone())
        .await
        .map_err(plain)?;
    match handshake(tap(transport, observer.clone()), target, None, Era::Legacy).await {
        Ok(client) => Ok(Connection::remote(client)),
        Err(failure) => match refused_status(&failure) {
            // Not a Streamable HTTP endpoint: an older server may serve legacy SSE here.
            Some(status) => legacy_sse(url, args, observer, target, status, auth)
                .await
                .map_err(|error| match args.era {
                    // A server of the 2026-07-28 revision only refuses `initialize` so.
                    CliEra::Legacy => error.hint("`--era auto` also tries the 2026-07-28 revision"),
                    _ => error,
                })
                .map_err(plain),
            None => Err(failure),
        },
    }
}

/// [`connect_http`] with OAuth; a failure says why the login failed, when it did.
async fn connect_authorized(
    url: &str,
    args: &ConnectArgs,
    observer: Option<Observer>,
    target: &Target,
    session: OAuthSession,
) -> Result<Connection, CliError> {
    connect_http(url, args, observer, target, Some(session.clone()))
        .await
        .map_err(|failure| match session.last_error() {
            Some(why) => CliError::new(format!("{} (OAuth: {why})", failure.error)),
            None => failure.error,
        })
}

/// The OAuth session to connect with before any refusal: with `--oauth`, or when a login for
/// `url` is saved; none with `--bearer`.
async fn saved_login(
    url: &str,
    args: &ConnectArgs,
    ui: &Ui,
) -> Result<Option<OAuthSession>, CliError> {
    if args.has_bearer() {
        return Ok(None);
    }
    let saved = oauth::store(args.token_file.as_ref())
        .load(url)
        .map_err(|e| CliError::with_cause("cannot read the saved logins", &e))?
        .is_some();
    if args.oauth || saved {
        let ask = args.oauth || ui.is_interactive();
        return login_session(url, args, ui, ask).await.map(Some);
    }
    Ok(None)
}

/// The OAuth session for `url`; `ask`: whether a login may ask the user.
async fn login_session(
    url: &str,
    args: &ConnectArgs,
    ui: &Ui,
    ask: bool,
) -> Result<OAuthSession, CliError> {
    let browser = oauth::Browser {
        open: !args.no_browser,
        ask,
    };
    oauth::session(url, oauth::store(args.token_file.as_ref()), browser, ui).await
}

/// Whether the server refused the handshake with 401 (it wants a token).
fn unauthorized(failure: &Failure) -> bool {
    failure.cause.as_ref().and_then(ClientError::http_status) == Some(401)
}

/// Kills a server process when dropped, unless taken out first.
struct KillOnDrop(Option<ChildHandle>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            let _ = child.kill();
        }
    }
}

/// The fallback of MCP 2025-03-26: the server refused the `initialize` POST, so open a legacy
/// SSE stream (GET) at the same URL and connect over that.
async fn legacy_sse(
    url: &str,
    args: &ConnectArgs,
    observer: Option<Observer>,
    target: &Target,
    status: u16,
    auth: Option<OAuthSession>,
) -> Result<Connection, CliError> {
    let mut builder = LegacySseConnector::new(url).request_headers(request_headers(args)?);
    if let Some(auth) = auth {
        builder = builder.authorizer(auth);
    }
    let transport = builder.connect().await.map_err(|e| {
        CliError::new(format!(
            "cannot connect to {url}: it refused Streamable HTTP (HTTP {status} to the \
             initialize POST), and legacy HTTP+SSE failed too: {}",
            describe(&e)
        ))
    })?;
    let client = handshake(tap(transport, observer), target, None, Era::Legacy)
        .await
        .map_err(|f| f.error)?;
    Ok(Connection::remote(client))
}

/// The stateless wire's HTTP transport, with the `--header` and `--bearer` options.
async fn stateless_transport(
    url: &str,
    args: &ConnectArgs,
    auth: Option<OAuthSession>,
) -> Result<tidewire_http::client::StatelessHttpTransport, CliError> {
    let mut builder = StatelessHttpConnector::new(url).request_headers(request_headers(args)?);
    if let Some(auth) = auth {
        builder = builder.authorizer(auth);
    }
    builder
        .connect()
        .await
        .map_err(|e| CliError::with_cause(format!("cannot connect to {url}"), &e))
}

/// A failure that is a server of the stateless revision refusing: no reason to try sessions.
fn stateless_refusal(failure: &Failure) -> bool {
    failure
        .cause
        .as_ref()
        .is_some_and(ClientError::is_stateless_refusal)
}

/// The `--header NAME:VALUE` and `--bearer` (`-env`, `-file`) options, for any transport's
/// builder (an invalid header is refused when it connects).
fn request_headers(args: &ConnectArgs) -> Result<RequestHeaders, CliError> {
    let mut headers = RequestHeaders::default();
    for header in &args.headers {
        let Some((name, value)) = header.split_once(':') else {
            return Err(CliError::new(format!(
                "--header {header:?}: write it as NAME:VALUE, e.g. --header 'X-Api-Key: abc'"
            )));
        };
        headers.add(name.trim(), value.trim());
    }
    if let Some(token) = args.bearer_token()? {
        headers.bearer(&token);
    }
    Ok(headers)
}

/// The HTTP status of a refused `initialize` POST when it means "not a Streamable HTTP endpoint"
/// (400, 404, 405), as the transport read it from the HTTP response.
fn refused_status(failure: &Failure) -> Option<u16> {
    let status = failure.cause.as_ref()?.http_status()?;
    matches!(status, 400 | 404 | 405).then_some(status)
}

async fn http_transport(
    url: &str,
    args: &ConnectArgs,
    auth: Option<OAuthSession>,
) -> Result<tidewire_http::client::HttpClientTransport, CliError> {
    if !cfg!(feature = "tls") && url.to_ascii_lowercase().starts_with("https://") {
        return Err(CliError::new(format!(
            "cannot connect to {url}: this build of tidewire has no TLS; build it with \
             `--features tls` for https:// targets"
        )));
    }
    let mut builder = StreamableHttpConnector::new(url).request_headers(request_headers(args)?);
    if let Some(auth) = auth {
        builder = builder.authorizer(auth);
    }
    builder
        .connect()
        .await
        .map_err(|e| CliError::with_cause(format!("cannot connect to {url}"), &e))
}

/// Hands the server's stderr to the screen (dimmed, above the bar, its control characters
/// escaped) or keeps only its last line (escaped when the error that quotes it is printed).
fn stderr_mode(show: bool, ui: Ui, tail: Tail) -> StderrMode {
    StderrMode::callback(move |line: String| {
        if show {
            ui.dim_note(&sanitize::line(&line));
        }
        if !line.trim().is_empty() {
            *tail.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
        }
    })
}

/// A failed handshake: the line to print, and the client error behind it.
struct Failure {
    error: CliError,
    cause: Option<ClientError>,
}

async fn handshake(
    transport: impl Transport,
    target: &Target,
    tail: Option<&Tail>,
    era: Era,
) -> Result<Client, Failure> {
    Client::builder(Implementation::new("tidewire", env!("CARGO_PKG_VERSION")))
        .handshake_timeout(HANDSHAKE_TIMEOUT)
        .era(era)
        .connect(transport)
        .await
        .map_err(|e| {
            let mut message = format!(
                "cannot connect to {}: {}",
                target.describe(),
                plainly(client_error(&e))
            );
            let last = tail.and_then(|t| t.lock().unwrap_or_else(PoisonError::into_inner).clone());
            if let Some(last) = last {
                message.push_str(&format!(" (its last words on stderr: {})", last.trim()));
            }
            Failure {
                error: CliError::new(message),
                cause: Some(e),
            }
        })
}

/// The usual reason to fail, said plainly: nothing listens at that address.
fn plainly(reason: String) -> String {
    if reason.contains("Connection refused") {
        "the connection was refused: is the server running, and at this address?".to_owned()
    } else {
        reason
    }
}

/// A client error as one line; an error answer reads as what the server (or the transport on
/// its behalf) said.
pub(crate) fn client_error(error: &ClientError) -> String {
    match error.remote() {
        Some(remote) => format!(
            "{} (error {})",
            remote.message.trim_end_matches([':', ' ']),
            remote.code
        ),
        None => describe(error),
    }
}

/// The receiving half of a transport, with an observer.
struct Tapped<R> {
    inner: R,
    observer: Option<Observer>,
}

impl<R: TransportReceiver> TransportReceiver for Tapped<R> {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        let item = self.inner.recv().await;
        if let (Some(observer), Some(Ok(envelope))) = (&self.observer, &item) {
            observer(&envelope.message);
        }
        item
    }
}

fn tap<T: Transport>(transport: T, observer: Option<Observer>) -> (T::Sender, Tapped<T::Receiver>) {
    let (sender, receiver) = transport.split();
    (
        sender,
        Tapped {
            inner: receiver,
            observer,
        },
    )
}
