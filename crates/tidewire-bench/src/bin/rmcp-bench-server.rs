//! The official Rust SDK's (`rmcp`) peer server for the benchmarks, with the same tools and
//! command line as `bench-server`:
//!
//! - `rmcp-bench-server --bind ADDR`: Streamable HTTP at `/mcp` in rmcp's default mode
//!   (sessions, SSE replies); prints `http://ADDR/mcp` once listening.
//! - `rmcp-bench-server --bind ADDR --json`: JSON replies. rmcp offers them only without
//!   sessions (`legacy_session_mode = false`, `json_response = true`), so this mode is stateless.
//! - `rmcp-bench-server --bind ADDR --modern`: for the stateless 2026-07-28 rows. rmcp serves a
//!   POST whose `_meta` carries the 2026-07-28 client context statelessly whatever
//!   `legacy_session_mode` says (it is left on, so sessions are served too, as tidewire's
//!   default server does); `json_response = true` makes a request whose first message is its
//!   response come back as one JSON body (as tidewire answers it), and one that streams
//!   progress first an SSE stream.
//! - `rmcp-bench-server --stdio`: stdio, through `rmcp::transport::stdio_pipes()`, rmcp's
//!   fastest stdio transport: when stdin and stdout are pipes (as the load generator starts it)
//!   it reopens them non-blocking and drives them on tokio's reactor, instead of `stdio()`'s
//!   blocking-thread-pool handles (it falls back to those for anything but a FIFO).
//! - `--counts` (with `--bind`): also serves `GET /counts` for `bench --counts` (see
//!   `tidewire_bench::counting`).
//!
//! The handler implements `ServerHandler::call_tool` by hand (no macros): rmcp's shortest path.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use axum::serve::ListenerExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;

#[derive(Clone)]
struct BenchServer {
    tools: Arc<Vec<Tool>>,
}

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize)]
struct ProgressArgs {
    n: u64,
}

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

impl BenchServer {
    fn new() -> Self {
        let echo = Tool::new(
            "echo",
            "Returns its text.",
            object(serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })),
        );
        let progress = Tool::new(
            "progress",
            "Sends n progress notifications, then returns.",
            object(serde_json::json!({
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 0}},
                "required": ["n"]
            })),
        );
        Self {
            tools: Arc::new(vec![echo, progress]),
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(args: Option<JsonObject>) -> Result<T, ErrorData> {
    serde_json::from_value(serde_json::Value::Object(args.unwrap_or_default()))
        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))
}

impl ServerHandler for BenchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "echo" => {
                let args: EchoArgs = decode(request.arguments)?;
                Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]).into())
            }
            "progress" => {
                let args: ProgressArgs = decode(request.arguments)?;
                if let Some(token) = context.meta.get_progress_token() {
                    let total = args.n as f64;
                    for i in 1..=args.n {
                        let param = ProgressNotificationParam::new(token.clone(), i as f64)
                            .with_total(total);
                        if context.peer.notify_progress(param).await.is_err() {
                            break;
                        }
                    }
                }
                Ok(CallToolResult::success(vec![ContentBlock::text("done")]).into())
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let counting = args.iter().any(|a| a == "--counts");
    let _counting = tidewire_bench::counting::start("rmcp-bench-server", counting);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    if args.iter().any(|a| a == "--stdio") {
        return runtime.block_on(async {
            // Inside the runtime: `stdio_pipes` registers the pipes with its reactor.
            let service = BenchServer::new()
                .serve(rmcp::transport::stdio_pipes())
                .await
                .context("rmcp stdio initialization failed")?;
            service.waiting().await?;
            Ok(())
        });
    }
    let Some(bind) = args
        .iter()
        .position(|a| a == "--bind")
        .and_then(|i| args.get(i + 1))
    else {
        bail!("usage: rmcp-bench-server (--bind ADDR [--json | --modern] [--counts] | --stdio)");
    };
    runtime.block_on(serve(bind, config(&args), counting))
}

/// The Streamable HTTP configuration the command line asks for (see the module docs).
fn config(args: &[String]) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default();
    if args.iter().any(|a| a == "--json") {
        config
            .with_legacy_session_mode(false)
            .with_json_response(true)
    } else if args.iter().any(|a| a == "--modern") {
        config.with_json_response(true)
    } else {
        config
    }
}

async fn serve(
    bind: &str,
    config: StreamableHttpServerConfig,
    counting: bool,
) -> anyhow::Result<()> {
    let server = BenchServer::new();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr()?;
    println!("http://{local}/mcp");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = axum::Router::new().nest_service("/mcp", service);
    let app = if counting {
        tidewire_bench::counting::route(app)
    } else {
        app
    };
    axum::serve(listener, app).await?;
    Ok(())
}
