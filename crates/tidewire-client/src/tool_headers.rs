//! `x-mcp-header` (2026-07-28): a tool's input parameter mirrored into an `Mcp-Param-<Name>`
//! HTTP header. A tool whose annotations are invalid is dropped from the list the client hands
//! out, as the spec asks of HTTP clients, with the reason logged.

use serde_json::Value;
use tidewire_core::schema::Tool;
use tidewire_core::transport::text::excerpt;

/// Why `tool`'s `x-mcp-header` annotations are invalid, if they are.
pub(crate) fn invalid(tool: &Tool) -> Option<String> {
    let properties = tool.input_schema.get("properties")?.as_object()?;
    let mut seen: Vec<String> = Vec::new();
    for (property, schema) in properties {
        let Some(header) = schema.get("x-mcp-header") else {
            continue;
        };
        let Some(name) = header.as_str().filter(|n| !n.is_empty()) else {
            return Some(format!(
                "{property}: x-mcp-header must be a non-empty string"
            ));
        };
        if !name.bytes().all(is_token_byte) {
            return Some(format!(
                "{property}: x-mcp-header {:?} is not an HTTP token",
                excerpt(name)
            ));
        }
        let kind = schema.get("type").and_then(Value::as_str);
        if !matches!(kind, Some("string" | "integer" | "boolean")) {
            return Some(format!(
                "{property}: x-mcp-header needs a string, integer or boolean parameter"
            ));
        }
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Some(format!(
                "{property}: x-mcp-header {:?} is used twice",
                excerpt(name)
            ));
        }
        seen.push(lower);
    }
    None
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Drops the tools with invalid annotations, logging why.
pub(crate) fn keep_valid(tools: &mut Vec<Tool>) {
    tools.retain(|tool| match invalid(tool) {
        None => true,
        Some(reason) => {
            tracing::warn!(
                tool = %excerpt(&tool.name),
                %reason,
                "dropped a tool whose x-mcp-header annotation is invalid"
            );
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(properties: Value) -> Tool {
        Tool::new(
            "t",
            "d",
            json!({"type": "object", "properties": properties}),
        )
    }

    #[test]
    fn valid_and_invalid_annotations() {
        assert!(
            invalid(&tool(
                json!({"r": {"type": "string", "x-mcp-header": "Region"}})
            ))
            .is_none()
        );
        assert!(
            invalid(&tool(
                json!({"n": {"type": "integer", "x-mcp-header": "N"}})
            ))
            .is_none()
        );
        for bad in [
            json!({"r": {"type": "string", "x-mcp-header": ""}}),
            json!({"r": {"type": "string", "x-mcp-header": "Bad Name"}}),
            json!({"r": {"type": "number", "x-mcp-header": "R"}}),
            json!({"r": {"type": "object", "x-mcp-header": "R"}}),
            json!({"r": {"type": "string", "x-mcp-header": 7}}),
            json!({
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"},
            }),
        ] {
            assert!(invalid(&tool(bad.clone())).is_some(), "{bad}");
        }
    }
}
