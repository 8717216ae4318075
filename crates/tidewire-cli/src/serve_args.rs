//! The options of `tidewire serve`, apart from what serves them (`serve.rs` for stdio, `http.rs`
//! for HTTP), which both read them.

use std::time::Duration;

use clap::Args;
use tidewire_core::transport::DEFAULT_MAX_MESSAGE_SIZE;
use tidewire_core::version::Eras;
use tidewire_http::server::{EventStoreLimits, HttpConfig};

use crate::duration::{self, Span};

/// The libraries' default idle timeout of a session: 30 minutes, for Streamable HTTP
/// (`HttpConfig`) and legacy HTTP+SSE (`SseConfig`) alike. They publish no constant; a test
/// checks this one against them.
pub(crate) const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long a POST body may take to arrive, unless `--body-read-timeout` says (`HttpConfig`'s
/// default).
pub(crate) const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The libraries' default limit of sessions (and of WebSocket connections): 10,000. They publish
/// no constant; a test checks this one against them.
pub(crate) const MAX_SESSIONS: usize = 10_000;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve one client over this process's stdin and stdout (one JSON-RPC message per line).
    #[arg(long)]
    pub(crate) stdio: bool,

    /// Serve over HTTP on this address, e.g. 127.0.0.1:3000 (port 0 picks a free one):
    /// Streamable HTTP at /mcp, legacy HTTP+SSE at /sse, WebSocket at /ws.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    pub(crate) bind: Option<String>,

    /// HTTP: answer each request with one JSON body instead of an SSE stream (progress, logs
    /// and requests back to the client are then refused for that request).
    #[arg(long)]
    pub(crate) json_response: bool,

    /// HTTP: one-shot sessions (what other SDKs call stateless mode): no session ids, no GET
    /// stream, no requests back to the client; each session-era POST is served on its own.
    /// (The stateless revision 2026-07-28 needs no flag: `--era` decides it.)
    #[arg(long, alias = "stateless")]
    pub(crate) one_shot_sessions: bool,

    /// The largest message accepted or sent, in bytes. A longer input line is answered with a
    /// JSON-RPC error and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE, value_parser = parse_size)]
    pub(crate) max_message_size: usize,

    /// When stdin ends, how long requests still running may take to finish and answer before
    /// the server stops them and exits, in milliseconds (0: stop them at once).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub(crate) eof_grace_ms: u64,

    /// HTTP: a session that has been idle this long ends: a Streamable HTTP session with no
    /// request in flight and no open stream (its id then gets 404), a legacy HTTP+SSE session
    /// whose client has sent nothing and been sent nothing (its stream is closed). Seconds, or
    /// a number with a unit: 500ms, 90s, 30m, 2h.
    #[arg(
        long,
        value_name = "DURATION",
        default_value_t = Span(SESSION_IDLE_TIMEOUT),
        value_parser = duration::parse,
        allow_hyphen_values = true,
    )]
    pub(crate) session_idle_timeout: Span,

    /// HTTP: how long a POST body may take to arrive (waiting for room in the body budget
    /// included); a slower one gets 408. The same bound for a request a replica forwards.
    #[arg(
        long,
        value_name = "DURATION",
        default_value_t = Span(BODY_READ_TIMEOUT),
        value_parser = duration::parse,
        allow_hyphen_values = true,
    )]
    pub(crate) body_read_timeout: Span,

    /// HTTP: the most sessions at once on each transport: Streamable HTTP sessions, legacy
    /// HTTP+SSE streams, WebSocket connections. Past it a new one gets 503 with Retry-After;
    /// the open ones are unaffected.
    #[arg(
        long,
        value_name = "COUNT",
        default_value_t = MAX_SESSIONS,
        value_parser = parse_count,
    )]
    pub(crate) max_sessions: usize,

    /// HTTP: the most POST streams one Streamable HTTP session holds at once (those with a
    /// request in flight, and those kept for resumption after their reader went away).
    #[arg(
        long,
        value_name = "COUNT",
        default_value_t = HttpConfig::DEFAULT_MAX_STREAMS_PER_SESSION,
        value_parser = parse_count,
    )]
    pub(crate) max_streams_per_session: usize,

    /// HTTP: the most bytes of events the Streamable HTTP server keeps, over every session,
    /// so that streams can be resumed (Last-Event-ID); past it the oldest go first.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = EventStoreLimits::DEFAULT_TOTAL_BYTES,
        value_parser = parse_size,
    )]
    pub(crate) event_store_bytes: usize,

    /// Which protocol eras to serve: `dual` (the default) serves the stateless revision
    /// 2026-07-28 (a request carrying its version in _meta) and the session era (initialize,
    /// 2024-11-05 … 2025-11-25) side by side; `modern` only the first, `legacy` only the
    /// second. Legacy HTTP+SSE (/sse) always serves the session era.
    #[arg(long, value_name = "ERA", default_value = "dual", value_parser = parse_era)]
    pub(crate) era: Eras,

    /// Offer the skills under this folder (each folder holding a SKILL.md is a skill, at
    /// skill://<its path below DIR>/SKILL.md) instead of the demo's own.
    #[arg(long, value_name = "DIR")]
    pub(crate) skills: Option<std::path::PathBuf>,

    /// At SIGTERM or SIGINT the server drains: new sessions and stateless requests get 503
    /// with Retry-After (and /readyz turns 503), requests in flight run to their end for up
    /// to this long, then what still runs is cancelled and the process exits 0. Seconds, or
    /// a number with a unit: 500ms, 10s, 2m.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "30s",
        value_parser = duration::parse,
    )]
    pub(crate) drain_timeout: Span,

    /// Export traces and metrics over OTLP/HTTP (JSON) to the collector at this URL, e.g.
    /// http://127.0.0.1:4318 (/v1/traces and /v1/metrics are appended): a span per MCP
    /// request and notification, in OpenTelemetry's MCP conventions, child of the trace
    /// context in its _meta.
    #[arg(long, value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,

    /// Serve the metrics in the Prometheus text format at /metrics on this address (its own
    /// listener, e.g. 127.0.0.1:9464; port 0 picks a free one, named on stderr).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_bind: Option<String>,

    /// How log lines look on stderr: `text` (the default) or `json` (one object per line).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub(crate) log_format: String,

    #[command(flatten)]
    pub(crate) auth: crate::serve_auth::AuthArgs,

    #[command(flatten)]
    pub(crate) scale: crate::serve_redis::RedisArgs,

    /// How long a running task's lease lasts: the server renews it every third of that, and
    /// when a replica sharing the task store dies, its tasks are failed once their lease has
    /// run out. Seconds, or a number with a unit: 500ms, 15s.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15s",
        value_parser = duration::parse,
    )]
    pub(crate) task_lease: Span,
}

fn parse_era(text: &str) -> Result<Eras, String> {
    text.parse()
}

fn parse_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1 byte".to_owned()),
        Ok(size) => Ok(size),
        Err(e) => Err(format!("not a number of bytes: {e}")),
    }
}

/// Parses a limit on how many: a whole number, at least 1.
fn parse_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1".to_owned()),
        Ok(count) => Ok(count),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}
