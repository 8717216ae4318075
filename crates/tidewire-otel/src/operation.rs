//! [`Operation`]: one MCP request or notification, sent or received, as a span and a duration
//! in the MCP conventions.

use std::borrow::Cow;
use std::time::Instant;

use opentelemetry::KeyValue;
use serde_json::Value;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::semconv as sc;

/// Which side of a message the operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Serving a message the peer sent (span kind `SERVER`, `mcp.server.operation.duration`).
    Server,
    /// Sending a message and waiting for its answer (span kind `CLIENT`,
    /// `mcp.client.operation.duration`).
    Client,
}

/// The transport a message travels, as the conventions' `network.*` attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// stdio: `network.transport = pipe`.
    Pipe,
    /// HTTP (Streamable HTTP, legacy HTTP+SSE): `tcp`, `http`.
    Http,
    /// WebSocket: `tcp`, `websocket`.
    WebSocket,
}

impl Network {
    fn transport(self) -> &'static str {
        match self {
            Self::Pipe => "pipe",
            Self::Http | Self::WebSocket => "tcp",
        }
    }

    fn protocol(self) -> Option<&'static str> {
        match self {
            Self::Pipe => None,
            Self::Http => Some("http"),
            Self::WebSocket => Some("websocket"),
        }
    }
}

/// What is known of a message when its operation starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Message<'a> {
    /// Its method.
    pub method: &'a str,
    /// Its params (the target — tool, prompt, resource — and `_meta` are read from them).
    pub params: Option<&'a Value>,
    /// Its JSON-RPC id, for a request.
    pub request_id: Option<&'a tidewire_core::jsonrpc::RequestId>,
    /// The session it belongs to.
    pub session_id: Option<&'a str>,
    /// The protocol revision spoken (a session's); a stateless request's own, named in its
    /// `_meta`, is read from `params` and comes first.
    pub protocol_version: Option<&'a str>,
    /// The transport.
    pub network: Option<Network>,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with a result (or, for a notification, handled).
    Ok,
    /// A tool's result with `isError: true`.
    ToolError,
    /// Answered with a JSON-RPC error of this code.
    Error(i64),
    /// Cancelled before it was answered.
    Cancelled,
    /// Failed without an answer: `timeout`, `closed`, `transport`, `invalid_result`, …
    Failed(&'static str),
}

impl Outcome {
    /// The outcome of a `tools/call` result or any other: `ToolError` when `result` says
    /// `isError`.
    pub fn of_result(method: &str, result: &Value) -> Self {
        if method == "tools/call" && result.get("isError") == Some(&Value::Bool(true)) {
            Self::ToolError
        } else {
            Self::Ok
        }
    }
}

/// One MCP operation: a [`tracing`] span named and attributed as the conventions say
/// (`{mcp.method.name} {target}`), a child of the trace context in the message's `_meta` on
/// the server side, and its duration, recorded when it [`finish`](Self::finish)es — or, when
/// it is dropped unfinished (a handler dropped on a cancel), as [`Outcome::Cancelled`].
///
/// Text a peer chose (a tool name, a URI) is recorded as a string field, which a terminal
/// subscriber prints escaped; it reaches the duration metric only for known methods and for
/// targets that answered (a tool that ran), so a peer cannot make unbounded series.
#[derive(Debug)]
pub struct Operation(Option<Live>);

/// An operation while telemetry is on ([`crate::is_active`]).
#[derive(Debug)]
struct Live {
    span: tracing::Span,
    started: Instant,
    side: Side,
    method: Cow<'static, str>,
    target: Option<(&'static str, String)>,
    protocol_version: Option<Cow<'static, str>>,
    network: Option<Network>,
    finished: bool,
}

impl Drop for Live {
    fn drop(&mut self) {
        if !self.finished {
            self.record(Outcome::Cancelled);
        }
    }
}

/// The span of an operation while telemetry is off.
static NO_SPAN: tracing::Span = tracing::Span::none();

impl Operation {
    /// Starts the operation of `message` on `side`: nothing at all (no span, no allocation)
    /// until telemetry is on ([`crate::activate`], which `Telemetry::install` calls).
    pub fn start(side: Side, message: Message<'_>) -> Self {
        Self(crate::is_active().then(|| Live::start(side, message)))
    }

    /// The span, to run the handler in (`tracing::Instrument`); a disabled one while
    /// telemetry is off.
    pub fn span(&self) -> &tracing::Span {
        self.0.as_ref().map_or(&NO_SPAN, |live| &live.span)
    }

    /// The trace context of this operation's span, for a message it sends (empty while
    /// telemetry is off).
    pub fn context(&self) -> opentelemetry::Context {
        self.0
            .as_ref()
            .map_or_else(opentelemetry::Context::new, |live| live.span.context())
    }

    /// Ends the operation: the outcome on the span (an error sets its status and
    /// `error.type`), and its duration in the side's histogram.
    pub fn finish(self, outcome: Outcome) {
        if let Some(mut live) = self.0 {
            live.finished = true;
            live.record(outcome);
        }
    }
}

impl Live {
    fn start(side: Side, mut message: Message<'_>) -> Self {
        let stateless = message
            .params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(tidewire_core::schema::meta_keys::PROTOCOL_VERSION))
            .and_then(Value::as_str);
        message.protocol_version = stateless.or(message.protocol_version);
        let target = target(message.method, message.params);
        let name = match &target {
            Some((key, value)) if *key != sc::MCP_RESOURCE_URI => {
                format!("{} {value}", message.method)
            }
            _ => message.method.to_owned(),
        };
        // Every attribute known now is given as the span is made (one call into the
        // subscriber, not one per attribute); the outcome's are recorded at the end.
        let of = |key: &str| {
            target
                .as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.as_str())
        };
        let attributes = Attributes {
            tool: of(sc::GEN_AI_TOOL_NAME),
            operation: of(sc::GEN_AI_TOOL_NAME).map(|_| sc::EXECUTE_TOOL),
            prompt: of(sc::GEN_AI_PROMPT_NAME),
            uri: of(sc::MCP_RESOURCE_URI),
            id: message.request_id.map(ToString::to_string),
            session: message.session_id,
            version: message.protocol_version,
            transport: message.network.map(Network::transport),
            protocol: message.network.and_then(Network::protocol),
        };
        let span = match side {
            Side::Server => mcp_span!("mcp.server", "server", name, message.method, attributes),
            Side::Client => mcp_span!("mcp.client", "client", name, message.method, attributes),
        };
        // The trace context in `_meta` is the parent, before the span is first entered: on the
        // server the sender's; on the client one its caller wrote (else the span is a child of
        // the caller's current span, as any `tracing` span).
        let meta = message.params.and_then(|p| p.get("_meta"));
        let parent = crate::propagation::extract(meta);
        {
            use opentelemetry::trace::TraceContextExt as _;
            if parent.span().span_context().is_valid() {
                let _ = span.set_parent(parent);
            }
        }
        Self {
            span,
            started: Instant::now(),
            side,
            method: interned(message.method, sc::METHODS),
            target,
            protocol_version: message.protocol_version.map(|v| interned(v, sc::VERSIONS)),
            network: message.network,
            finished: false,
        }
    }

    fn record(&self, outcome: Outcome) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let error_type = match outcome {
            Outcome::Ok => None,
            Outcome::ToolError => Some(sc::TOOL_ERROR.to_owned()),
            Outcome::Error(code) => Some(code.to_string()),
            Outcome::Cancelled => Some("cancelled".to_owned()),
            Outcome::Failed(kind) => Some(kind.to_owned()),
        };
        if outcome == Outcome::Cancelled {
            let _entered = self.span.enter();
            tracing::info!(target: "tidewire_otel", "notifications/cancelled");
        }
        if let Some(error_type) = &error_type {
            self.span.record(sc::ERROR_TYPE, error_type.as_str());
            self.span.record("otel.status_code", "error");
            if let Outcome::Error(code) = outcome {
                self.span
                    .record(sc::RPC_RESPONSE_STATUS_CODE, code.to_string().as_str());
            }
        }
        let mut attributes = Vec::with_capacity(6);
        // A method the server does not know is not a series of its own.
        let known = !matches!(outcome, Outcome::Error(-32601));
        attributes.push(KeyValue::new(
            sc::MCP_METHOD_NAME,
            if known {
                self.method.clone()
            } else {
                Cow::Borrowed("_OTHER")
            },
        ));
        // A target reaches the metric only when it answered (a tool that ran, a prompt that
        // was found): an unknown name is refused with an error first.
        if let Some((key, value)) = &self.target
            && *key != sc::MCP_RESOURCE_URI
            && matches!(outcome, Outcome::Ok | Outcome::ToolError)
        {
            if *key == sc::GEN_AI_TOOL_NAME {
                attributes.push(KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::EXECUTE_TOOL));
            }
            attributes.push(KeyValue::new(*key, value.clone()));
        }
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new(sc::ERROR_TYPE, error_type));
        }
        if let Some(version) = &self.protocol_version {
            attributes.push(KeyValue::new(sc::MCP_PROTOCOL_VERSION, version.clone()));
        }
        if let Some(network) = self.network {
            attributes.push(KeyValue::new(sc::NETWORK_TRANSPORT, network.transport()));
            if let Some(protocol) = network.protocol() {
                attributes.push(KeyValue::new(sc::NETWORK_PROTOCOL_NAME, protocol));
            }
        }
        let histogram = match self.side {
            Side::Server => crate::metrics::server_operation_duration(),
            Side::Client => crate::metrics::client_operation_duration(),
        };
        histogram.record(elapsed, &attributes);
    }
}

/// A span of tidewire's MCP operations, with every attribute of the conventions: those known
/// from `$a` ([`Attributes`]; `None` records nothing), the outcome's `Empty` until it ends.
/// `tracing` takes a span's name and fields as literals.
macro_rules! mcp_span {
    ($span:literal, $kind:literal, $name:expr, $method:expr, $a:expr) => {
        tracing::info_span!(
            target: "tidewire_otel",
            $span,
            otel.name = $name.as_str(),
            otel.kind = $kind,
            otel.status_code = Empty,
            otel.status_description = Empty,
            mcp.method.name = $method,
            mcp.session.id = $a.session,
            mcp.protocol.version = $a.version,
            mcp.resource.uri = $a.uri,
            jsonrpc.request.id = $a.id.as_deref(),
            gen_ai.tool.name = $a.tool,
            gen_ai.prompt.name = $a.prompt,
            gen_ai.operation.name = $a.operation,
            error.type = Empty,
            rpc.response.status_code = Empty,
            network.transport = $a.transport,
            network.protocol.name = $a.protocol,
        )
    };
}
use mcp_span;

/// `text` as one of the `known` names (no allocation), or a copy of it.
fn interned(text: &str, known: &[&'static str]) -> Cow<'static, str> {
    known
        .iter()
        .find(|k| **k == text)
        .map_or_else(|| Cow::Owned(text.to_owned()), |k| Cow::Borrowed(*k))
}

/// The attributes of a span known when it starts (`None`: not this message's).
struct Attributes<'a> {
    tool: Option<&'a str>,
    operation: Option<&'static str>,
    prompt: Option<&'a str>,
    uri: Option<&'a str>,
    id: Option<String>,
    session: Option<&'a str>,
    version: Option<&'a str>,
    transport: Option<&'static str>,
    protocol: Option<&'static str>,
}

/// The target of a method, as the attribute that names it: the tool, the prompt, the resource.
fn target(method: &str, params: Option<&Value>) -> Option<(&'static str, String)> {
    let params = params?;
    let (key, member) = match method {
        "tools/call" => (sc::GEN_AI_TOOL_NAME, "name"),
        "prompts/get" => (sc::GEN_AI_PROMPT_NAME, "name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            (sc::MCP_RESOURCE_URI, "uri")
        }
        _ => return None,
    };
    let value = params.get(member)?.as_str()?;
    Some((key, tidewire_core::text::excerpt(value)))
}
