//! `tidewire serve`: the demo server over stdio (`--stdio`) or HTTP (`--bind ADDR`, in
//! `http.rs`).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tidewire_core::session::SessionOptions;
use tidewire_core::transport::Codec;
use tidewire_demo::{DemoStore, MemoryDemoStore};
use tidewire_http::server::{EventStoreLimits, HttpConfig};
use tidewire_server::ServerBuilder;
use tidewire_server::skill::SkillSet;

use crate::duration::Span;
use crate::http;
use crate::serve_args::{BODY_READ_TIMEOUT, MAX_SESSIONS, SESSION_IDLE_TIMEOUT, ServeArgs};

/// Exit status for a command line that cannot be served (usage errors, as clap uses).
const USAGE_ERROR: u8 = 2;

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

pub(crate) fn serve(args: &ServeArgs) -> ExitCode {
    let telemetry = match crate::telemetry::init(args) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            eprintln!("tidewire serve: {message}");
            return ExitCode::FAILURE;
        }
    };
    let status = serve_with(args, telemetry.as_ref());
    // What is batched is exported before the process exits.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    status
}

fn serve_with(args: &ServeArgs, telemetry: Option<&tidewire_otel::Telemetry>) -> ExitCode {
    if let Some(address) = &args.bind {
        return http::serve(address, args, telemetry, |store| demo_builder(args, store));
    }
    if args.scale.redis.is_some() {
        eprintln!("tidewire serve: --redis shares an HTTP server's state: use it with --bind ADDR");
        return ExitCode::from(USAGE_ERROR);
    }
    if args.auth.auth_issuer.is_some() {
        eprintln!("tidewire serve: --auth-issuer protects HTTP endpoints: use it with --bind ADDR");
        return ExitCode::from(USAGE_ERROR);
    }
    if args.json_response || args.one_shot_sessions {
        eprintln!(
            "tidewire serve: --json-response and --one-shot-sessions apply to HTTP: use them with \
             --bind ADDR"
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
    serve_stdio(args, telemetry)
}

fn serve_stdio(args: &ServeArgs, telemetry: Option<&tidewire_otel::Telemetry>) -> ExitCode {
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
    let drain_timeout = args.drain_timeout;
    let builder = match demo_builder(args, Arc::new(MemoryDemoStore::new())) {
        Ok(builder) => builder,
        Err(message) => {
            eprintln!("tidewire serve: {message}");
            return ExitCode::FAILURE;
        }
    };
    let metrics_listener = match crate::telemetry::metrics_listener(args) {
        Ok(listener) => listener,
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
        if telemetry.is_some() {
            crate::telemetry::observe(&server);
        }
        if let (Some(listener), Some(metrics)) = (
            metrics_listener,
            telemetry.and_then(tidewire_otel::Telemetry::prometheus),
        ) {
            crate::telemetry::serve_metrics(listener, metrics);
        }
        let (_peer, driver) = server.serve(tidewire_stdio::server::transport_with(codec));
        tracing::info!(
            max_message_size = codec.max_message_size(),
            "serving the tidewire demo server over stdio"
        );
        let mut driver = std::pin::pin!(driver);
        let signal = tokio::select! {
            ended = &mut driver => return ended,
            signal = crate::shutdown::signalled() => signal,
        };
        // The driver carries the answers of the requests the drain waits for: keep it running.
        let Span(deadline) = drain_timeout;
        tokio::select! {
            _ = crate::shutdown::drain(&server, signal, deadline) => Ok(()),
            ended = &mut driver => ended,
        }
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
