//! `tidewire serve`: the demo server over stdio (`--stdio`) or HTTP (`--bind ADDR`, in
//! `http.rs`).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tidewire_core::session::SessionOptions;
use tidewire_core::transport::{Codec, DEFAULT_MAX_MESSAGE_SIZE};
use tidewire_core::version::Eras;
use tidewire_demo::{DemoStore, MemoryDemoStore};
use tidewire_http::server::{EventStoreLimits, HttpConfig};
use tidewire_server::ServerBuilder;
use tidewire_server::skill::SkillSet;

use crate::duration::{self, Span};
use crate::http;

/// Exit status for a command line that cannot be served (usage errors, as clap uses).
const USAGE_ERROR: u8 = 2;

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

    /// HTTP: serve statelessly (no sessions, no GET stream, no requests back to the client).
    #[arg(long)]
    pub(crate) stateless: bool,

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

/// The demo server's builder with what the options say of it: its eras and its skills, its
/// peer tools' state in `store`.
pub(crate) fn demo_builder(
    args: &ServeArgs,
    store: Arc<dyn DemoStore>,
) -> Result<ServerBuilder, String> {
    let Span(lease) = args.task_lease;
    let builder = tidewire_demo::demo_builder_with(store)
        .eras(args.era)
        .task_lease(lease);
    let builder = args.auth.guard_tools(builder);
    let Some(dir) = &args.skills else {
        return Ok(builder);
    };
    let skills = SkillSet::from_dir(dir)
        .map_err(|error| format!("cannot offer the skills in {}: {error}", dir.display()))?;
    Ok(builder.skills(skills))
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

pub(crate) fn serve(args: &ServeArgs) -> ExitCode {
    if let Some(address) = &args.bind {
        return http::serve(address, args, |store| demo_builder(args, store));
    }
    if args.scale.redis.is_some() {
        eprintln!("tidewire serve: --redis shares an HTTP server's state: use it with --bind ADDR");
        return ExitCode::from(USAGE_ERROR);
    }
    if args.auth.auth_issuer.is_some() {
        eprintln!("tidewire serve: --auth-issuer protects HTTP endpoints: use it with --bind ADDR");
        return ExitCode::from(USAGE_ERROR);
    }
    if args.json_response || args.stateless {
        eprintln!(
            "tidewire serve: --json-response and --stateless apply to HTTP: use them with --bind ADDR"
        );
        return ExitCode::from(USAGE_ERROR);
    }
    // The HTTP limits differ from their defaults only when given.
    let http_limits = args.session_idle_timeout != Span(SESSION_IDLE_TIMEOUT)
        || args.body_read_timeout != Span(BODY_READ_TIMEOUT)
        || args.max_sessions != MAX_SESSIONS
        || args.max_streams_per_session != HttpConfig::DEFAULT_MAX_STREAMS_PER_SESSION
        || args.event_store_bytes != EventStoreLimits::DEFAULT_TOTAL_BYTES;
    if http_limits {
        eprintln!(
            "tidewire serve: --session-idle-timeout, --body-read-timeout, --max-sessions, \
             --max-streams-per-session and --event-store-bytes apply to HTTP: use them with \
             --bind ADDR"
        );
        return ExitCode::from(USAGE_ERROR);
    }
    if !args.stdio {
        eprintln!(
            "tidewire serve: say how to serve: `--stdio` serves one client over stdin and \
             stdout, `--bind ADDR` (e.g. 127.0.0.1:3000) serves over HTTP."
        );
        return ExitCode::from(USAGE_ERROR);
    }
    serve_stdio(args)
}

fn serve_stdio(args: &ServeArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tidewire serve: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    if std::io::stdin().is_terminal() {
        // A person started it by hand; a client reading stdout never sees this.
        eprintln!(
            "tidewire serve: the demo server is reading JSON-RPC from stdin and answering on \
             stdout (one message per line); end the input (Ctrl-D) to stop it"
        );
    }
    let codec = Codec::new(args.max_message_size);
    let grace = Duration::from_millis(args.eof_grace_ms);
    let builder = match demo_builder(args, Arc::new(MemoryDemoStore::new())) {
        Ok(builder) => builder,
        Err(message) => {
            eprintln!("tidewire serve: {message}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        // When stdin ends, requests still running get `grace` to finish and answer.
        let server = builder
            .session_options(SessionOptions::default().drain_timeout(grace))
            .build();
        let (_peer, driver) = server.serve(tidewire_stdio::server::transport_with(codec));
        tracing::info!(
            max_message_size = codec.max_message_size(),
            "serving the tidewire demo server over stdio"
        );
        driver.await
    });
    // Normally stdin has ended by now. If the session ended another way (say stdout was
    // closed), Tokio's blocking stdin read cannot be interrupted: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => {
            tracing::info!("the client closed the connection; exiting");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(%error, "the stdio connection failed");
            eprintln!("tidewire serve: the stdio connection failed: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use tidewire_sse::server::SseConfig;
    use tidewire_ws::server::WsConfig;

    use super::*;

    /// The defaults printed in `--help` change nothing: the configurations they make are the
    /// libraries' own defaults (as far as their `Debug` shows).
    #[test]
    fn the_defaults_are_the_libraries() {
        let shown = |config: &dyn std::fmt::Debug| format!("{config:?}");
        assert_eq!(
            shown(&HttpConfig::default()),
            shown(
                &HttpConfig::default()
                    .max_sessions(MAX_SESSIONS)
                    .idle_timeout(SESSION_IDLE_TIMEOUT)
                    .max_streams_per_session(HttpConfig::DEFAULT_MAX_STREAMS_PER_SESSION)
                    .event_store_bytes(EventStoreLimits::DEFAULT_TOTAL_BYTES)
            )
        );
        assert_eq!(
            shown(&SseConfig::default()),
            shown(
                &SseConfig::default()
                    .max_sessions(MAX_SESSIONS)
                    .idle_timeout(SESSION_IDLE_TIMEOUT)
            )
        );
        assert_eq!(
            shown(&WsConfig::default()),
            shown(&WsConfig::default().max_sessions(MAX_SESSIONS))
        );
    }
}
