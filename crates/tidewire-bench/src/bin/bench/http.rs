//! MCP over raw HTTP/1.1: one hyper connection per session, requests written by hand.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The protocol revision every peer is spoken to in, unless `--protocol` says otherwise.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

static PROTOCOL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the revision to speak (once, before any session opens).
pub fn set_protocol_version(version: &str) {
    let _ = PROTOCOL.set(version.to_owned());
}

/// The revision spoken.
pub fn protocol_version() -> &'static str {
    PROTOCOL.get().map_or(PROTOCOL_VERSION, String::as_str)
}

/// Where a server listens.
#[derive(Debug)]
pub struct Target {
    addr: SocketAddr,
    host: HeaderValue,
}

impl Target {
    /// Parses `http://127.0.0.1:PORT/mcp`, as the servers print it.
    pub fn from_url(url: &str) -> anyhow::Result<Arc<Self>> {
        let rest = url
            .trim()
            .strip_prefix("http://")
            .with_context(|| format!("not an http URL: {url}"))?;
        let authority = rest.split('/').next().unwrap_or(rest);
        let addr: SocketAddr = authority
            .parse()
            .with_context(|| format!("not an address: {authority}"))?;
        Ok(Arc::new(Self {
            addr,
            host: HeaderValue::from_str(authority)?,
        }))
    }
}

/// One HTTP/1.1 connection (keep-alive), requests one at a time.
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
}

impl Conn {
    /// Connects (with TCP_NODELAY) and spawns the connection's task.
    pub async fn open(target: &Target) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(target.addr).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { send })
    }

    async fn send(&mut self, request: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        self.send.ready().await?;
        Ok(self.send.send_request(request).await?)
    }
}

/// A response read to its end.
pub struct Reply {
    pub status: StatusCode,
    pub session: Option<HeaderValue>,
    pub body: Bytes,
}

fn request(
    target: &Target,
    method: Method,
    session: Option<&HeaderValue>,
    body: Bytes,
) -> anyhow::Result<Request<Full<Bytes>>> {
    let mut builder = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(http::header::HOST, target.host.clone())
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", protocol_version());
    if !body.is_empty() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session.clone());
    }
    Ok(builder.body(Full::new(body))?)
}

/// POSTs `body` and reads the whole response.
pub async fn post(
    conn: &mut Conn,
    target: &Target,
    session: Option<&HeaderValue>,
    body: Bytes,
) -> anyhow::Result<Reply> {
    let response = conn
        .send(request(target, Method::POST, session, body)?)
        .await?;
    let status = response.status();
    let session = response.headers().get("mcp-session-id").cloned();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Reply {
        status,
        session,
        body,
    })
}

/// `initialize`, then `notifications/initialized`, on `conn`. Returns the session id (none from
/// a stateless server).
pub async fn initialize(conn: &mut Conn, target: &Target) -> anyhow::Result<Option<HeaderValue>> {
    let version = protocol_version();
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
    );
    let reply = post(conn, target, None, Bytes::from(init)).await?;
    ensure!(
        reply.status.is_success() && contains(&reply.body, b"\"result\""),
        "initialize failed: {} {}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    let session = reply.session;
    let note = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let reply = post(conn, target, session.as_ref(), note).await?;
    ensure!(
        reply.status.is_success(),
        "notifications/initialized failed: {}",
        reply.status
    );
    Ok(session)
}

/// A session on its own connection.
pub struct Session {
    conn: Conn,
    target: Arc<Target>,
    id: Option<HeaderValue>,
    next: u64,
}

impl Session {
    /// Connects and initializes.
    pub async fn open(target: Arc<Target>) -> anyhow::Result<Self> {
        let mut conn = Conn::open(&target).await?;
        let id = initialize(&mut conn, &target).await?;
        Ok(Self {
            conn,
            target,
            id,
            next: 1,
        })
    }

    /// One `tools/call echo` round trip.
    pub async fn echo(&mut self) -> anyhow::Result<()> {
        let id = self.next;
        self.next += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}}}}}}"#
        );
        let reply = post(&mut self.conn, &self.target, self.id.as_ref(), body.into()).await?;
        if !reply.status.is_success() || !contains(&reply.body, b"\"result\"") {
            bail!(
                "echo failed: {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            );
        }
        Ok(())
    }

    /// One `tools/call progress(n)` with a progress token; returns how many progress
    /// notifications came back before the result.
    pub async fn progress(&mut self, n: u64) -> anyhow::Result<usize> {
        let id = self.next;
        self.next += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"progress","arguments":{{"n":{n}}},"_meta":{{"progressToken":"p{id}"}}}}}}"#
        );
        let reply = post(&mut self.conn, &self.target, self.id.as_ref(), body.into()).await?;
        ensure!(
            reply.status.is_success() && contains(&reply.body, b"\"result\""),
            "progress failed: {}",
            reply.status
        );
        Ok(count(&reply.body, b"notifications/progress"))
    }
}

/// A GET stream held open (its connection stays up while this lives).
pub struct HeldStream {
    _conn: Conn,
    _response: Response<Incoming>,
}

/// Opens the session's standalone GET stream on a new connection and waits for its headers.
pub async fn open_get_stream(
    target: &Target,
    session: Option<&HeaderValue>,
) -> anyhow::Result<HeldStream> {
    let mut conn = Conn::open(target).await?;
    let mut get = Request::builder()
        .method(Method::GET)
        .uri("/mcp")
        .header(http::header::HOST, target.host.clone())
        .header(http::header::ACCEPT, "text/event-stream")
        .header("mcp-protocol-version", protocol_version());
    if let Some(session) = session {
        get = get.header("mcp-session-id", session.clone());
    }
    let request = get.body(Empty::<Bytes>::new())?;
    // The connection is typed for full bodies; an empty one is the same on the wire.
    let request = request.map(|_| Full::new(Bytes::new()));
    let response = conn.send(request).await?;
    ensure!(
        response.status() == StatusCode::OK,
        "the GET stream was refused: {}",
        response.status()
    );
    Ok(HeldStream {
        _conn: conn,
        _response: response,
    })
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// How many times `needle` occurs in `hay` (not overlapping).
pub fn count(hay: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    let mut n = 0;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        if &hay[i..i + needle.len()] == needle {
            n += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_finds_needles() {
        let body = b"data: {\"method\":\"notifications/progress\"}\n\ndata: {\"method\":\"notifications/progress\"}\n\ndata: {\"result\":{}}";
        assert_eq!(count(body, b"notifications/progress"), 2);
        assert_eq!(count(b"aaaa", b"aa"), 2, "not overlapping");
        assert_eq!(count(b"abc", b""), 0);
        assert!(contains(body, b"\"result\""));
        assert!(!contains(b"ab", b"abc"));
    }

    #[test]
    fn targets_parse_from_the_printed_url() {
        let target = Target::from_url("http://127.0.0.1:4123/mcp\n").expect("url");
        assert_eq!(target.addr.port(), 4123);
        assert_eq!(target.host, "127.0.0.1:4123");
        assert!(Target::from_url("https://127.0.0.1:1/mcp").is_err());
        assert!(Target::from_url("http://localhost/mcp").is_err());
    }
}
