//! `Mcp-Param-*` headers (2026-07-28, Streamable HTTP): a tool parameter marked `x-mcp-header`
//! in its input schema is mirrored into a header, which must match the body.

use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
use tidewire_core::schema::{JsonObject, Tool};
use tidewire_core::stateless::{RoutingHeaders, header_value};
use tidewire_core::text::excerpt;

/// Checks every `x-mcp-header` parameter of `tool` against its `Mcp-Param-<Name>` header.
///
/// # Errors
/// `-32020` HeaderMismatch when a header is missing for a value the body has, cannot be decoded,
/// or differs from the body.
pub(crate) fn check_params(
    tool: &Tool,
    arguments: Option<&JsonObject>,
    headers: &RoutingHeaders,
) -> Result<(), ErrorObject> {
    let Some(Value::Object(properties)) = tool.input_schema.get("properties") else {
        return Ok(());
    };
    for (property, schema) in properties {
        let Some(name) = schema.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let header = format!("mcp-param-{}", name.to_ascii_lowercase());
        let body = arguments
            .and_then(|a| a.get(property))
            .filter(|v| !v.is_null());
        let Some(body) = body else {
            // An absent value has no header; one sent anyway is not expected, and ignored.
            continue;
        };
        let Some(raw) = headers.get(&header) else {
            return Err(mismatch(format!(
                "the header Mcp-Param-{name} is missing, but the arguments carry {property}"
            )));
        };
        let value = header_value::decode(raw.as_bytes())
            .map_err(|e| mismatch(format!("the header Mcp-Param-{name} cannot be read: {e}")))?;
        if !same(body, &value) {
            return Err(mismatch(format!(
                "the header Mcp-Param-{name} ({:?}) does not match the argument {property}",
                excerpt(&value)
            )));
        }
    }
    Ok(())
}

/// Whether a header value says the same as a body value: strings exactly, integers numerically,
/// booleans as `true` / `false`.
fn same(body: &Value, header: &str) -> bool {
    match body {
        Value::String(s) => s == header,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match (n.as_i64(), header.parse::<i64>()) {
            (Some(a), Ok(b)) => a == b,
            _ => n.as_f64().is_some_and(|a| header.parse::<f64>() == Ok(a)),
        },
        _ => false,
    }
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::HEADER_MISMATCH,
        format!("Header mismatch: {message}"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool() -> Tool {
        Tool::new(
            "t",
            "d",
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "plain": {"type": "string"},
            }}),
        )
    }

    fn check(args: Value, headers: &[(&str, &str)]) -> Result<(), ErrorObject> {
        // As the transport hands them over: names in lower case.
        let headers = headers
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), (*value).to_owned()))
            .collect();
        check_params(&tool(), args.as_object(), &headers)
    }

    #[test]
    fn matching_headers_pass_in_any_encoding() {
        assert!(
            check(
                json!({"region": "Hello"}),
                &[("mcp-param-region", "=?base64?SGVsbG8=?=")]
            )
            .is_ok()
        );
        assert!(
            check(
                json!({"region": "SGVsbG8="}),
                &[("Mcp-Param-Region", "SGVsbG8=")]
            )
            .is_ok()
        );
        assert!(check(json!({"count": 42}), &[("mcp-param-count", "42")]).is_ok());
        assert!(
            check(json!({"plain": "x"}), &[]).is_ok(),
            "no x-mcp-header, no header"
        );
        assert!(
            check(json!({"region": null}), &[]).is_ok(),
            "null: no header expected"
        );
    }

    #[test]
    fn missing_bad_and_different_headers_are_header_mismatches() {
        for (args, headers) in [
            (json!({"region": "test-value"}), vec![]),
            (
                json!({"region": "Hello"}),
                vec![("mcp-param-region", "=?base64?SGVsbG8?=")],
            ),
            (
                json!({"region": "Hello"}),
                vec![("mcp-param-region", "=?base64?SGVs!!!bG8=?=")],
            ),
            (
                json!({"region": "Hello"}),
                vec![("mcp-param-region", "Bye")],
            ),
            (json!({"count": 42}), vec![("mcp-param-count", "43")]),
        ] {
            let error = check(args.clone(), &headers).expect_err("mismatch");
            assert_eq!(error.code, -32020, "{args} {headers:?}");
        }
    }
}
