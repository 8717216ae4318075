//! The ceiling: what answering the benchmark's requests costs with no MCP machinery at all.
//!
//! - `ceiling-server --bind ADDR [--json]`: one plain axum handler at `/mcp` that decodes the
//!   JSON-RPC body into a typed struct and answers `initialize`, `tools/list` and
//!   `tools/call` (`echo`, `progress`) as an MCP server would, as one SSE event (or a JSON body
//!   with `--json`); notifications get 202, GET an SSE stream that stays open, DELETE 200. No
//!   session table, no event ids, no resumability, no checks.
//! - A stateless 2026-07-28 request (its `_meta` names the revision) is answered the same way
//!   with no session id and `"resultType":"complete"` in its result: one JSON body, whatever the
//!   mode, except `progress`, which streams its notifications and then the response as SSE.
//!   Such a request is told by its body, so `--modern` (which the load generator passes for
//!   those rows) changes nothing.
//! - `ceiling-server --stdio`: a blocking line-in/line-out loop over stdin/stdout.
//! - `--counts` (with `--bind`): also serves `GET /counts` for `bench --counts` (see
//!   `tidewire_bench::counting`).

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, bail};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, Method, Response, StatusCode, header};
use axum::serve::ListenerExt;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    method: String,
    #[serde(default)]
    params: Option<Params>,
}

#[derive(Deserialize)]
struct Params {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Arguments>,
    #[serde(default, rename = "_meta")]
    meta: Option<Meta>,
    #[serde(default, rename = "protocolVersion")]
    protocol_version: Option<String>,
}

#[derive(Deserialize)]
struct Arguments {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    n: Option<u64>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<Value>,
    /// Present on a stateless (2026-07-28) request only.
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<String>,
}

/// What to send back for one message.
enum Answer {
    /// A notification or a response: nothing.
    Nothing,
    /// One JSON-RPC response; `initialize` also opens a session, and `modern` (a stateless
    /// 2026-07-28 request) makes it a JSON body whatever the mode.
    Reply {
        body: String,
        initialize: bool,
        modern: bool,
    },
    /// `progress`: `n` notifications to `token`, then the response with `id` (with
    /// `resultType` when `modern`).
    Progress {
        id: Value,
        token: Value,
        n: u64,
        modern: bool,
    },
}

/// A response; a 2026-07-28 result (`modern`) also says it is complete.
fn result(id: &Value, mut result: Value, modern: bool) -> String {
    if modern && let Value::Object(map) = &mut result {
        map.insert("resultType".to_owned(), Value::from("complete"));
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn text_result(id: &Value, text: &str, modern: bool) -> String {
    result(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": false}),
        modern,
    )
}

fn answer(body: &[u8]) -> Answer {
    let message: Incoming = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => {
            let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": e.to_string()}});
            return Answer::Reply {
                body: body.to_string(),
                initialize: false,
                modern: false,
            };
        }
    };
    let Some(id) = message.id else {
        return Answer::Nothing;
    };
    let params = message.params;
    let modern = params
        .as_ref()
        .and_then(|p| p.meta.as_ref())
        .is_some_and(|m| m.protocol_version.is_some());
    match message.method.as_str() {
        "initialize" => {
            let version = params
                .and_then(|p| p.protocol_version)
                .unwrap_or_else(|| "2025-06-18".to_owned());
            let body = result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench", "version": "0"}
                }),
                false,
            );
            Answer::Reply {
                body,
                initialize: true,
                modern: false,
            }
        }
        "tools/list" => Answer::Reply {
            body: result(
                &id,
                json!({"tools": [
                    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                    {"name": "progress", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
                ]}),
                modern,
            ),
            initialize: false,
            modern,
        },
        "tools/call" => {
            let params = params.unwrap_or(Params {
                name: None,
                arguments: None,
                meta: None,
                protocol_version: None,
            });
            let args = params.arguments.unwrap_or(Arguments {
                text: None,
                n: None,
            });
            match params.name.as_deref() {
                Some("progress") => Answer::Progress {
                    id,
                    token: params
                        .meta
                        .and_then(|m| m.progress_token)
                        .unwrap_or(Value::Null),
                    n: args.n.unwrap_or(0),
                    modern,
                },
                _ => Answer::Reply {
                    body: text_result(&id, args.text.as_deref().unwrap_or(""), modern),
                    initialize: false,
                    modern,
                },
            }
        }
        _ => Answer::Reply {
            body: result(&id, json!({}), modern),
            initialize: false,
            modern,
        },
    }
}

fn progress_line(token: &Value, i: u64, n: u64) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
           "params": {"progressToken": token, "progress": i, "total": n}})
    .to_string()
}

/// Progress events per write.
const PROGRESS_BATCH: u64 = 64;

fn sse_event(data: &str) -> Bytes {
    Bytes::from(format!("event: message\ndata: {data}\n\n"))
}

struct Ceiling {
    json: bool,
    next_session: AtomicU64,
}

async fn endpoint(
    State(state): State<std::sync::Arc<Ceiling>>,
    method: Method,
    body: Bytes,
) -> Response<Body> {
    let mut response = match method {
        Method::POST => post(&state, &body),
        Method::GET => {
            // The standalone stream: open, and idle.
            let mut r = Response::new(Body::from_stream(futures::stream::pending::<
                Result<Bytes, Infallible>,
            >()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            r
        }
        _ => Response::new(Body::empty()),
    };
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache"));
    response
}

fn post(state: &Ceiling, body: &[u8]) -> Response<Body> {
    let (mut response, initialize) = match answer(body) {
        Answer::Nothing => {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::ACCEPTED;
            return r;
        }
        Answer::Reply {
            body,
            initialize,
            modern,
        } if state.json || modern => {
            let mut r = Response::new(Body::from(body));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            (r, initialize)
        }
        Answer::Reply {
            body, initialize, ..
        } => (sse(Body::from(sse_event(&body))), initialize),
        Answer::Progress {
            id,
            token,
            n,
            modern,
        } => {
            let done = sse_event(&text_result(&id, "done", modern));
            // Events are written in batches: the ceiling coalesces writes as any server could.
            let events = (1..=n)
                .step_by(PROGRESS_BATCH as usize)
                .map(move |from| {
                    let mut batch = String::new();
                    for i in from..=(from + PROGRESS_BATCH - 1).min(n) {
                        batch.push_str("event: message\ndata: ");
                        batch.push_str(&progress_line(&token, i, n));
                        batch.push_str("\n\n");
                    }
                    Ok::<_, Infallible>(Bytes::from(batch))
                })
                .chain(std::iter::once(Ok(done)));
            (sse(Body::from_stream(futures::stream::iter(events))), false)
        }
    };
    if initialize {
        let id = state.next_session.fetch_add(1, Ordering::Relaxed);
        if let Ok(value) = HeaderValue::from_str(&format!("ceiling-{id}")) {
            response.headers_mut().insert("mcp-session-id", value);
        }
    }
    response
}

fn sse(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

/// The stdio ceiling: read a line, answer it, flush when no more input is buffered.
fn stdio() -> anyhow::Result<()> {
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin());
    let mut output = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        match answer(&line) {
            Answer::Nothing => {}
            Answer::Reply { body, .. } => {
                output.write_all(body.as_bytes())?;
                output.write_all(b"\n")?;
            }
            Answer::Progress {
                id,
                token,
                n,
                modern,
            } => {
                for i in 1..=n {
                    output.write_all(progress_line(&token, i, n).as_bytes())?;
                    output.write_all(b"\n")?;
                }
                output.write_all(text_result(&id, "done", modern).as_bytes())?;
                output.write_all(b"\n")?;
            }
        }
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--stdio") {
        return stdio();
    }
    let counting = args.iter().any(|a| a == "--counts");
    let _counting = tidewire_bench::counting::start("ceiling-server", counting);
    let Some(bind) = args
        .iter()
        .position(|a| a == "--bind")
        .and_then(|i| args.get(i + 1))
        .cloned()
    else {
        bail!("usage: ceiling-server (--bind ADDR [--json | --modern] [--counts] | --stdio)");
    };
    let json = args.iter().any(|a| a == "--json");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&bind)
            .await
            .with_context(|| format!("cannot listen on {bind}"))?;
        let local = listener.local_addr()?;
        println!("http://{local}/mcp");
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let state = std::sync::Arc::new(Ceiling {
            json,
            next_session: AtomicU64::new(1),
        });
        let app = axum::Router::new()
            .route("/mcp", axum::routing::any(endpoint))
            .with_state(state);
        let app = if counting {
            tidewire_bench::counting::route(app)
        } else {
            app
        };
        axum::serve(listener, app).await?;
        Ok(())
    })
}
