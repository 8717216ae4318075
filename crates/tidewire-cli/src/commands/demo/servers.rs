//! The demo server on each transport: started for the walkthrough, stopped after it.

use std::net::SocketAddr;

use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_sse::server::{LegacySse, SseConfig};
use tidewire_ws::server::{WebSocket, WsConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::target::Target;

/// The transports the demo knows, in the order it runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transport {
    Stdio,
    StreamableHttp,
    LegacySse,
    WebSocket,
}

impl Transport {
    pub(super) const ALL: [Self; 4] = [
        Self::Stdio,
        Self::StreamableHttp,
        Self::LegacySse,
        Self::WebSocket,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "Streamable HTTP",
            Self::LegacySse => "legacy HTTP+SSE",
            Self::WebSocket => "WebSocket",
        }
    }
}

/// A demo server that is running, and how to reach it.
#[derive(Debug)]
pub(super) struct Running {
    pub(super) target: Target,
    /// For in-process servers: stops it, and the task serving it.
    stop: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Running {
    pub(super) async fn stop(self) {
        if let Some((stop, task)) = self.stop {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

/// Starts the demo server for `transport`.
pub(super) async fn start(transport: Transport) -> Result<Running, String> {
    match transport {
        Transport::Stdio => {
            // This very program, as `tidewire serve --stdio`; the connection starts it.
            let me = std::env::current_exe()
                .map_err(|e| format!("cannot find this program to start it as the server: {e}"))?;
            Ok(Running {
                target: Target::Stdio {
                    program: me.to_string_lossy().into_owned(),
                    args: vec!["serve".to_owned(), "--stdio".to_owned()],
                },
                stop: None,
            })
        }
        Transport::StreamableHttp => {
            let server = tidewire_demo::demo_server();
            let mcp = StreamableHttp::new(HttpConfig::default(), server);
            let (address, stop) = serve_on_loopback(mcp.router("/mcp"), None).await?;
            Ok(Running {
                target: Target::Http(format!("http://{address}/mcp")),
                stop: Some(stop),
            })
        }
        Transport::LegacySse => {
            let server = tidewire_demo::demo_server();
            let sse = LegacySse::new(SseConfig::default(), server);
            let app = sse.router("/sse", "/messages");
            // An open SSE stream would hold a graceful shutdown forever: end the sessions first.
            let (address, stop) = serve_on_loopback(app, Some(sse)).await?;
            Ok(Running {
                // The client tries Streamable HTTP at this URL first, is refused, and falls back.
                target: Target::Http(format!("http://{address}/sse")),
                stop: Some(stop),
            })
        }
        Transport::WebSocket => {
            let server = tidewire_demo::demo_server();
            let ws = WebSocket::new(WsConfig::default(), server);
            let (address, stop) = serve_on_loopback(ws.router("/ws"), None).await?;
            Ok(Running {
                target: Target::WebSocket(format!("ws://{address}/ws")),
                stop: Some(stop),
            })
        }
    }
}

/// Serves `app` in this process on a free loopback port until stopped.
async fn serve_on_loopback(
    app: axum::Router,
    sse: Option<LegacySse>,
) -> Result<(SocketAddr, (oneshot::Sender<()>, JoinHandle<()>)), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on a loopback port: {e}"))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = tidewire_http::server::serve_until(listener, app, async move {
            let _ = stopped.await;
            if let Some(sse) = sse {
                sse.close_all();
            }
        })
        .await;
    });
    Ok((address, (stop, task)))
}
