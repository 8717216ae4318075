//! A request's result as the server answers it: a `Value` tree, or a tool's result written once
//! from its type ([`Served::Wire`]), in both eras.
//!
//! A tool's result is the answer most requests get, and the one whose tree costs most (its
//! content blocks, its structured content). It is written straight from [`CallToolResult`] when
//! the wire form is exactly what the tree would have encoded to: in the stateless era with the
//! members every result carries spliced in as bytes made once per server; in the session era
//! when the revision the session negotiated takes the result as it is
//! ([`compat::keeps_tool_result`]). Everything else is a tree.

use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{EncodedResult, ErrorObject};
use tidewire_core::schema::CallToolResult;
use tidewire_core::schema::compat;
use tidewire_core::session::Answer;

use crate::calls::reply;

/// A request's result, as the server made it.
pub(crate) enum Served {
    /// A tool's result, written once from its type.
    Wire {
        /// The result, in wire form.
        encoded: EncodedResult,
        /// The tool said `isError` (telemetry records a tool error).
        #[cfg_attr(not(feature = "otel"), allow(dead_code))]
        tool_error: bool,
    },
    /// Any other result, as a tree.
    Tree(Value),
}

impl Served {
    /// What the engine sends.
    pub(crate) fn into_answer(self) -> Answer {
        match self {
            Self::Wire { encoded, .. } => Answer::Encoded(encoded),
            Self::Tree(result) => Answer::Tree(result),
        }
    }
}

/// A session-era tool result for a session of `version` (`None` before `initialize`): written
/// once when that revision takes it unchanged and it has no member of its own (`extra`) that
/// could repeat one of its fields; a tree, adapted by the engine, otherwise.
pub(crate) fn session_tool_result(
    result: CallToolResult,
    version: Option<ProtocolVersion>,
) -> Result<Served, ErrorObject> {
    let kept =
        version.is_some_and(|v| compat::keeps_tool_result(v, result.structured_content.as_ref()));
    if !kept || !result.extra.is_empty() {
        return reply(result).map(Served::Tree);
    }
    let json = serde_json::to_vec(&result).map_err(ErrorObject::internal)?;
    Ok(Served::Wire {
        encoded: EncodedResult::from_json_text_unchecked(json),
        tool_error: result.is_error == Some(true),
    })
}

/// A stateless tool result in wire form: `result` as one JSON object, `tail` (the members every
/// stateless result carries, written by
/// [`ServerInner::result_tail`](crate::context::ServerInner::result_tail)) spliced in before its
/// closing brace.
pub(crate) fn stateless_tool_result(
    result: &CallToolResult,
    tail: &[u8],
) -> Result<EncodedResult, ErrorObject> {
    let mut out = Vec::with_capacity(128 + tail.len());
    serde_json::to_writer(&mut out, result).map_err(ErrorObject::internal)?;
    if out.pop() != Some(b'}') {
        return Err(ErrorObject::internal("a tool result is not a JSON object"));
    }
    if !tail.is_empty() {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(tail);
    }
    out.push(b'}');
    Ok(EncodedResult::from_json_text_unchecked(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tidewire_core::schema::compat::{PayloadKind, adapt_outgoing};

    use super::*;

    fn results() -> Vec<CallToolResult> {
        let mut with_extra = CallToolResult::text("x");
        with_extra.extra.insert("content".into(), json!("shadowed"));
        vec![
            CallToolResult::text("hello"),
            CallToolResult::error_text("failed"),
            CallToolResult::structured(json!({"n": 1, "s": "\u{1b}"})),
            CallToolResult::structured(json!([1, 2])),
            CallToolResult::success(Vec::new()),
            with_extra,
        ]
    }

    /// In the session era, whatever a result holds and whatever revision the session speaks,
    /// the answer reads back as the tree the engine would have adapted and sent.
    #[test]
    fn a_session_tool_result_reads_back_as_the_adapted_tree() {
        let mut wired = 0;
        for version in ProtocolVersion::ALL.iter().copied().map(Some).chain([None]) {
            for result in results() {
                let mut tree = reply(result.clone()).expect("a tree");
                if let Some(version) = version {
                    adapt_outgoing(version, "tools/call", PayloadKind::Result, &mut tree);
                }
                let sent = match session_tool_result(result.clone(), version).expect("served") {
                    Served::Wire {
                        encoded,
                        tool_error,
                    } => {
                        wired += 1;
                        assert_eq!(tool_error, result.is_error == Some(true));
                        serde_json::from_slice(encoded.as_bytes()).expect("one JSON object")
                    }
                    Served::Tree(mut tree) => {
                        if let Some(version) = version {
                            adapt_outgoing(version, "tools/call", PayloadKind::Result, &mut tree);
                        }
                        tree
                    }
                };
                assert_eq!(sent, tree, "{version:?}: {result:?}");
            }
        }
        assert!(
            wired > 0,
            "the newest revisions take most results in wire form"
        );
    }

    #[test]
    fn a_result_with_members_of_its_own_or_for_an_old_revision_stays_a_tree() {
        let mut with_extra = CallToolResult::text("x");
        with_extra.extra.insert("note".into(), json!(1));
        let newest = Some(ProtocolVersion::V2025_11_25);
        assert!(matches!(
            session_tool_result(with_extra, newest),
            Ok(Served::Tree(_))
        ));
        let structured = CallToolResult::structured(json!({"n": 1}));
        assert!(matches!(
            session_tool_result(structured.clone(), Some(ProtocolVersion::V2025_03_26)),
            Ok(Served::Tree(_))
        ));
        assert!(matches!(
            session_tool_result(structured.clone(), None),
            Ok(Served::Tree(_))
        ));
        assert!(matches!(
            session_tool_result(structured, newest),
            Ok(Served::Wire { .. })
        ));
    }

    #[test]
    fn an_empty_tail_leaves_the_object_as_written() {
        let result = CallToolResult::success(Vec::new());
        let encoded = stateless_tool_result(&result, b"").expect("wire form");
        let read: Value = serde_json::from_slice(encoded.as_bytes()).expect("one JSON object");
        assert_eq!(read, reply(result).expect("a tree"));
    }
}
