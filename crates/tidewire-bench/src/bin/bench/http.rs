//! MCP over raw HTTP/1.1: one hyper connection per session (or per stateless client), requests
//! written by hand. The session-era wires `initialize` and send `Mcp-Session-Id`; the stateless
//! 2026-07-28 wire ([`Wire::Modern`]) sends each request on its own, its revision and client
//! context in its headers and its `_meta`.

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

/// The stateless revision the modern rows speak, whatever `--protocol` says.
pub const MODERN_VERSION: &str = "2026-07-28";

/// The client context every stateless request carries in its `_meta` (the members, without
/// braces): the revision (equal to [`MODERN_VERSION`]), the capabilities and the client.
const MODERN_META: &str = concat!(
    r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
    r#""io.modelcontextprotocol/clientCapabilities":{},"#,
    r#""io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}"#
);

/// How a server is started and spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Sessions (`initialize`, then `Mcp-Session-Id`), SSE replies.
    Sse,
    /// Sessions, JSON replies (rmcp replies with JSON only without sessions).
    Json,
    /// The stateless 2026-07-28 wire: no `initialize`, no session, no GET; every POST carries
    /// the revision in its headers and its `_meta`.
    Modern,
}

impl Wire {
    /// Every wire, in the order a round runs them.
    pub const ALL: [Wire; 3] = [Wire::Sse, Wire::Json, Wire::Modern];

    /// The group in `--only`, and the part of a row's key that names the wire.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Sse => "sse",
            Wire::Json => "json",
            Wire::Modern => "modern",
        }
    }

    /// What the table calls it.
    pub fn label(self) -> &'static str {
        match self {
            Wire::Sse => "SSE",
            Wire::Json => "JSON",
            Wire::Modern => "stateless 2026-07-28",
        }
    }

    /// What one caller is called in a row's label: a session, or a stateless client.
    pub fn callers(self, n: usize) -> String {
        let one = match self {
            Wire::Sse | Wire::Json => "session",
            Wire::Modern => "client",
        };
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    }

    /// The flag every server binary takes for this wire (none for the default, SSE).
    pub fn server_flag(self) -> Option<&'static str> {
        match self {
            Wire::Sse => None,
            Wire::Json => Some("--json"),
            Wire::Modern => Some("--modern"),
        }
    }
}

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
    read(response).await
}

/// GETs `path` (no MCP headers: `bench-server --counts`'s `/counts`) and reads the whole
/// response.
pub async fn get(conn: &mut Conn, target: &Target, path: &str) -> anyhow::Result<Reply> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(http::header::HOST, target.host.clone())
        .body(Full::new(Bytes::new()))?;
    read(conn.send(request).await?).await
}

/// Reads a response to its end: a JSON body, or an SSE stream until the server ends it.
async fn read(response: Response<Incoming>) -> anyhow::Result<Reply> {
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

    /// Joins the session `id`, opened elsewhere, on a new connection (no `initialize`); its
    /// request ids start at `first_id`, so callers sharing a session never reuse one.
    pub async fn join(target: Arc<Target>, id: HeaderValue, first_id: u64) -> anyhow::Result<Self> {
        let conn = Conn::open(&target).await?;
        Ok(Self {
            conn,
            target,
            id: Some(id),
            next: first_id,
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

/// The first request id of caller `index` of a shared session: each caller counts up from its
/// own multiple of 2^32, so no two of them send the same id in the session (the `initialize`
/// before them used 0).
pub fn shared_first_id(index: usize) -> u64 {
    (index as u64 + 1) << 32
}

/// `connections` callers on ONE session: one `initialize` on the first connection, then that
/// connection and `connections - 1` new keep-alive ones all send its `Mcp-Session-Id`, each with
/// its own range of request ids ([`shared_first_id`]). Fails if the server opens no session.
pub async fn shared_session(
    target: Arc<Target>,
    connections: usize,
) -> anyhow::Result<Vec<Caller>> {
    ensure!(connections > 0, "a shared session needs a connection");
    let mut first = Session::open(target.clone()).await?;
    let id = first
        .id
        .clone()
        .context("initialize gave no session id to share")?;
    first.next = shared_first_id(0);
    let mut callers = Vec::with_capacity(connections);
    callers.push(Caller::Session(first));
    for index in 1..connections {
        let joined = Session::join(target.clone(), id.clone(), shared_first_id(index)).await?;
        callers.push(Caller::Session(joined));
    }
    Ok(callers)
}

/// A stateless (2026-07-28) client on its own connection: no `initialize`, no session id, no
/// GET stream. Each request stands alone; its answer is one JSON body (the response came
/// first) or an SSE stream (notifications, then the response), read to its end either way.
pub struct Stateless {
    conn: Conn,
    target: Arc<Target>,
    next: u64,
}

impl Stateless {
    /// Connects; nothing is sent until the first call.
    pub async fn open(target: Arc<Target>) -> anyhow::Result<Self> {
        let conn = Conn::open(&target).await?;
        Ok(Self {
            conn,
            target,
            next: 1,
        })
    }

    /// One stateless `tools/call echo` round trip.
    pub async fn echo(&mut self) -> anyhow::Result<()> {
        let id = self.next;
        self.next += 1;
        let body = modern_call(id, "echo", r#"{"text":"hello"}"#, false);
        let reply = self.call("echo", body).await?;
        check_modern("echo", &reply)
    }

    /// One stateless `tools/call progress(n)` with a progress token; returns how many progress
    /// notifications came back before the result.
    pub async fn progress(&mut self, n: u64) -> anyhow::Result<usize> {
        let id = self.next;
        self.next += 1;
        let body = modern_call(id, "progress", &format!(r#"{{"n":{n}}}"#), true);
        let reply = self.call("progress", body).await?;
        check_modern("progress", &reply)?;
        Ok(count(&reply.body, b"notifications/progress"))
    }

    async fn call(&mut self, tool: &str, body: String) -> anyhow::Result<Reply> {
        let request = modern_request(&self.target, "tools/call", Some(tool), body.into())?;
        read(self.conn.send(request).await?).await
    }
}

/// A stateless `tools/call` of `tool` with `arguments` (JSON text); its `_meta` carries the
/// client context and, with `progress`, the request id as its progress token.
fn modern_call(id: u64, tool: &str, arguments: &str, progress: bool) -> String {
    if progress {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"progressToken":{id},{MODERN_META}}}}}}}"#
        )
    } else {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{{MODERN_META}}}}}}}"#
        )
    }
}

/// A stateless POST: the revision in `MCP-Protocol-Version`, the method in `Mcp-Method`, and
/// the tool (or prompt, or resource) in `Mcp-Name` when it has one. No session id.
fn modern_request(
    target: &Target,
    method: &str,
    name: Option<&str>,
    body: Bytes,
) -> anyhow::Result<Request<Full<Bytes>>> {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header(http::header::HOST, target.host.clone())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN_VERSION)
        .header("mcp-method", method);
    if let Some(name) = name {
        builder = builder.header("mcp-name", name);
    }
    Ok(builder.body(Full::new(body))?)
}

/// Checks a stateless answer: a success status, no session id, and a complete result (a
/// 2026-07-28 result says so in `resultType`; a session-era answer would not).
fn check_modern(what: &str, reply: &Reply) -> anyhow::Result<()> {
    ensure!(
        reply.status.is_success()
            && contains(&reply.body, b"\"result\"")
            && contains(&reply.body, b"\"resultType\""),
        "stateless {what} failed: {} {}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    ensure!(
        reply.session.is_none(),
        "a stateless {what} was answered with a session id"
    );
    Ok(())
}

/// One caller a cell drives: a session (the session-era wires) or a stateless client.
pub enum Caller {
    /// `initialize`d, with its session id (if the server gave one).
    Session(Session),
    /// No handshake, no session.
    Stateless(Stateless),
}

impl Caller {
    /// Connects, and initializes unless `wire` is stateless.
    pub async fn open(target: Arc<Target>, wire: Wire) -> anyhow::Result<Self> {
        Ok(match wire {
            Wire::Sse | Wire::Json => Self::Session(Session::open(target).await?),
            Wire::Modern => Self::Stateless(Stateless::open(target).await?),
        })
    }

    /// One `tools/call echo` round trip.
    pub async fn echo(&mut self) -> anyhow::Result<()> {
        match self {
            Self::Session(session) => session.echo().await,
            Self::Stateless(client) => client.echo().await,
        }
    }

    /// One `tools/call progress(n)`; returns how many progress notifications came back.
    pub async fn progress(&mut self, n: u64) -> anyhow::Result<usize> {
        match self {
            Self::Session(session) => session.progress(n).await,
            Self::Stateless(client) => client.progress(n).await,
        }
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
    fn stateless_calls_carry_the_client_context() {
        let echo: serde_json::Value =
            serde_json::from_str(&modern_call(3, "echo", r#"{"text":"hello"}"#, false))
                .expect("echo is JSON");
        let meta = &echo["params"]["_meta"];
        assert_eq!(echo["id"], 3);
        assert_eq!(echo["params"]["arguments"]["text"], "hello");
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            MODERN_VERSION
        );
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "bench");
        assert!(meta.get("progressToken").is_none());
        let progress: serde_json::Value =
            serde_json::from_str(&modern_call(4, "progress", r#"{"n":10}"#, true))
                .expect("progress is JSON");
        assert_eq!(progress["params"]["_meta"]["progressToken"], 4);
        assert_eq!(
            progress["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            MODERN_VERSION
        );
    }

    #[test]
    fn stateless_requests_name_method_and_tool() {
        let target = Target::from_url("http://127.0.0.1:4123/mcp").expect("url");
        let request =
            modern_request(&target, "tools/call", Some("echo"), Bytes::new()).expect("request");
        let headers = request.headers();
        assert_eq!(headers["mcp-protocol-version"], MODERN_VERSION);
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers["mcp-name"], "echo");
        assert_eq!(headers[http::header::CONTENT_TYPE], "application/json");
        assert!(headers.get("mcp-session-id").is_none());
    }

    #[test]
    fn stateless_answers_are_json_or_sse() {
        let reply = |body: &'static [u8]| Reply {
            status: StatusCode::OK,
            session: None,
            body: Bytes::from_static(body),
        };
        let json =
            reply(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#);
        assert!(check_modern("echo", &json).is_ok());
        let sse = reply(
            b"data: {\"method\":\"notifications/progress\"}\n\ndata: {\"id\":1,\"result\":{\"resultType\":\"complete\"}}\n\n",
        );
        assert!(check_modern("progress", &sse).is_ok());
        let legacy = reply(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#);
        assert!(check_modern("echo", &legacy).is_err(), "no resultType");
        let mut with_session = reply(br#"{"id":1,"result":{"resultType":"complete"}}"#);
        with_session.session = Some(HeaderValue::from_static("s"));
        assert!(check_modern("echo", &with_session).is_err());
    }

    #[test]
    fn wires_name_their_groups_flags_and_callers() {
        let names: Vec<&str> = Wire::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["sse", "json", "modern"]);
        assert_eq!(Wire::Sse.server_flag(), None);
        assert_eq!(Wire::Modern.server_flag(), Some("--modern"));
        assert_eq!(Wire::Json.callers(1), "1 session");
        assert_eq!(Wire::Modern.callers(32), "32 clients");
    }

    #[test]
    fn shared_callers_never_reuse_a_request_id() {
        // Each caller's range holds 2^32 ids, far more than any run sends.
        let firsts: Vec<u64> = (0..32).map(shared_first_id).collect();
        assert!(firsts[0] > 0, "the initialize's id 0 stays unused");
        assert!(firsts.windows(2).all(|w| w[1] - w[0] == 1 << 32));
        assert!(firsts[31] < 1 << 53, "ids stay exact in a JSON double");
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
