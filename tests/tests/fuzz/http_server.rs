//! Target: the Streamable HTTP server's request path (headers + body → response).

use super::generators::*;
use super::*;

/// The body limit of the endpoints under test (bodies up to a few hundred KB are generated).
pub(crate) const MAX_BODY: usize = 128 * 1024;
/// The statuses the endpoint may answer with; never 500.
pub(crate) const ALLOWED: &[u16] = &[
    200, 202, 400, 403, 404, 405, 406, 408, 409, 413, 415, 429, 503,
];
pub(crate) const SESSION_ID: &str = "mcp-session-id";
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";

#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    Sse,
    Json,
    Stateless,
}

/// One endpoint per mode, each with its own demo server.
pub(crate) struct Endpoints {
    sse: axum::Router,
    json: axum::Router,
    stateless: axum::Router,
    /// Kept so the session tables live as long as the routers.
    _endpoints: Vec<StreamableHttp>,
}

impl Endpoints {
    fn new() -> Self {
        let make = |config: HttpConfig| {
            let server = tidewire_demo::demo_server();
            let mcp = StreamableHttp::new(config.max_body(MAX_BODY), server);
            (mcp.router("/mcp"), mcp)
        };
        let (sse, a) = make(HttpConfig::default());
        let (json, b) = make(HttpConfig::default().response_mode(ResponseMode::Json));
        let (stateless, c) = make(HttpConfig::default().one_shot_sessions(true));
        Self {
            sse,
            json,
            stateless,
            _endpoints: vec![a, b, c],
        }
    }

    fn router(&self, mode: Mode) -> &axum::Router {
        match mode {
            Mode::Sse => &self.sse,
            Mode::Json => &self.json,
            Mode::Stateless => &self.stateless,
        }
    }
}

/// Which session a request names.
#[derive(Debug, Clone)]
pub(crate) enum SessionChoice {
    Omit,
    /// The session this case opened, if any.
    Real,
    Other(Vec<u8>),
}

#[derive(Debug, Clone)]
pub(crate) struct HttpBody {
    bytes: Vec<u8>,
    /// The id of the one request in the body when the server answers it promptly (not a crawl):
    /// its answer, when 200, is read and must hold the response.
    prompt: Option<RequestId>,
}

#[derive(Debug, Clone)]
pub(crate) struct Step {
    method: Method,
    path: &'static str,
    host: Option<Vec<u8>>,
    accept: Option<Vec<u8>>,
    content_type: Option<Vec<u8>>,
    version: Option<Vec<u8>>,
    session: SessionChoice,
    last_event_id: Option<Vec<u8>>,
    origin: Option<Vec<u8>>,
    /// A `Content-Length` that tells the truth.
    content_length: bool,
    body: HttpBody,
}

impl Step {
    /// A request with every header right, in the case's session.
    fn good(body: HttpBody) -> Self {
        Self {
            method: Method::POST,
            path: "/mcp",
            host: Some(b"127.0.0.1:3000".to_vec()),
            accept: Some(b"application/json, text/event-stream".to_vec()),
            content_type: Some(b"application/json".to_vec()),
            version: Some(b"2025-11-25".to_vec()),
            session: SessionChoice::Real,
            last_event_id: None,
            origin: None,
            content_length: true,
            body,
        }
    }

    fn request(&self, session: Option<&[u8]>) -> Request<Body> {
        let mut request = Request::new(Body::from(self.body.bytes.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = Uri::from_static(self.path);
        let length = self.body.bytes.len().to_string();
        let headers = request.headers_mut();
        let mut set = |name: HeaderName, value: Option<&[u8]>| {
            if let Some(value) = value.and_then(|v| HeaderValue::from_bytes(v).ok()) {
                headers.insert(name, value);
            }
        };
        set(header::HOST, self.host.as_deref());
        set(header::ACCEPT, self.accept.as_deref());
        set(header::CONTENT_TYPE, self.content_type.as_deref());
        set(
            HeaderName::from_static(PROTOCOL_VERSION),
            self.version.as_deref(),
        );
        set(HeaderName::from_static(SESSION_ID), session);
        // The stateless wire's routing headers, from the body (right, unless the body is not
        // what they expect): only with the 2026-07-28 version header.
        if self.version.as_deref() == Some(b"2026-07-28".as_slice())
            && let Ok(body) = serde_json::from_slice::<Value>(&self.body.bytes)
        {
            if let Some(method) = body.get("method").and_then(Value::as_str) {
                set(
                    HeaderName::from_static("mcp-method"),
                    Some(method.as_bytes()),
                );
            }
            let name = body
                .get("params")
                .and_then(|p| p.get("name").or_else(|| p.get("uri")))
                .and_then(Value::as_str);
            if let Some(name) = name {
                let encoded = tidewire_core::stateless::header_value::encode(name);
                set(
                    HeaderName::from_static("mcp-name"),
                    Some(encoded.as_bytes()),
                );
            }
        }
        set(
            HeaderName::from_static("last-event-id"),
            self.last_event_id.as_deref(),
        );
        set(header::ORIGIN, self.origin.as_deref());
        if self.content_length {
            set(header::CONTENT_LENGTH, Some(length.as_bytes()));
        }
        request
    }
}

#[derive(Debug, Clone)]
pub(crate) struct HttpCase {
    mode: Mode,
    /// Start with `initialize` and `notifications/initialized`, all headers right.
    initialize: bool,
    steps: Vec<Step>,
}

pub(crate) const OTHER_METHODS: &[&str] = &[
    "PUT", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "post", "M-SEARCH",
];
pub(crate) const OTHER_PATHS: &[&str] = &[
    "/mcp/",
    "/MCP",
    "/",
    "/mcp?x=1",
    "/mcp?",
    "/mcp%2F",
    "/mcp/../mcp",
    "/sse",
    "/mcp;a=b",
];
pub(crate) const HOSTS: &[&str] = &[
    "127.0.0.1",
    "localhost",
    "localhost:1",
    "LOCALHOST:8080",
    "[::1]:80",
    "evil.example",
    "localhost.evil.example",
    "127.0.0.1.nip.io",
    "",
    " 127.0.0.1 ",
    "[::1",
];
pub(crate) const ACCEPTS: &[&str] = &[
    "*/*",
    "APPLICATION/JSON, TEXT/EVENT-STREAM",
    "application/json;q=0.9, text/event-stream;q=0.1",
    "application/json",
    "text/event-stream",
    "application/*, text/*",
    "",
    ",,,",
    "text/event-stream, application/json; charset=utf-8",
];
pub(crate) const CONTENT_TYPES: &[&str] = &[
    "application/json; charset=utf-8",
    "Application/JSON",
    "text/plain",
    "",
    "application/jsonx",
    "application/json-rpc",
    "multipart/form-data; boundary=x",
];
pub(crate) const VERSIONS: &[&str] = &[
    "2026-07-28",
    "2026-07-28",
    "v999.0.0",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    " 2025-11-25 ",
    "1999-01-01",
    "2025-11-25, 2025-06-18",
    "latest",
];
pub(crate) const ORIGINS: &[&str] = &[
    "http://localhost:3000",
    "http://127.0.0.1",
    "https://evil.example",
    "null",
    "",
    "http://",
    "http://localhost.evil.example",
    "HTTP://LOCALHOST",
];
pub(crate) const EVENT_IDS: &[&str] = &[
    "abc",
    "-",
    "1-",
    "-1",
    "1--1",
    "18446744073709551616-0",
    "0-18446744073709551616",
    "",
];
pub(crate) const PROTOCOL_VERSIONS: &[&str] = &[
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    "1999-01-01",
    "",
];

pub(crate) fn header_byte() -> BoxedStrategy<u8> {
    prop_oneof![
        4 => 0x20u8..0x7F,
        1 => 0x80u8..=0xFF,
        1 => any::<u8>(),
    ]
    .boxed()
}

/// A header value: absent, the usual one, one of `options`, random bytes or huge. Values that
/// are not valid header values are left out when the request is built.
pub(crate) fn header_value(
    absent: u32,
    usual: Option<&'static str>,
    options: &'static [&'static str],
) -> BoxedStrategy<Option<Vec<u8>>> {
    let usual = usual.map(|value| value.as_bytes().to_vec());
    prop_oneof![
        absent => Just(None),
        12 => Just(usual),
        4 => select(options).prop_map(|value| Some(value.as_bytes().to_vec())),
        1 => vec(header_byte(), 0..48).prop_map(Some),
        1 => (1usize..16_384, header_byte()).prop_map(|(n, byte)| Some(vec![byte; n])),
    ]
    .boxed()
}

pub(crate) fn http_method() -> BoxedStrategy<Method> {
    prop_oneof![
        12 => Just(Method::POST),
        2 => Just(Method::GET),
        2 => Just(Method::DELETE),
        1 => select(OTHER_METHODS)
            .prop_map(|m| Method::from_bytes(m.as_bytes()).expect("a method token")),
        1 => regex("[A-Z]{1,10}")
            .prop_map(|m| Method::from_bytes(m.as_bytes()).expect("a method token")),
    ]
    .boxed()
}

pub(crate) fn last_event_id() -> BoxedStrategy<Option<Vec<u8>>> {
    prop_oneof![
        6 => Just(None),
        2 => (0u64..4, 0u64..16).prop_map(|(s, n)| Some(format!("{s}-{n}").into_bytes())),
        1 => any::<(u64, u64)>().prop_map(|(s, n)| Some(format!("{s}-{n}").into_bytes())),
        1 => select(EVENT_IDS).prop_map(|id| Some(id.as_bytes().to_vec())),
        1 => vec(header_byte(), 0..32).prop_map(Some),
    ]
    .boxed()
}

pub(crate) fn session_choice() -> BoxedStrategy<SessionChoice> {
    prop_oneof![
        3 => Just(SessionChoice::Omit),
        6 => Just(SessionChoice::Real),
        1 => regex("[0-9a-f]{32}").prop_map(|id| SessionChoice::Other(id.into_bytes())),
        1 => (1usize..8192).prop_map(|n| SessionChoice::Other(vec![b'a'; n])),
        1 => vec(header_byte(), 0..40).prop_map(SessionChoice::Other),
    ]
    .boxed()
}

pub(crate) fn initialize_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": { "name": "fuzz", "version": "1" }
    })
}

pub(crate) fn tool_call(name: &str, arguments: Value) -> Option<Value> {
    Some(json!({ "name": name, "arguments": arguments }))
}

/// A request's method, params, and whether the server answers it promptly.
pub(crate) fn request_call() -> BoxedStrategy<(String, Option<Value>, bool)> {
    prop_oneof![
        3 => select(PROTOCOL_VERSIONS)
            .prop_map(|v| ("initialize".to_owned(), Some(initialize_params(v)), true)),
        1 => option::of(json_value()).prop_map(|p| ("initialize".to_owned(), p, true)),
        2 => option::of(json_leaf()).prop_map(|p| ("ping".to_owned(), p, true)),
        1 => Just(("tools/list".to_owned(), Some(json!({})), true)),
        3 => text().prop_map(|t| {
            ("tools/call".to_owned(), tool_call("echo", json!({ "text": t })), true)
        }),
        1 => json_value().prop_map(|a| ("tools/call".to_owned(), tool_call("echo", a), true)),
        2 => (vec(small_text(), 0..3), 0u64..20).prop_map(|(urls, delay)| {
            let arguments = json!({ "urls": urls, "delay_ms": delay });
            ("tools/call".to_owned(), tool_call("crawl", arguments), false)
        }),
        1 => small_text().prop_map(|name| {
            let name = format!("no-such-tool-{name}");
            ("tools/call".to_owned(), tool_call(&name, json!({})), true)
        }),
        2 => (text(), option::of(params_value()))
            .prop_map(|(method, params)| (format!("fuzz/{method}"), params, true)),
    ]
    .boxed()
}

/// The `_meta` envelope of a stateless (2026-07-28) request, right or not.
pub(crate) fn stateless_meta() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => Just(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
        })),
        1 => json_value().prop_map(|caps| json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
        })),
        1 => json_leaf().prop_map(|version| json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        })),
        1 => json_object(),
    ]
    .boxed()
}

/// A request and, when the server answers it promptly and its id is an id, that id. A third
/// of them carry a stateless `_meta` envelope.
pub(crate) fn rpc_request() -> BoxedStrategy<(Value, Option<RequestId>)> {
    (
        id_value(),
        request_call(),
        option::weighted(0.33, stateless_meta()),
    )
        .prop_map(|(id, (method, mut params, prompt), meta)| {
            if let Some(meta) = meta {
                match &mut params {
                    Some(Value::Object(map)) => {
                        map.insert("_meta".to_owned(), meta);
                    }
                    None => params = Some(json!({ "_meta": meta })),
                    Some(_) => {}
                }
            }
            let prompt = if prompt {
                RequestId::from_json(&id)
            } else {
                None
            };
            let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
            if let Some(params) = params {
                message["params"] = params;
            }
            (message, prompt)
        })
        .boxed()
}

pub(crate) fn rpc_notification() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => Just(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })),
        2 => (id_value(), small_text()).prop_map(|(id, reason)| json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": reason }
        })),
        1 => (id_value(), json_leaf()).prop_map(|(token, progress)| json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": { "progressToken": token, "progress": progress }
        })),
        1 => message_value(),
    ]
    .boxed()
}

pub(crate) fn rpc_response() -> BoxedStrategy<Value> {
    prop_oneof![
        (id_value(), json_value())
            .prop_map(|(id, result)| json!({ "jsonrpc": "2.0", "id": id, "result": result })),
        (id_value(), error_value())
            .prop_map(|(id, error)| json!({ "jsonrpc": "2.0", "id": id, "error": error })),
    ]
    .boxed()
}

pub(crate) fn json_body(value: &Value) -> HttpBody {
    HttpBody {
        bytes: value.to_string().into_bytes(),
        prompt: None,
    }
}

pub(crate) fn http_body() -> BoxedStrategy<HttpBody> {
    let any_message = prop_oneof![
        rpc_request().prop_map(|(value, _)| value),
        rpc_notification(),
        rpc_response(),
    ];
    prop_oneof![
        6 => rpc_request().prop_map(|(value, prompt)| HttpBody {
            bytes: value.to_string().into_bytes(),
            prompt,
        }),
        2 => rpc_notification().prop_map(|value| json_body(&value)),
        1 => rpc_response().prop_map(|value| json_body(&value)),
        1 => vec(any_message, 0..4).prop_map(|items| json_body(&Value::Array(items))),
        1 => codec_input().prop_map(|input| HttpBody { bytes: input.bytes(), prompt: None }),
        1 => Just(HttpBody { bytes: Vec::new(), prompt: None }),
    ]
    .boxed()
}

pub(crate) fn step() -> BoxedStrategy<Step> {
    let path = prop_oneof![10 => Just("/mcp"), 1 => select(OTHER_PATHS)];
    (
        http_method(),
        path,
        header_value(1, Some("127.0.0.1:3000"), HOSTS),
        header_value(1, Some("application/json, text/event-stream"), ACCEPTS),
        header_value(1, Some("application/json"), CONTENT_TYPES),
        header_value(4, Some("2025-11-25"), VERSIONS),
        session_choice(),
        last_event_id(),
        header_value(24, None, ORIGINS),
        proptest::bool::weighted(0.5),
        http_body(),
    )
        .prop_map(
            |(
                method,
                path,
                host,
                accept,
                content_type,
                version,
                session,
                last_event_id,
                origin,
                content_length,
                body,
            )| Step {
                method,
                path,
                host,
                accept,
                content_type,
                version,
                session,
                last_event_id,
                origin,
                content_length,
                body,
            },
        )
        .boxed()
}

pub(crate) fn http_case() -> impl Strategy<Value = HttpCase> {
    let mode = prop_oneof![
        4 => Just(Mode::Sse),
        1 => Just(Mode::Json),
        1 => Just(Mode::Stateless),
    ];
    (mode, any::<bool>(), vec(step(), 1..4)).prop_map(|(mode, initialize, steps)| HttpCase {
        mode,
        initialize,
        steps,
    })
}

pub(crate) type HttpResponse = axum::response::Response;

async fn exchange(
    router: &axum::Router,
    request: Request<Body>,
) -> Result<HttpResponse, TestCaseError> {
    match timeout(WAIT, router.clone().oneshot(request)).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(never)) => match never {},
        Err(_) => Err(fail(format!("no response within {WAIT:?}"))),
    }
}

async fn read_body(response: HttpResponse) -> Result<Bytes, TestCaseError> {
    match timeout(WAIT, axum::body::to_bytes(response.into_body(), 16 << 20)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(fail(format!("the body broke off: {e}"))),
        Err(_) => Err(fail(format!("the body did not end within {WAIT:?}"))),
    }
}

pub(crate) fn header_text(
    response: &HttpResponse,
    name: impl header::AsHeaderName,
) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The JSON-RPC messages of a 200 answer: the data of each SSE event, or the JSON body.
pub(crate) fn replies(content_type: &str, body: &[u8]) -> Result<Vec<Value>, TestCaseError> {
    if content_type.starts_with("text/event-stream") {
        let mut out = Vec::new();
        for line in body.split(|b| *b == b'\n') {
            if let Some(data) = line.strip_prefix(b"data: ")
                && !data.is_empty()
            {
                let value: Value = serde_json::from_slice(data).map_err(|e| {
                    let data = String::from_utf8_lossy(data);
                    fail(format!("SSE data that is not JSON ({e}): {data}"))
                })?;
                out.push(value);
            }
        }
        Ok(out)
    } else {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            let body = String::from_utf8_lossy(body);
            fail(format!("a 200 body that is not JSON ({e}): {body}"))
        })?;
        Ok(match value {
            Value::Array(items) => items,
            other => vec![other],
        })
    }
}

/// A refusal's body, when there is one, is a JSON-RPC error response.
pub(crate) fn check_error_body(status: StatusCode, body: &[u8]) -> Result<(), TestCaseError> {
    if body.is_empty() {
        return Ok(());
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let body = String::from_utf8_lossy(body);
        fail(format!(
            "{status} with a body that is not JSON ({e}): {body}"
        ))
    })?;
    let error = &value["error"];
    let ok = value["jsonrpc"] == "2.0"
        && value
            .get("id")
            .is_some_and(|id| id.is_null() || RequestId::from_json(id).is_some())
        && value.get("result").is_none()
        && error["code"].is_i64()
        && error["message"].is_string();
    prop_assert!(
        ok,
        "{status} with a body that is no JSON-RPC error: {value}"
    );
    Ok(())
}

/// Sends one step and checks its answer; notes a session the answer opens.
async fn http_step(
    router: &axum::Router,
    step: &Step,
    real: &mut Option<String>,
    opened: &mut Vec<String>,
) -> Result<(), TestCaseError> {
    let session = match &step.session {
        SessionChoice::Omit => None,
        SessionChoice::Real => real.as_ref().map(|id| id.as_bytes().to_vec()),
        SessionChoice::Other(id) => Some(id.clone()),
    };
    let response = exchange(router, step.request(session.as_deref())).await?;
    let status = response.status();
    prop_assert!(
        ALLOWED.contains(&status.as_u16()),
        "status {status} for {step:?}"
    );
    if let Some(id) = header_text(&response, SESSION_ID) {
        opened.push(id.clone());
        *real = Some(id);
    }
    let content_type = header_text(&response, header::CONTENT_TYPE).unwrap_or_default();
    if !status.is_success() {
        let body = read_body(response).await?;
        return check_error_body(status, &body);
    }
    if status == StatusCode::ACCEPTED {
        let body = read_body(response).await?;
        prop_assert!(body.is_empty(), "202 with a body: {body:?}");
        return Ok(());
    }
    if let Some(id) = &step.body.prompt
        && step.method == Method::POST
        && status == StatusCode::OK
    {
        let body = read_body(response).await?;
        let messages = replies(&content_type, &body)?;
        let id = id.to_json();
        prop_assert!(
            messages
                .iter()
                .any(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some())),
            "the answer to request {id} holds no response to it: {messages:?}"
        );
    }
    // Anything else (a GET stream, a crawl's stream) is dropped unread.
    Ok(())
}

async fn http_run(endpoints: &Endpoints, case: &HttpCase) -> Result<(), TestCaseError> {
    let router = endpoints.router(case.mode);
    let mut prefix = Vec::new();
    if case.initialize {
        prefix.push(Step::good(HttpBody {
            bytes: json!({
                "jsonrpc": "2.0",
                "id": "fuzz-init",
                "method": "initialize",
                "params": initialize_params("2025-11-25")
            })
            .to_string()
            .into_bytes(),
            prompt: Some(RequestId::from("fuzz-init")),
        }));
        prefix.push(Step::good(json_body(
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        )));
    }
    let mut real = None;
    let mut opened = Vec::new();
    let mut outcome = Ok(());
    for step in prefix.iter().chain(&case.steps) {
        outcome = http_step(router, step, &mut real, &mut opened).await;
        if outcome.is_err() {
            break;
        }
    }
    // Not part of the property: end the sessions this case opened, so a long run never fills
    // the session table.
    for id in opened {
        let mut delete = Step::good(HttpBody {
            bytes: Vec::new(),
            prompt: None,
        });
        delete.method = Method::DELETE;
        let _ = exchange(router, delete.request(Some(id.as_bytes()))).await;
    }
    outcome
}

/// The endpoint still serves a newcomer: `initialize`, `initialized`, then `echo`.
async fn http_still_serving(router: &axum::Router) -> Result<(), TestCaseError> {
    let initialize = Step::good(HttpBody {
        bytes: json!({
            "jsonrpc": "2.0",
            "id": "health",
            "method": "initialize",
            "params": initialize_params("2025-11-25")
        })
        .to_string()
        .into_bytes(),
        prompt: None,
    });
    let response = exchange(router, initialize.request(None)).await?;
    prop_assert_eq!(response.status(), StatusCode::OK, "initialize");
    let session = header_text(&response, SESSION_ID);
    let content_type = header_text(&response, header::CONTENT_TYPE).unwrap_or_default();
    let messages = replies(&content_type, &read_body(response).await?)?;
    prop_assert!(
        messages
            .iter()
            .any(|m| m["id"] == "health" && m.get("result").is_some()),
        "no initialize result: {messages:?}"
    );
    let session = session.as_deref().map(str::as_bytes);

    let initialized = Step::good(json_body(
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    ));
    let response = exchange(router, initialized.request(session)).await?;
    prop_assert_eq!(response.status(), StatusCode::ACCEPTED, "initialized");

    let echo = Step::good(json_body(&json!({
        "jsonrpc": "2.0",
        "id": "health-echo",
        "method": "tools/call",
        "params": { "name": "echo", "arguments": { "text": "still serving" } }
    })));
    let response = exchange(router, echo.request(session)).await?;
    prop_assert_eq!(response.status(), StatusCode::OK, "echo");
    let content_type = header_text(&response, header::CONTENT_TYPE).unwrap_or_default();
    let messages = replies(&content_type, &read_body(response).await?)?;
    prop_assert!(
        messages
            .iter()
            .any(|m| m["id"] == "health-echo" && m["result"].to_string().contains("still serving")),
        "no echo result: {messages:?}"
    );
    Ok(())
}

#[test]
fn http_server() {
    const TARGET: &str = "http_server";
    let runtime = fuzz::runtime(TARGET);
    let endpoints = runtime.block_on(async { Endpoints::new() });
    fuzz::run(TARGET, http_case(), |case| {
        server_case(&runtime, TARGET, http_run(&endpoints, &case))
    });
    for mode in [Mode::Sse, Mode::Json, Mode::Stateless] {
        let router = endpoints.router(mode);
        let outcome = within(&runtime, CASE_LIMIT, http_still_serving(router))
            .unwrap_or_else(|_| Err(fail(format!("over {CASE_LIMIT:?}"))));
        if let Err(e) = outcome {
            panic!("after the run, the {mode:?} endpoint no longer serves a newcomer: {e}");
        }
    }
    assert_eq!(fuzz::worker_panics(TARGET), 0, "server tasks panicked");
}
