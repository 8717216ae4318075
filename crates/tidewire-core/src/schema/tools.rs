//! Tools: `tools/list` and `tools/call`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ContentBlock, Cursor, Icon, JsonObject, Meta, PaginatedParams, TaskMetadata};

/// Hints about a tool's behaviour. They are hints only: a client must not rely on them for
/// safety when the server is not trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy things (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling again with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world (e.g. the web) rather than a closed domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

open_string_enum! {
    /// Whether a tool may be called as a task (2025-11-25).
    pub enum TaskSupport {
        /// Never as a task (the default).
        Forbidden = "forbidden",
        /// With or without a task.
        Optional = "optional",
        /// Only as a task.
        Required = "required",
    }
}

/// How a tool runs (2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecution {
    /// Whether the tool may be called as a task; absent means `forbidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<TaskSupport>,
}

/// A tool the server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The tool's name (1–128 characters from `A-Z a-z 0-9 _ - .` is recommended).
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does; a hint for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema of the arguments; its `type` is `"object"`.
    pub input_schema: JsonObject,
    /// A JSON Schema of `structuredContent` in results (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Behaviour hints (2025-03-26 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Task support (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ToolExecution>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Turns a schema given as a JSON value into an object; anything but an object becomes the
/// schema of an object without declared properties (`{"type": "object"}`).
fn schema_object(schema: Value) -> JsonObject {
    match schema {
        Value::Object(map) => map,
        _ => {
            let mut map = JsonObject::new();
            map.insert("type".to_owned(), Value::from("object"));
            map
        }
    }
}

impl Tool {
    /// A tool with a name, a description and a JSON Schema of its arguments.
    ///
    /// `input_schema` should be an object schema such as
    /// `json!({"type": "object", "properties": {..}})`; a value that is not a JSON object is
    /// replaced by `{"type": "object"}`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: schema_object(input_schema),
            output_schema: None,
            annotations: None,
            execution: None,
            icons: Vec::new(),
            meta: None,
        }
    }

    /// Sets the human-readable title.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the output schema (same rules as the input schema in [`Tool::new`]).
    #[must_use]
    pub fn with_output_schema(mut self, output_schema: Value) -> Self {
        self.output_schema = Some(schema_object(output_schema));
        self
    }

    /// Sets the behaviour hints.
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// The declared task support; `forbidden` when absent.
    pub fn task_support(&self) -> TaskSupport {
        self.execution
            .as_ref()
            .and_then(|e| e.task_support.clone())
            .unwrap_or(TaskSupport::Forbidden)
    }
}

/// Result of `tools/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// This page of tools.
    pub tools: Vec<Tool>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ListToolsResult {
    /// A single, complete page.
    pub fn new(tools: Vec<Tool>) -> Self {
        Self {
            tools,
            ..Self::default()
        }
    }
}

/// Parameters of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool to call.
    pub name: String,
    /// The arguments, matching the tool's input schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Run as a task (2025-11-25); the result is then a
    /// [`CreateTaskResult`](super::CreateTaskResult).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// The client's answers to an `input_required` result, by key (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<JsonObject>,
    /// The state an `input_required` result carried, echoed (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CallToolParams {
    /// Calls `name` without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            arguments: None,
            task: None,
            input_responses: None,
            request_state: None,
            meta: None,
        }
    }

    /// Sets the arguments. A value that is not a JSON object is ignored (the arguments stay
    /// absent).
    #[must_use]
    pub fn with_arguments(mut self, arguments: Value) -> Self {
        if let Value::Object(map) = arguments {
            self.arguments = Some(map);
        }
        self
    }

    /// Reads the params out of their parsed tree, moving each member: the arguments, the
    /// answers and `_meta` stay the maps they were parsed into (serde would copy each into a new
    /// map). The outcome is `serde_json::from_value`'s, errors included: the members are read
    /// in the order serde meets them (the map's own), and unknown ones are ignored.
    ///
    /// # Errors
    /// serde's, when a member has the wrong type or `name` is missing.
    pub fn from_value(params: Value) -> Result<Self, serde_json::Error> {
        let Value::Object(members) = params else {
            return serde_json::from_value(params);
        };
        let mut params = Self::new(String::new());
        let mut named = false;
        for (key, value) in members {
            match key.as_str() {
                "_meta" => params.meta = object(value)?.map(Meta),
                "arguments" => params.arguments = object(value)?,
                "inputResponses" => params.input_responses = object(value)?,
                "name" => {
                    params.name = String::deserialize(value)?;
                    named = true;
                }
                "requestState" => params.request_state = optional(value)?,
                "task" => params.task = optional(value)?,
                _ => {}
            }
        }
        if named {
            Ok(params)
        } else {
            Err(serde::de::Error::missing_field("name"))
        }
    }
}

/// An optional object member, moved out of the tree (`null` is absent, as for serde).
fn object(member: Value) -> Result<Option<JsonObject>, serde_json::Error> {
    match member {
        Value::Object(map) => Ok(Some(map)),
        other => optional(other),
    }
}

/// An optional member of any type, read as serde reads an `Option` member.
fn optional<T: serde::de::DeserializeOwned>(member: Value) -> Result<Option<T>, serde_json::Error> {
    Option::<T>::deserialize(member)
}

/// Result of `tools/call`.
///
/// A failure of the tool itself (including invalid arguments, since 2025-11-25) is reported here
/// with `isError: true`, so the model can see it; protocol errors (unknown tool) are JSON-RPC
/// errors instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// The unstructured result.
    pub content: Vec<ContentBlock>,
    /// The structured result (2025-06-18 and later), matching the tool's output schema. The
    /// handshake revisions require a JSON object; 2026-07-28 allows any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// True when the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CallToolResult {
    /// A successful result with the given content.
    pub fn success(content: Vec<ContentBlock>) -> Self {
        Self {
            content,
            ..Self::default()
        }
    }

    /// A failed result with the given content (`isError: true`).
    pub fn error(content: Vec<ContentBlock>) -> Self {
        Self {
            content,
            is_error: Some(true),
            ..Self::default()
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::success(vec![ContentBlock::text(text)])
    }

    /// A failed result with one text block explaining the failure.
    pub fn error_text(text: impl Into<String>) -> Self {
        Self::error(vec![ContentBlock::text(text)])
    }

    /// A successful structured result. As the specification recommends, the JSON is also given
    /// as a text block for clients that do not read `structuredContent`.
    pub fn structured(value: Value) -> Self {
        let text = value.to_string();
        Self {
            content: vec![ContentBlock::text(text)],
            structured_content: Some(value),
            ..Self::default()
        }
    }

    /// True when `isError` is set.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }

    /// The first text block, if there is one (`CallToolResult::text` makes one; this reads it).
    ///
    /// ```
    /// use tidewire_core::schema::CallToolResult;
    /// assert_eq!(CallToolResult::text("pong").first_text(), Some("pong"));
    /// ```
    pub fn first_text(&self) -> Option<&str> {
        self.content.iter().find_map(ContentBlock::as_text)
    }

    /// Every text block, joined by newlines (empty when there is none).
    pub fn text_content(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        texts.join("\n")
    }
}

impl_has_meta!(Tool, ListToolsResult, CallToolParams, CallToolResult);

request_marker!(
    /// Lists the server's tools (paginated).
    ListTools,
    "tools/list",
    PaginatedParams,
    ListToolsResult
);
request_marker!(
    /// Calls a tool.
    CallTool,
    "tools/call",
    CallToolParams,
    CallToolResult,
    CallToolParams::from_value
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Moving the members out of the tree reads what serde reads: the same params, or the same
    /// error, for well-formed, odd and malformed params alike.
    #[test]
    fn call_params_read_from_the_tree_as_serde_reads_them() {
        let cases = [
            json!({"name": "echo"}),
            json!({"name": "echo", "arguments": {"text": "hi", "n": [1, {"deep": null}]}}),
            json!({
                "name": "echo",
                "arguments": {},
                "task": {"ttl": 60000},
                "inputResponses": {"q": {"action": "accept"}},
                "requestState": "sealed",
                "_meta": {"progressToken": 7, "io.modelcontextprotocol/clientInfo": {"name": "c"}},
                "unknown": [1, 2],
            }),
            json!({"name": "echo", "arguments": null, "task": null, "_meta": null}),
            json!({"name": "echo", "requestState": null, "inputResponses": null}),
            json!({}),
            json!({"arguments": {"a": 1}}),
            json!({"name": 5}),
            json!({"name": null}),
            json!({"name": "echo", "arguments": [1, 2]}),
            json!({"name": "echo", "arguments": "text"}),
            json!({"name": "echo", "_meta": 3}),
            json!({"name": "echo", "task": {"ttl": "soon"}}),
            json!({"name": "echo", "requestState": {}}),
            json!({"name": "echo", "inputResponses": true}),
            json!({"_meta": 1, "name": 2}),
            json!({"arguments": 1, "requestState": 2}),
            json!(["echo"]),
            json!(["echo", {"a": 1}, null, null, null, null]),
            json!("echo"),
            json!(null),
            json!(12),
        ];
        for case in cases {
            let moved = CallToolParams::from_value(case.clone()).map_err(|e| e.to_string());
            let serde =
                serde_json::from_value::<CallToolParams>(case.clone()).map_err(|e| e.to_string());
            assert_eq!(moved, serde, "params {case}");
        }
        // And the call through the method enums takes this path.
        let read = <CallTool as crate::schema::RequestType>::params_from_value(
            json!({"name": "t", "arguments": {"k": "v"}}),
        )
        .expect("well-formed params");
        assert_eq!(read.arguments, json!({"k": "v"}).as_object().cloned());
    }

    #[test]
    fn tool_round_trip() {
        let tool = Tool::new(
            "add",
            "Adds two numbers",
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}),
        )
        .with_title("Add")
        .with_output_schema(json!({"type": "object", "properties": {"sum": {"type": "number"}}}))
        .with_annotations(ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        });
        let v = serde_json::to_value(&tool).expect("ser");
        assert_eq!(v["inputSchema"]["required"], json!(["a"]));
        assert_eq!(v["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(v["title"], json!("Add"));
        assert!(v.get("icons").is_none());
        let back: Tool = serde_json::from_value(v).expect("de");
        assert_eq!(back, tool);
        assert_eq!(back.task_support(), TaskSupport::Forbidden);
    }

    #[test]
    fn non_object_schema_becomes_empty_object_schema() {
        let tool = Tool::new("t", "d", json!(null));
        assert_eq!(Value::Object(tool.input_schema), json!({"type": "object"}));
    }

    #[test]
    fn call_round_trip() {
        let mut p = CallToolParams::new("add").with_arguments(json!({"a": 1}));
        p.task = Some(TaskMetadata { ttl: Some(60_000) });
        let v = serde_json::to_value(&p).expect("ser");
        assert_eq!(
            v,
            json!({"name": "add", "arguments": {"a": 1}, "task": {"ttl": 60000}})
        );
        assert_eq!(serde_json::from_value::<CallToolParams>(v).expect("de"), p);
    }

    #[test]
    fn result_constructors() {
        assert_eq!(
            serde_json::to_value(CallToolResult::text("ok")).expect("ser"),
            json!({"content": [{"type": "text", "text": "ok"}]})
        );
        assert_eq!(
            serde_json::to_value(CallToolResult::error_text("bad")).expect("ser"),
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true})
        );
        let s = CallToolResult::structured(json!({"sum": 3}));
        assert_eq!(
            serde_json::to_value(&s).expect("ser"),
            json!({"content": [{"type": "text", "text": "{\"sum\":3}"}],
                   "structuredContent": {"sum": 3}})
        );
    }

    #[test]
    fn result_keeps_unknown_members_and_blocks() {
        let v = json!({
            "content": [{"type": "text", "text": "a"}, {"type": "video", "url": "x"}],
            "isError": false,
            "resultType": "complete"
        });
        let r: CallToolResult = serde_json::from_value(v.clone()).expect("de");
        assert!(matches!(r.content[1], ContentBlock::Unknown(_)));
        assert_eq!(r.extra.get("resultType"), Some(&json!("complete")));
        assert_eq!(serde_json::to_value(&r).expect("ser"), v);
    }
}
