//! `x-mcp-header` (2026-07-28): a tool's input parameter mirrored into an `Mcp-Param-<Name>`
//! HTTP header. A tool whose annotations are invalid is dropped from the list the client hands
//! out, as the spec asks of HTTP clients, with the reason logged; the marks of the others are
//! remembered ([`Marks`]), so a later `tools/call` carries its headers.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use tidewire_core::schema::Tool;
use tidewire_core::stateless::HeaderParam;
use tidewire_core::text::excerpt;

/// Tools whose marks are remembered at most: a server listing more has the first ones' calls
/// carry their headers, and the later ones' not (the server then says `-32020`).
pub(crate) const MAX_TOOLS_REMEMBERED: usize = 4096;

/// The `x-mcp-header` marks of the tools listed so far, by tool name.
#[derive(Debug, Default)]
pub(crate) struct Marks(Mutex<HashMap<String, Vec<HeaderParam>>>);

impl Marks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<HeaderParam>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers the marks of `tools` (valid ones: see [`keep_valid`]).
    pub(crate) fn learn(&self, tools: &[Tool]) {
        let mut known = self.lock();
        for tool in tools {
            let marked = marks_of(tool);
            if marked.is_empty() {
                known.remove(&tool.name);
            } else if known.len() < MAX_TOOLS_REMEMBERED || known.contains_key(&tool.name) {
                known.insert(tool.name.clone(), marked);
            }
        }
    }

    /// The marks of tool `name`, if it was listed with any.
    pub(crate) fn of(&self, name: &str) -> Vec<HeaderParam> {
        self.lock().get(name).cloned().unwrap_or_default()
    }
}

fn marks_of(tool: &Tool) -> Vec<HeaderParam> {
    let Some(properties) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    properties
        .iter()
        .filter_map(|(property, schema)| {
            let header = schema.get("x-mcp-header")?.as_str()?;
            Some(HeaderParam {
                property: property.clone(),
                header: header.to_owned(),
            })
        })
        .collect()
}

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
    fn marks_are_learned_replaced_and_forgotten() {
        let marks = Marks::default();
        marks.learn(&[tool(
            json!({"r": {"type": "string", "x-mcp-header": "Region"}, "q": {"type": "string"}}),
        )]);
        assert_eq!(
            marks.of("t"),
            vec![HeaderParam {
                property: "r".to_owned(),
                header: "Region".to_owned()
            }]
        );
        marks.learn(&[tool(json!({"q": {"type": "string"}}))]);
        assert!(
            marks.of("t").is_empty(),
            "a tool listed without marks has none"
        );
        assert!(marks.of("other").is_empty());
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
