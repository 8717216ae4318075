//! Adapting outgoing messages to the revision a peer negotiated.
//!
//! tidewire's types model 2025-11-25. When the session negotiated an older revision, call
//! [`adapt_outgoing`] on the serialised params or result before sending it.
//!
//! # What must change, and what need not
//!
//! None of the official JSON schemas (2024-11-05 … 2025-11-25) sets
//! `additionalProperties: false`, so a member an older revision does not define (`title`,
//! `icons`, `_meta`, `annotations`, `execution`, `task`, `lastModified`, `mode`, …) is still
//! valid there and is simply ignored by the peer. Those are left alone. What an older schema
//! does reject are values outside a closed set (the `type` of a content block) and changes of
//! shape (a list of sampling blocks where one block was expected). Those are rewritten here, plus
//! three members whose meaning would be lost or misleading for an older peer:
//!
//! | revision before | where | rewrite |
//! |---|---|---|
//! | 2025-03-26 | `notifications/progress` params | `message` is removed |
//! | 2025-03-26 | content of `tools/call` and `prompts/get` results, sampling messages and results | an `audio` block becomes a `text` block saying that audio was left out |
//! | 2025-06-18 | content of `tools/call` and `prompts/get` results | a `resource_link` block becomes a `text` block naming the link and its URI |
//! | 2025-06-18 | `tools/call` result | `structuredContent` is removed; if no text block is left, its JSON is added as one (what the specification recommends servers send anyway) |
//! | 2025-06-18 | `tools/list` result | `outputSchema` is removed from each tool (its results carry no `structuredContent` there) |
//! | 2025-11-25 | `sampling/createMessage` params | a message whose `content` is a list is split into one message per block, same role (an empty list drops the message) |
//! | 2025-11-25 | `sampling/createMessage` result | a one-element `content` list is unwrapped; a longer list becomes one text block joining the texts when all blocks are text, otherwise its first block |
//! | 2026-07-28 | `tools/call` result | a `structuredContent` that is not an object (allowed only from 2026-07-28) is treated as above |
//!
//! Not adapted, because no faithful older form exists and the specification gates them on
//! capabilities that only exist in 2025-11-25 (a session that checks the peer's capabilities
//! never sends them to an older peer): `tool_use`/`tool_result` sampling blocks and sampling
//! `tools`; URL-mode elicitation and multi-select form fields; list-valued elicitation answers;
//! task-augmented requests and the `tasks/*` methods. A `notifications/cancelled` without
//! `requestId` (allowed only in 2025-11-25, for tasks) is not adapted either. Methods an older
//! revision lacks altogether (e.g. `elicitation/create` before 2025-06-18) must not be sent; this
//! module does not filter them.

use serde_json::{Map, Value};

use crate::version::ProtocolVersion;

/// Which part of a message is being adapted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadKind {
    /// The `params` of a request or a notification.
    Params,
    /// The `result` of a successful response (the method is the request's).
    Result,
}

/// Rewrites `value` (the params or the result of `method`, as sent with tidewire's types) so that
/// a peer that negotiated `version` accepts it. See the [module documentation](self) for the
/// rules. Newer revisions and unknown methods are left unchanged.
pub fn adapt_outgoing(
    version: ProtocolVersion,
    method: &str,
    kind: PayloadKind,
    value: &mut Value,
) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    match (method, kind) {
        ("notifications/progress", PayloadKind::Params) if !version.has_progress_message() => {
            obj.remove("message");
        }
        ("tools/call", PayloadKind::Result) => {
            if keeps_tool_result(version, obj.get("structuredContent")) {
                return;
            }
            if let Some(Value::Array(blocks)) = obj.get_mut("content") {
                adapt_blocks(version, blocks);
            }
            adapt_structured_content(version, obj);
        }
        ("tools/list", PayloadKind::Result) if !version.has_structured_output() => {
            if let Some(Value::Array(tools)) = obj.get_mut("tools") {
                for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                    tool.remove("outputSchema");
                }
            }
        }
        ("prompts/get", PayloadKind::Result) => {
            if let Some(Value::Array(messages)) = obj.get_mut("messages") {
                for message in messages.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(block) = message.get_mut("content") {
                        adapt_block(version, block);
                    }
                }
            }
        }
        ("sampling/createMessage", PayloadKind::Params) => {
            if let Some(Value::Array(messages)) = obj.get_mut("messages") {
                adapt_sampling_messages(version, messages);
            }
        }
        ("sampling/createMessage", PayloadKind::Result) => {
            if let Some(content) = obj.get_mut("content") {
                adapt_sampling_result_content(version, content);
            }
        }
        _ => {}
    }
}

/// Whether [`adapt_outgoing`] leaves every `tools/call` result whose `structuredContent` is
/// `structured` as it is for a peer of `version`: from 2025-06-18 (which has every content block
/// type tidewire sends), with `structuredContent` absent, an object, or anything from 2026-07-28.
/// A server may then write such a result straight from its type, with no tree to adapt.
pub fn keeps_tool_result(version: ProtocolVersion, structured: Option<&Value>) -> bool {
    version.has_structured_output()
        && match structured {
            None | Some(Value::Object(_)) => true,
            Some(_) => version >= ProtocolVersion::V2026_07_28,
        }
}

fn before(version: ProtocolVersion, revision: ProtocolVersion) -> bool {
    version < revision
}

fn text_block(text: String, annotations: Option<Value>) -> Value {
    let mut block = Map::new();
    block.insert("type".to_owned(), Value::from("text"));
    block.insert("text".to_owned(), Value::from(text));
    if let Some(a) = annotations {
        block.insert("annotations".to_owned(), a);
    }
    Value::Object(block)
}

fn str_member<'a>(block: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    block.get(key).and_then(Value::as_str)
}

/// Rewrites one content block whose `type` the revision does not know.
fn adapt_block(version: ProtocolVersion, block: &mut Value) {
    let Some(obj) = block.as_object() else {
        return;
    };
    let replacement = match str_member(obj, "type") {
        Some("audio") if before(version, ProtocolVersion::V2025_03_26) => {
            let mime = str_member(obj, "mimeType").unwrap_or("audio");
            Some(format!(
                "[audio content ({mime}) omitted: not supported by MCP {version}]"
            ))
        }
        Some("resource_link") if before(version, ProtocolVersion::V2025_06_18) => {
            let uri = str_member(obj, "uri").unwrap_or_default();
            let name = str_member(obj, "title")
                .or_else(|| str_member(obj, "name"))
                .unwrap_or(uri);
            let mut text = format!("[resource link] {name}: {uri}");
            if let Some(description) = str_member(obj, "description") {
                text.push_str(" — ");
                text.push_str(description);
            }
            Some(text)
        }
        _ => None,
    };
    if let Some(text) = replacement {
        let annotations = obj.get("annotations").cloned();
        *block = text_block(text, annotations);
    }
}

fn adapt_blocks(version: ProtocolVersion, blocks: &mut [Value]) {
    for block in blocks {
        adapt_block(version, block);
    }
}

/// `structuredContent` is 2025-06-18+ and must be an object before 2026-07-28.
fn adapt_structured_content(version: ProtocolVersion, obj: &mut Map<String, Value>) {
    let keep = match obj.get("structuredContent") {
        None => return,
        Some(Value::Object(_)) => version.has_structured_output(),
        Some(_) => version >= ProtocolVersion::V2026_07_28,
    };
    if keep {
        return;
    }
    let Some(structured) = obj.remove("structuredContent") else {
        return;
    };
    let content = obj
        .entry("content")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(blocks) = content {
        let has_text = blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("text"));
        if !has_text {
            blocks.push(text_block(structured.to_string(), None));
        }
    }
}

fn adapt_sampling_messages(version: ProtocolVersion, messages: &mut Vec<Value>) {
    let split = before(version, ProtocolVersion::V2025_11_25);
    let mut out = Vec::with_capacity(messages.len());
    for mut message in messages.drain(..) {
        let list = match message.get_mut("content") {
            Some(Value::Array(blocks)) if split => Some(std::mem::take(blocks)),
            Some(block) => {
                adapt_block(version, block);
                None
            }
            None => None,
        };
        match list {
            None => out.push(message),
            Some(blocks) => {
                for mut block in blocks {
                    adapt_block(version, &mut block);
                    let mut single = message.clone();
                    if let Some(obj) = single.as_object_mut() {
                        obj.insert("content".to_owned(), block);
                    }
                    out.push(single);
                }
            }
        }
    }
    *messages = out;
}

fn adapt_sampling_result_content(version: ProtocolVersion, content: &mut Value) {
    if let Value::Array(blocks) = content
        && before(version, ProtocolVersion::V2025_11_25)
    {
        let mut blocks = std::mem::take(blocks);
        let all_text = blocks
            .iter()
            .all(|b| b.get("type").and_then(Value::as_str) == Some("text"));
        *content = if blocks.len() == 1 {
            blocks.remove(0)
        } else if all_text {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            text_block(texts.join("\n"), None)
        } else {
            blocks.swap_remove(0)
        };
    }
    adapt_block(version, content);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::{
        CallToolResult, ContentBlock, CreateMessageParams, CreateMessageResult, OneOrMany,
        ProgressNotificationParams, ResourceLink, Role, SamplingContent, SamplingMessage,
    };

    const OLD: ProtocolVersion = ProtocolVersion::V2024_11_05;
    const MID: ProtocolVersion = ProtocolVersion::V2025_03_26;
    const JUNE: ProtocolVersion = ProtocolVersion::V2025_06_18;
    const NEW: ProtocolVersion = ProtocolVersion::V2025_11_25;

    fn adapted<T: serde::Serialize>(
        version: ProtocolVersion,
        method: &str,
        kind: PayloadKind,
        v: &T,
    ) -> Value {
        let mut value = serde_json::to_value(v).expect("ser");
        adapt_outgoing(version, method, kind, &mut value);
        value
    }

    #[test]
    fn progress_message_only_from_2025_03_26() {
        let p = ProgressNotificationParams::new(1, 0.5, Some(1.0)).with_message("half");
        let old = adapted(OLD, "notifications/progress", PayloadKind::Params, &p);
        assert_eq!(
            old,
            json!({"progressToken": 1, "progress": 0.5, "total": 1.0})
        );
        let mid = adapted(MID, "notifications/progress", PayloadKind::Params, &p);
        assert_eq!(mid["message"], json!("half"));
    }

    #[test]
    fn content_blocks_by_revision() {
        let mut link = ResourceLink::new("file:///r.md", "r");
        link.description = Some("the readme".into());
        let r = CallToolResult::success(vec![
            ContentBlock::audio("AAAA", "audio/wav"),
            ContentBlock::ResourceLink(link),
            ContentBlock::text("t"),
        ]);
        let old = adapted(OLD, "tools/call", PayloadKind::Result, &r);
        assert_eq!(
            old["content"][0],
            json!({"type": "text", "text": "[audio content (audio/wav) omitted: not supported by MCP 2024-11-05]"})
        );
        assert_eq!(
            old["content"][1],
            json!({"type": "text", "text": "[resource link] r: file:///r.md — the readme"})
        );
        let mid = adapted(MID, "tools/call", PayloadKind::Result, &r);
        assert_eq!(mid["content"][0]["type"], json!("audio"));
        assert_eq!(mid["content"][1]["type"], json!("text"));
        let june = adapted(JUNE, "tools/call", PayloadKind::Result, &r);
        assert_eq!(june, serde_json::to_value(&r).expect("ser"));
    }

    #[test]
    fn a_tool_result_said_to_be_kept_is_left_as_it_is_and_no_other() {
        let link = ResourceLink::new("file:///r.md", "r");
        let shapes = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}),
            json!({"content": [serde_json::to_value(ContentBlock::ResourceLink(link)).expect("ser")]}),
            json!({"content": [], "structuredContent": {"sum": 3}}),
            json!({"content": [], "structuredContent": [1, 2]}),
            json!({"content": [{"type": "text", "text": "3"}], "structuredContent": 3}),
        ];
        for version in ProtocolVersion::ALL {
            for shape in &shapes {
                let mut adapted = shape.clone();
                adapt_outgoing(version, "tools/call", PayloadKind::Result, &mut adapted);
                if keeps_tool_result(version, shape.get("structuredContent")) {
                    assert_eq!(&adapted, shape, "{version}: kept, so unchanged");
                }
                let blocks_changed = adapted["content"] != shape["content"];
                let structured_changed =
                    adapted.get("structuredContent") != shape.get("structuredContent");
                if !keeps_tool_result(version, shape.get("structuredContent")) {
                    // Said not to be kept: either the revision lacks a member or a block type
                    // tidewire may send (before 2025-06-18), or this result's content changes.
                    assert!(
                        !version.has_structured_output() || blocks_changed || structured_changed,
                        "{version}: {shape}"
                    );
                }
            }
        }
    }

    #[test]
    fn structured_content_falls_back_to_text() {
        let mut r = CallToolResult::success(vec![]);
        r.structured_content = Some(json!({"sum": 3}));
        let mid = adapted(MID, "tools/call", PayloadKind::Result, &r);
        assert_eq!(
            mid,
            json!({"content": [{"type": "text", "text": "{\"sum\":3}"}]})
        );
        let june = adapted(JUNE, "tools/call", PayloadKind::Result, &r);
        assert_eq!(june["structuredContent"], json!({"sum": 3}));
        // A text block already present is not duplicated.
        let s = CallToolResult::structured(json!({"a": 1}));
        let mid = adapted(MID, "tools/call", PayloadKind::Result, &s);
        assert_eq!(
            mid,
            json!({"content": [{"type": "text", "text": "{\"a\":1}"}]})
        );
        // A non-object structuredContent (2026-07-28 only) is dropped for handshake revisions.
        r.structured_content = Some(json!([1, 2]));
        let new = adapted(NEW, "tools/call", PayloadKind::Result, &r);
        assert_eq!(new, json!({"content": [{"type": "text", "text": "[1,2]"}]}));
        let modern = adapted(
            ProtocolVersion::V2026_07_28,
            "tools/call",
            PayloadKind::Result,
            &r,
        );
        assert_eq!(modern["structuredContent"], json!([1, 2]));
    }

    #[test]
    fn output_schema_removed_before_2025_06_18() {
        let v = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"},
                                  "outputSchema": {"type": "object"}, "title": "T"}]});
        let mut old = v.clone();
        adapt_outgoing(MID, "tools/list", PayloadKind::Result, &mut old);
        assert_eq!(old["tools"][0].get("outputSchema"), None);
        assert_eq!(old["tools"][0]["title"], json!("T"));
        let mut june = v.clone();
        adapt_outgoing(JUNE, "tools/list", PayloadKind::Result, &mut june);
        assert_eq!(june, v);
    }

    #[test]
    fn prompt_messages_adapted() {
        let v = json!({"messages": [{"role": "user", "content": {"type": "resource_link",
                       "uri": "file:///a", "name": "a", "title": "A"}}]});
        let mut old = v;
        adapt_outgoing(MID, "prompts/get", PayloadKind::Result, &mut old);
        assert_eq!(
            old["messages"][0]["content"],
            json!({"type": "text", "text": "[resource link] A: file:///a"})
        );
    }

    #[test]
    fn sampling_lists_become_single_blocks() {
        let mut p = CreateMessageParams::new(
            vec![
                SamplingMessage::new(
                    Role::User,
                    OneOrMany::Many(vec![SamplingContent::text("a"), SamplingContent::text("b")]),
                ),
                SamplingMessage::new(Role::Assistant, OneOrMany::Many(vec![])),
                SamplingMessage::user_text("c"),
            ],
            10,
        );
        p.system_prompt = Some("s".into());
        let old = adapted(JUNE, "sampling/createMessage", PayloadKind::Params, &p);
        assert_eq!(
            old["messages"],
            json!([
                {"role": "user", "content": {"type": "text", "text": "a"}},
                {"role": "user", "content": {"type": "text", "text": "b"}},
                {"role": "user", "content": {"type": "text", "text": "c"}}
            ])
        );
        let new = adapted(NEW, "sampling/createMessage", PayloadKind::Params, &p);
        assert_eq!(new, serde_json::to_value(&p).expect("ser"));

        let mut r = CreateMessageResult::text("m", "x");
        r.content = OneOrMany::Many(vec![SamplingContent::text("x"), SamplingContent::text("y")]);
        let old = adapted(JUNE, "sampling/createMessage", PayloadKind::Result, &r);
        assert_eq!(old["content"], json!({"type": "text", "text": "x\ny"}));
        r.content = OneOrMany::Many(vec![SamplingContent::Audio(
            crate::schema::AudioContent::new("AA", "audio/mp3"),
        )]);
        let old = adapted(OLD, "sampling/createMessage", PayloadKind::Result, &r);
        assert_eq!(old["content"]["type"], json!("text"));
        let mid = adapted(MID, "sampling/createMessage", PayloadKind::Result, &r);
        assert_eq!(mid["content"]["type"], json!("audio"));
    }

    #[test]
    fn other_methods_and_values_untouched() {
        let mut v = json!({"anything": [1]});
        adapt_outgoing(OLD, "x/y", PayloadKind::Params, &mut v);
        assert_eq!(v, json!({"anything": [1]}));
        let mut s = json!("not an object");
        adapt_outgoing(OLD, "tools/call", PayloadKind::Result, &mut s);
        assert_eq!(s, json!("not an object"));
    }
}
