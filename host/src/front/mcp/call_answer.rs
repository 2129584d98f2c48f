//! The envelope as MCP's `tools/call` result, for both paths: read once
//! into a [`CallAnswer`], which a session hands to rmcp as its
//! `CallToolResult` and the stateless fast path (`fast/`) writes itself,
//! byte for byte as rmcp writes that type (a unit test below holds the two
//! equal), without the JSON values rmcp's type keeps between.
//!
//! Failures with a JSON-RPC code (an unknown tool) are protocol errors;
//! every other failure is a tool result with `isError: true` the model can
//! read, as MCP 2025-11-25 asks. The error's code, message and details (a
//! trap's stderr tail among them) travel in `_meta`, not in
//! `structuredContent`, which clients validate against the tool's
//! `outputSchema`; so does the call's accounting (`call/accounting.rs`).
//!
//! Results get `resultType: "complete"`, which the 2026-07-28 revision
//! requires (clients on it reject a result without it); rmcp strips it
//! again for peers on an older revision, and so does the fast path.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorCode as RpcErrorCode, JsonObject, ResultType,
};
use serde::ser::SerializeMap;
use serde_json::Value;

use crate::call::accounting::{CALL_META, CallMeta};
use crate::call::envelope::{Envelope, ErrorBody};

/// The `_meta` key of a failed call's error object (`code`, `message`,
/// `details`): the same object REST answers with as `error`.
pub(crate) const ERROR_META: &str = "toolhost/error";

/// A call's result, moved out of the envelope with each content block
/// checked as rmcp reads it.
#[derive(Debug)]
pub(super) struct CallAnswer {
    /// `Some(COMPLETE)` unless the peer negotiated a revision before
    /// 2026-07-28.
    pub(super) result_type: Option<ResultType>,
    content: Vec<Block>,
    structured_content: Option<JsonObject>,
    is_error: bool,
    error: Option<Box<ErrorBody>>,
    meta: Option<Box<CallMeta>>,
}

/// One content block: a plain text block (`type` and `text`, nothing else:
/// most blocks) kept as its text; any other read by rmcp's type, whose
/// tagged enum first copies the block into a buffer of its own.
#[derive(Debug)]
enum Block {
    Text(String),
    /// Boxed: rare, and much larger than a text.
    Other(Box<ContentBlock>),
}

impl Block {
    fn read(block: Value) -> Result<Block, serde_json::Error> {
        match block {
            Value::Object(mut fields)
                if fields.len() == 2
                    && fields.get("type").and_then(Value::as_str) == Some("text")
                    && fields.get("text").is_some_and(Value::is_string) =>
            {
                let Some(Value::String(text)) = fields.swap_remove("text") else {
                    unreachable!("checked above")
                };
                Ok(Block::Text(text))
            }
            other => serde_json::from_value(other).map(|block| Block::Other(Box::new(block))),
        }
    }

    fn into_rmcp(self) -> ContentBlock {
        match self {
            Block::Text(text) => ContentBlock::text(text),
            Block::Other(block) => *block,
        }
    }
}

impl serde::Serialize for Block {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Block::Text(text) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                map.end()
            }
            Block::Other(block) => block.serialize(serializer),
        }
    }
}

/// The envelope read for MCP, or the protocol error it stands for.
pub(super) fn call_answer(envelope: Envelope) -> Result<CallAnswer, McpError> {
    if let Some(error) = &envelope.error
        && let Some(code) = error.host_code.and_then(|code| code.jsonrpc_code())
    {
        return Err(McpError::new(
            RpcErrorCode(code),
            error.message.clone(),
            error.details.clone(),
        ));
    }
    let Envelope {
        content,
        structured_content,
        is_error,
        error,
        meta,
    } = envelope;
    let content = content
        .into_iter()
        .map(Block::read)
        .collect::<Result<Vec<Block>, _>>()
        .map_err(|e| McpError::internal_error(format!("result envelope: {e}"), None))?;
    Ok(CallAnswer {
        result_type: Some(ResultType::COMPLETE),
        content,
        structured_content,
        is_error,
        error,
        meta,
    })
}

/// The envelope as rmcp's result, for a session.
pub(super) fn call_tool_result(envelope: Envelope) -> Result<CallToolResult, McpError> {
    call_answer(envelope).map(CallAnswer::into_rmcp)
}

impl CallAnswer {
    fn into_rmcp(self) -> CallToolResult {
        let mut extra = serde_json::Map::new();
        if let Some(error) = self.error {
            extra.insert(
                ERROR_META.into(),
                serde_json::to_value(&*error).unwrap_or_default(),
            );
        }
        if let Some(call) = self.meta {
            extra.insert(
                CALL_META.into(),
                serde_json::to_value(&*call).unwrap_or_default(),
            );
        }
        let mut result = CallToolResult::default();
        result.content = self.content.into_iter().map(Block::into_rmcp).collect();
        result.structured_content = self.structured_content.map(Value::Object);
        result.is_error = Some(self.is_error);
        result.meta = (!extra.is_empty()).then_some(rmcp::model::MetaObject(extra));
        result.result_type = self.result_type;
        result
    }
}

/// Written as rmcp writes the `CallToolResult` that `into_rmcp` makes: its
/// fields in its order, `_meta` holding the error, then the accounting.
impl serde::Serialize for CallAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Meta<'a>(Option<&'a ErrorBody>, Option<&'a CallMeta>);
        impl serde::Serialize for Meta<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(None)?;
                if let Some(error) = self.0 {
                    map.serialize_entry(ERROR_META, error)?;
                }
                if let Some(call) = self.1 {
                    map.serialize_entry(CALL_META, call)?;
                }
                map.end()
            }
        }
        let mut map = serializer.serialize_map(None)?;
        if let Some(result_type) = &self.result_type {
            map.serialize_entry("resultType", result_type)?;
        }
        map.serialize_entry("content", &self.content)?;
        if let Some(structured) = &self.structured_content {
            map.serialize_entry("structuredContent", structured)?;
        }
        map.serialize_entry("isError", &self.is_error)?;
        if self.error.is_some() || self.meta.is_some() {
            map.serialize_entry("_meta", &Meta(self.error.as_deref(), self.meta.as_deref()))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A plain text block kept as its text is what rmcp's own reading
    /// gives; a block with anything more is still read by rmcp's type.
    #[test]
    fn content_blocks_read_as_rmcp_reads_them() {
        let blocks = [
            json!({"type": "text", "text": "hello"}),
            json!({"text": "", "type": "text"}),
            json!({"type": "text", "text": "hi", "annotations": {"priority": 0.5}}),
            json!({"type": "text", "text": "hi", "_meta": {"k": 1}}),
            json!({"type": "text", "text": "x", "extra": 1}),
            json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
        ];
        for block in blocks {
            let ours = Block::read(block.clone()).unwrap().into_rmcp();
            let theirs: ContentBlock = serde_json::from_value(block.clone()).unwrap();
            assert_eq!(ours, theirs, "{block}");
        }
        for bad in [
            json!({"type": "text", "text": 7}),
            json!({"type": "text"}),
            json!({"type": "nope", "text": "x"}),
        ] {
            assert!(Block::read(bad.clone()).is_err(), "{bad}");
        }
    }

    /// The answer the fast path writes is, byte for byte, what rmcp writes
    /// for the same envelope: with and without `resultType`, structured
    /// content, an error and the accounting, and every kind of block.
    #[test]
    fn the_written_answer_is_rmcps_byte_for_byte() {
        let meta = |warm| CallMeta {
            duration_ms: 0.227,
            cpu_ms: Some(0.194),
            fuel: Some(5815),
            peak_memory_bytes: Some(197_400),
            code: Some("optimised"),
            warm,
            outbound: None,
        };
        let error = |details| ErrorBody {
            code: "plugin_trap".into(),
            message: "it \"trapped\"".into(),
            details,
            host_code: None,
        };
        let blocks = |value: Value| -> Vec<Value> { serde_json::from_value(value).unwrap() };
        let envelopes = [
            Envelope {
                content: blocks(json!([{"type": "text", "text": "hello \"you\"\n"}])),
                structured_content: None,
                is_error: false,
                error: None,
                meta: None,
            },
            Envelope {
                content: blocks(json!([
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b", "annotations": {"priority": 0.5}},
                    {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                    {"type": "resource_link", "uri": "file:///x", "name": "x"}
                ])),
                structured_content: json!({"n": 1.5, "list": [1, "two", null]})
                    .as_object()
                    .cloned(),
                is_error: false,
                error: None,
                meta: Some(Box::new(meta(false))),
            },
            Envelope {
                content: Vec::new(),
                structured_content: None,
                is_error: true,
                error: Some(Box::new(error(Some(json!({"stderr": "\u{1b}[31m…"}))))),
                meta: Some(Box::new(meta(true))),
            },
            Envelope {
                content: blocks(json!([{"type": "text", "text": "x"}])),
                structured_content: None,
                is_error: true,
                error: Some(Box::new(error(None))),
                meta: None,
            },
        ];
        for envelope in envelopes {
            for legacy in [false, true] {
                let mut ours = call_answer(envelope.clone()).unwrap();
                let mut theirs = call_tool_result(envelope.clone()).unwrap();
                if legacy {
                    ours.result_type = None;
                    theirs.result_type = None;
                }
                assert_eq!(
                    serde_json::to_string(&ours).unwrap(),
                    serde_json::to_string(&theirs).unwrap(),
                    "{envelope:?}"
                );
            }
        }
    }
}
