//! How `tidewire serve` stops: at SIGTERM or SIGINT it drains (new sessions and stateless
//! requests get 503, `/readyz` turns 503, requests in flight run to their end for up to
//! `--drain-timeout`), then ends its sessions and exits 0.

use std::time::Duration;

use tidewire_server::{Drained, Server};

/// Resolves at the first SIGTERM or SIGINT (Ctrl-C), naming it.
pub(crate) async fn signalled() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => return "SIGTERM",
                    _ = tokio::signal::ctrl_c() => return "SIGINT",
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C drains the server");
            }
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}

/// Drains `server` for up to `deadline`, saying so on stderr (an operator watches it).
pub(crate) async fn drain(server: &Server, signal: &str, deadline: Duration) -> Drained {
    eprintln!(
        "tidewire serve: {signal}: draining: new sessions and stateless requests get 503; \
         {} request(s) in flight have up to {} to finish",
        server.lifecycle().in_flight(),
        crate::duration::Span(deadline)
    );
    let drained = server.drain(deadline).await;
    if drained.cancelled == 0 {
        eprintln!("tidewire serve: drained in {:.1?}; exiting", drained.took);
    } else {
        eprintln!(
            "tidewire serve: the drain timeout passed: {} request(s) still running were \
             cancelled ({} still ran after the grace and were dropped); exiting",
            drained.cancelled, drained.unfinished
        );
    }
    drained
}
