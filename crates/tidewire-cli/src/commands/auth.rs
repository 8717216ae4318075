//! `tidewire auth login|logout|status`: OAuth logins kept in the token file.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, Subcommand};
use tidewire_auth::client::Grant;

use crate::error::{CliError, Outcome};
use crate::oauth::{self, Browser};
use crate::output;
use crate::sanitize;
use crate::ui::Ui;

#[derive(Debug, Args)]
pub(crate) struct AuthArgs {
    #[command(subcommand)]
    action: Action,

    /// Where OAuth tokens are kept (default: $TIDEWIRE_TOKEN_FILE, else
    /// tidewire/tokens.json in the user's config directory).
    #[arg(long, value_name = "PATH", global = true)]
    token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Log in to an MCP server (its Streamable HTTP URL): print the authorization URL, open
    /// the browser on it, wait for its return on a loopback port, and keep the tokens.
    Login {
        /// The MCP endpoint, e.g. https://mcp.example.com/mcp.
        url: String,
        /// Print the authorization URL only; do not open a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the login to an MCP server.
    Logout {
        /// The MCP endpoint.
        url: String,
    },
    /// Show the kept logins (never their tokens): issuer, scopes, expiry, whether they can
    /// be refreshed.
    Status {
        /// Only this MCP endpoint.
        url: Option<String>,
    },
}

pub(crate) async fn run(args: AuthArgs, ui: Ui) -> Result<Outcome, CliError> {
    let store = oauth::store(args.token_file.as_ref());
    let failed = |e: &dyn std::error::Error| CliError::with_cause("the token file", e);
    match args.action {
        Action::Login { url, no_browser } => {
            let browser = Browser {
                open: !no_browser,
                ask: true,
            };
            let session = oauth::session(&url, store, browser, &ui).await?;
            let grant = session
                .login()
                .await
                .map_err(|e| CliError::with_cause(format!("cannot log in to {url}"), &e))?;
            output::out(&format!("logged in to {}", describe(&url, &grant)));
        }
        Action::Logout { url } => {
            if store.remove(&url).map_err(|e| failed(&e))? {
                output::out(&format!("logged out of {}", sanitize::line(&url)));
            } else {
                output::out(&format!("no login to {}", sanitize::line(&url)));
            }
        }
        Action::Status { url } => {
            let urls = match url {
                Some(url) => vec![url],
                None => store.keys().map_err(|e| failed(&e))?,
            };
            if urls.is_empty() {
                output::out("no logins");
            }
            for url in urls {
                match store.load(&url).map_err(|e| failed(&e))? {
                    Some(grant) => output::out(&describe(&url, &grant)),
                    None => output::out(&format!("{}: not logged in", sanitize::line(&url))),
                }
            }
        }
    }
    Ok(Outcome::Success)
}

/// One login, as a line: the endpoint, its issuer, scopes and expiry (the issuer and scopes
/// come from servers, so their control characters are escaped).
fn describe(url: &str, grant: &Grant) -> String {
    let expiry = match grant.token.expires_at {
        None => "no expiry given".to_owned(),
        Some(at) => match at.duration_since(SystemTime::now()) {
            Ok(left) => format!("expires in {} s", left.as_secs()),
            Err(_) => "expired".to_owned(),
        },
    };
    let refresh = if grant.token.refresh_token.is_some() {
        "can be refreshed"
    } else {
        "cannot be refreshed"
    };
    format!(
        "{}: issuer {}, scopes {:?}, {expiry}, {refresh}",
        sanitize::line(url),
        sanitize::line(&grant.issuer),
        sanitize::line(grant.token.scope.as_deref().unwrap_or("")),
    )
}
