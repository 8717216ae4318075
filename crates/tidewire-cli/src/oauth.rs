//! OAuth for the client commands: where tokens are kept (one private file), and the session
//! that logs in through the user's browser and a loopback redirect, then refreshes.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use tidewire_auth::client::{
    AuthError, FileStore, FrontChannel, LoopbackRedirect, MemoryStore, OAuthClient, OAuthConfig,
    OAuthSession, TokenStore,
};

use crate::error::CliError;
use crate::sanitize;
use crate::ui::Ui;

/// The environment variable naming the token file (instead of the config directory's).
pub(crate) const TOKEN_FILE_VAR: &str = "TIDEWIRE_TOKEN_FILE";

/// Where tokens live: `--token-file`, else `$TIDEWIRE_TOKEN_FILE`, else
/// `tidewire/tokens.json` in the user's config directory; in memory when there is none.
pub(crate) fn store(token_file: Option<&PathBuf>) -> Arc<dyn TokenStore> {
    let named = token_file
        .cloned()
        .or_else(|| std::env::var_os(TOKEN_FILE_VAR).map(PathBuf::from));
    match named {
        Some(path) => Arc::new(FileStore::new(path)),
        None => match FileStore::in_config_dir() {
            Ok(store) => Arc::new(store),
            Err(error) => {
                tracing::warn!(%error, "tokens are kept in memory only");
                Arc::new(MemoryStore::new())
            }
        },
    }
}

/// How the user is reached for a login.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Browser {
    /// Open a browser on the authorization URL (else only print the URL).
    pub(crate) open: bool,
    /// Whether a login may ask the user at all. A script run on a saved login must not wait
    /// minutes for a browser when that login has run out: it fails at once instead.
    pub(crate) ask: bool,
}

/// A session for the MCP endpoint `url` with tokens in `store`: a login prints the
/// authorization URL on stderr (and opens the browser unless told not to), then waits on a
/// loopback port for the browser's return.
pub(crate) async fn session(
    url: &str,
    store: Arc<dyn TokenStore>,
    browser: Browser,
    ui: &Ui,
) -> Result<OAuthSession, CliError> {
    if !browser.ask {
        let config = OAuthConfig::new("tidewire", "http://127.0.0.1/callback", NoOneToAsk);
        let oauth = OAuthClient::new(config)
            .map_err(|e| CliError::with_cause("cannot start the OAuth client", &e))?;
        return Ok(OAuthSession::with_store(oauth, url, store));
    }
    let ui = ui.clone();
    let front = LoopbackRedirect::bind()
        .await
        .map_err(|e| CliError::new(format!("cannot listen for the browser's return: {e}")))?
        .on_url(move |url| {
            // The URL is built from the authorization server's metadata: never trusted raw.
            ui.line(&format!(
                "tidewire: to authorize, open this URL in a browser:\n  {}",
                sanitize::line(url)
            ));
            if browser.open && open_browser(url) {
                ui.line("tidewire: (a browser was opened on it)");
            }
        });
    let config = OAuthConfig::new("tidewire", front.redirect_uri(), front);
    let oauth = OAuthClient::new(config)
        .map_err(|e| CliError::with_cause("cannot start the OAuth client", &e))?;
    Ok(OAuthSession::with_store(oauth, url, store))
}

/// The front channel of a run that may not ask the user: every login is refused, saying how to
/// log in.
struct NoOneToAsk;

impl FrontChannel for NoOneToAsk {
    fn authorize<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(futures::future::ready(Err(AuthError::Authorization(
            "the saved login no longer works and there is no terminal to log in again: run \
             `tidewire auth login URL`, or pass --oauth"
                .to_owned(),
        ))))
    }
}

/// Opens the user's browser on `url`, when there seems to be one; whether it was started.
fn open_browser(url: &str) -> bool {
    // The library refuses any other endpoint already; a browser is never handed a `file:` or
    // `javascript:` URL however it got here.
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return false;
    }
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        "xdg-open"
    } else {
        return false;
    };
    std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
