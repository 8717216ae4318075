//! [`LoopbackRedirect`]: the front channel of a program on the user's machine (RFC 8252): the
//! user opens the authorization URL in a browser, and the authorization server sends the
//! browser back to a port on 127.0.0.1 where this program listens.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::error::AuthError;
use super::flow::FrontChannel;

/// The longest request head read from the browser.
const MAX_HEAD: usize = 16 * 1024;
/// How long one connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections read at once; past it a new one is closed unread. Connections are
/// read side by side, so one that sends nothing cannot hold up the browser's return.
const MAX_READING: usize = 16;

/// Waits on a loopback port for the browser's return from the authorization server. The
/// authorization URL goes to a callback (print it, open a browser), then one request to the
/// callback path is taken as the authorization response and answered with a page telling the
/// user they can close it. Other requests get 404 and the wait goes on, up to a time limit.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tidewire_auth::client::{LoopbackRedirect, OAuthClient, OAuthConfig};
///
/// let front = LoopbackRedirect::bind()
///     .await?
///     .on_url(|url| eprintln!("Open this URL to authorize: {url}"));
/// let oauth = OAuthClient::new(OAuthConfig::new("my-agent", front.redirect_uri(), front))?;
/// # let _ = oauth;
/// # Ok(()) }
/// ```
pub struct LoopbackRedirect {
    listener: TcpListener,
    port: u16,
    show: Arc<dyn Fn(&str) + Send + Sync>,
    timeout: Duration,
}

impl std::fmt::Debug for LoopbackRedirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackRedirect")
            .field("port", &self.port)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl LoopbackRedirect {
    /// Listens on a free port of 127.0.0.1; the URL is shown nowhere until
    /// [`on_url`](Self::on_url) says where.
    ///
    /// # Errors
    /// The port cannot be bound.
    pub async fn bind() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener,
            port,
            show: Arc::new(|_| {}),
            timeout: Duration::from_secs(300),
        })
    }

    /// Calls `show` with each authorization URL (print it, open a browser on it).
    #[must_use]
    pub fn on_url(mut self, show: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.show = Arc::new(show);
        self
    }

    /// How long to wait for the browser's return (five minutes unless set).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The redirect URI to register: `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the callback carrying `state` (the authorization request's): a request to the
    /// callback path without it (another local page's, or a stale login's, `error=` included)
    /// is answered 400 and ignored, and anything else 404, however many come, so no page on
    /// this machine can end a login it did not start; only the time limit of
    /// [`authorize`](FrontChannel::authorize) does.
    async fn wait(&self, state: Option<&str>) -> Result<String, AuthError> {
        use futures::StreamExt as _;

        let failed =
            |e: std::io::Error| AuthError::Authorization(format!("the loopback port: {e}"));
        let mut reading = futures::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted.map_err(failed)?;
                    if reading.len() < MAX_READING {
                        reading.push(answer(stream, state));
                    }
                }
                Some(taken) = reading.next(), if !reading.is_empty() => {
                    if let Some(target) = taken {
                        return Ok(format!("http://127.0.0.1:{}{target}", self.port));
                    }
                }
            }
        }
    }
}

/// Reads one connection's request and answers it: `Some(target)` when it is the callback
/// carrying `state` (answered with a page telling the user to close it), `None` otherwise
/// (answered 404 or 400, or dropped when it sends no head in time).
async fn answer(mut stream: tokio::net::TcpStream, state: Option<&str>) -> Option<String> {
    let Ok(Ok(head)) = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await else {
        return None;
    };
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .filter(|t| t.starts_with("/callback"));
    let Some(target) = target else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return None;
    };
    if state.is_some() && query_state(target).as_deref() != state {
        let _ = stream
            .write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n\
                  content-length: 45\r\nconnection: close\r\n\r\n\
                  This is not the login this program waits for.",
            )
            .await;
        return None;
    }
    let page = "<!doctype html><title>Authorized</title><p>You can close this window \
                and return to the program.</p>";
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
         content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    Some(target.to_owned())
}

/// The `state` parameter of a URL or a request target (`/callback?…`), decoded.
fn query_state(target: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://127.0.0.1{target}"))
        .or_else(|_| reqwest::Url::parse(target))
        .ok()?;
    url.query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
}

/// The request head (up to the blank line), at most [`MAX_HEAD`] bytes.
async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 || head.len() + read > MAX_HEAD {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

impl FrontChannel for LoopbackRedirect {
    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            (self.show)(url);
            let state = reqwest::Url::parse(url).ok().and_then(|u| {
                u.query_pairs()
                    .find(|(name, _)| name == "state")
                    .map(|(_, value)| value.into_owned())
            });
            tokio::time::timeout(self.timeout, self.wait(state.as_deref()))
                .await
                .map_err(|_| {
                    AuthError::Authorization(format!(
                        "no answer from the browser within {} s",
                        self.timeout.as_secs()
                    ))
                })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_redirect_is_taken_and_stray_requests_are_not() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let front = LoopbackRedirect::bind().await.expect("bind");
            let base = front.redirect_uri().replace("/callback", "");
            let browser = tokio::spawn(async move {
                let http = reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .expect("client");
                let stray = http
                    .get(format!("{base}/favicon.ico"))
                    .send()
                    .await
                    .expect("stray");
                assert_eq!(stray.status(), 404);
                // Issue 26, item 5: any local page could end a login with an `error` before the
                // state was checked. A callback without this login's state is ignored.
                // And however many come (the old bound was 32, then the login ended), while a
                // connection that sends nothing is open: neither holds up the real return.
                let _idle = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
                    .await
                    .expect("idle connection");
                let strays = std::iter::repeat_n("/callback?error=access_denied&state=other", 40);
                for other in [
                    "/callback?error=access_denied",
                    "/callback?error=access_denied&state=other",
                    "/callback?code=stolen&state=s2",
                ]
                .into_iter()
                .chain(strays)
                {
                    let refused = http
                        .get(format!("{base}{other}"))
                        .send()
                        .await
                        .expect("answered");
                    assert_eq!(refused.status(), 400, "{other}");
                }
                let back = http
                    .get(format!("{base}/callback?code=c&state=s"))
                    .send()
                    .await
                    .expect("redirect");
                assert_eq!(back.status(), 200);
            });
            // Well inside the 10 s an idle connection may take to send its request.
            let redirected = tokio::time::timeout(
                Duration::from_secs(5),
                front.authorize("http://as/authorize?client_id=x&state=s"),
            )
            .await
            .expect("in time, whatever the idle connection does")
            .expect("the redirect");
            assert!(
                redirected.ends_with("/callback?code=c&state=s"),
                "{redirected}"
            );
            browser.await.expect("browser");
        })
        .await
        .expect("the test took longer than its limit");
    }
}
