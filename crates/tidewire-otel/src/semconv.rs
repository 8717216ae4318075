//! The names the MCP semantic conventions give (OpenTelemetry's GenAI conventions, `mcp`):
//! attributes, metrics and their bucket boundaries.

/// The method of the message (`tools/call`, `notifications/progress`, …). Required.
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// The session the message belongs to, when there is one.
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// The protocol revision spoken (`2025-11-25`, `2026-07-28`).
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// The URI of the resource a request names (`resources/read`, `resources/subscribe`).
pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
/// The JSON-RPC id of a request (not set for notifications).
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// The tool a `tools/call` names.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The prompt a `prompts/get` names.
pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
/// `execute_tool` on tool calls, unset otherwise.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// Why the operation failed: the JSON-RPC error code as a string (`-32602`), or `tool_error`
/// for a tool result with `isError`.
pub const ERROR_TYPE: &str = "error.type";
/// The JSON-RPC error code of the answer, when it is an error.
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `pipe` (stdio) or `tcp` (HTTP, WebSocket).
pub const NETWORK_TRANSPORT: &str = "network.transport";
/// `http` or `websocket`.
pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";

/// `error.type` of a tool call whose result says `isError`.
pub const TOOL_ERROR: &str = "tool_error";
/// `gen_ai.operation.name` of a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";

/// The server's histogram of operation durations, in seconds.
pub const MCP_SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
/// The client's histogram of operation durations, in seconds.
pub const MCP_CLIENT_OPERATION_DURATION: &str = "mcp.client.operation.duration";
/// The server's histogram of session durations, in seconds.
pub const MCP_SERVER_SESSION_DURATION: &str = "mcp.server.session.duration";
/// The client's histogram of session durations, in seconds.
pub const MCP_CLIENT_SESSION_DURATION: &str = "mcp.client.session.duration";

/// The bucket boundaries the conventions give every MCP duration histogram, in seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The methods of MCP (the conventions' values of `mcp.method.name`, and the 2026-07-28
/// revision's), recorded without a copy.
pub const METHODS: &[&str] = &[
    "tools/call",
    "tools/list",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "initialize",
    "ping",
    "logging/setLevel",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "tasks/update",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/roots/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    "notifications/tasks/status",
];

/// The protocol revisions, recorded without a copy.
pub const VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];
