//! The normalizer: the one module that builds the result envelope, the MCP
//! `CallToolResult` (spec 2025-11-25), for every outcome and every front.
//!
//! Guarantees, whatever the plugin returned:
//! - `content` is never empty, and every block has its `type` and the fields
//!   that type requires (binary data base64-encoded);
//! - `structuredContent`, when present, is a JSON object, and validates
//!   against the tool's `outputSchema` when one is declared;
//! - `isError` is always present.
//!
//! A result that cannot meet them becomes an INVALID_PLUGIN_OUTPUT error
//! ([`InvalidOutput`] says why) rather than reaching a client malformed.
//! Errors carry an `error` object (`code`, `message`, `details`) that REST
//! and CGI return in the body; the MCP front leaves it out of the result,
//! where MCP has no such field.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::call::errors::{ErrorCode, is_valid_code};
use crate::registry::tools::Tool;
use crate::runtime::{ContentBlock, PluginError, PluginOutput, ResourceBody};

use crate::call::accounting::CallMeta;
pub use crate::call::render::TextFormat;
use crate::call::render::render;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Envelope {
    pub(crate) content: Vec<Value>,
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    pub(crate) structured_content: Option<Map<String, Value>>,
    #[serde(rename = "isError")]
    pub is_error: bool,
    /// Boxed: errors are the rare path, and this keeps `Envelope` small.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Box<ErrorBody>>,
    /// What the call cost (`accounting.rs`): REST's `meta`, MCP's
    /// `_meta["toolhost/call"]`. Set by `invoke` for every call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) meta: Option<Box<CallMeta>>,
}

/// Why a plugin's answer cannot reach a client as it is: the sentence
/// after "returned an invalid result: ". A block's own problems are an
/// [`InvalidBlock`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum InvalidOutput {
    /// One block of `content` is not valid.
    #[error("content[{index}]: {block}")]
    Content {
        index: usize,
        #[source]
        block: InvalidBlock,
    },
    /// `structured` is JSON, but not an object.
    #[error("structured data must be a JSON object, not {0}")]
    StructuredNotObject(&'static str),
    #[error("structured data is not valid JSON: {0}")]
    StructuredNotJson(#[source] serde_json::Error),
    #[error("the tool declares an outputSchema but returned no structured data")]
    NoStructured,
    /// `structured` breaks the tool's output schema, in these places.
    #[error(
        "structured data does not match the outputSchema: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    OutputSchema(Vec<SchemaProblem>),
    #[error("it has neither content nor structured data")]
    Empty,
}

/// Why one content block (or one resource's contents) cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidBlock {
    #[error("media block has no data")]
    NoMediaData,
    #[error("{0:?} is not a MIME type")]
    MimeType(String),
    #[error("resource link has an empty name")]
    LinkWithoutName,
    #[error("{0:?} is not a URI (it needs a scheme, such as https:)")]
    Uri(String),
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ErrorBody {
    /// A host code, or the plugin's own code for a business error.
    pub(crate) code: String,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<Value>,
    /// The host code, when the host (not the plugin) detected the failure.
    #[serde(skip)]
    pub(crate) host_code: Option<ErrorCode>,
}

impl ErrorBody {
    /// The outcome the call ledger (and so metrics and the dashboard)
    /// counts: the host's code, or [`ErrorCode::ToolError`] for every code
    /// of a plugin's own, so that a plugin cannot make up label values.
    pub(crate) fn outcome(&self) -> &'static str {
        self.host_code.unwrap_or(ErrorCode::ToolError).as_str()
    }
}

impl Envelope {
    /// A failure the host detected.
    pub(crate) fn host_error(
        code: ErrorCode,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        Self::error(ErrorBody {
            code: code.as_str().to_string(),
            message: message.into(),
            details,
            host_code: Some(code),
        })
    }

    /// A request body over the size limit, for every front that reads one.
    pub(crate) fn payload_too_large(limit: usize) -> Self {
        Self::host_error(
            ErrorCode::PayloadTooLarge,
            format!("the body is over the {limit}-byte limit"),
            Some(json!({ "limitBytes": limit })),
        )
    }

    /// A business error the plugin reported. `details` is the plugin's JSON
    /// text; if it is not JSON it is passed on as a string, not dropped.
    /// An error larger than the result limit (its message appears twice in
    /// the envelope, and counts twice) is refused as RESULT_TOO_LARGE,
    /// keeping the plugin's code and the start of its message.
    pub(crate) fn tool_error(error: PluginError, tool: &str) -> Self {
        let size = error.code.len()
            + 2 * error.message.len()
            + error.details.as_ref().map_or(0, String::len);
        if size > MAX_RESULT_BYTES {
            return too_large(
                tool,
                "tool error",
                size,
                json!({
                    "pluginCode": truncate(&error.code, 256),
                    "messageStart": truncate(&error.message, 1024),
                }),
            );
        }
        let details = error
            .details
            .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text)));
        if !is_valid_code(&error.code) {
            // Kept in the details, cut, so a client still learns what the
            // plugin meant; never a code (nor a metric label) of its own.
            let mut kept = json!({ "pluginCode": truncate(&error.code, MAX_KEPT_CODE_BYTES) });
            if let Some(details) = details {
                kept["details"] = details;
            }
            return Self::error(ErrorBody {
                code: ErrorCode::ToolError.as_str().to_string(),
                message: error.message,
                details: Some(kept),
                host_code: Some(ErrorCode::ToolError),
            });
        }
        Self::error(ErrorBody {
            code: error.code,
            message: error.message,
            details,
            host_code: None,
        })
    }

    fn error(body: ErrorBody) -> Self {
        Envelope {
            content: vec![text_block(format!("Error: {}", body.message))],
            structured_content: None,
            is_error: true,
            error: Some(Box::new(body)),
            meta: None,
        }
    }

    /// A plugin's successful output, checked and completed.
    pub(crate) fn success(output: PluginOutput, tool: &Tool, format: TextFormat) -> Self {
        let size = result_size(&output);
        if size > MAX_RESULT_BYTES {
            return too_large(&tool.name, "result", size, json!({}));
        }
        match build_success(output, tool, format) {
            Ok(envelope) => envelope,
            Err(problem) => Self::host_error(
                ErrorCode::InvalidPluginOutput,
                format!("tool {:?} returned an invalid result: {problem}", tool.name),
                None,
            ),
        }
    }

    /// The HTTP status REST and CGI answer with.
    pub(crate) fn http_status(&self) -> u16 {
        match self.error.as_deref() {
            None => 200,
            Some(ErrorBody {
                host_code: Some(code),
                ..
            }) => code.http_status(),
            Some(_) => crate::call::errors::TOOL_ERROR_HTTP_STATUS,
        }
    }
}

/// How much of a plugin's invalid error code is kept in the details.
const MAX_KEPT_CODE_BYTES: usize = 64;

/// The largest answer the host passes on: a result (every content block,
/// with its JSON framing, and the structured data together) or a tool
/// error. A model gains nothing from more, and a client may choke on it.
pub(crate) const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// What a content block costs beyond its payload: `{"type":"text","text":""}`
/// and the comma between blocks, roughly; counted so that a flood of empty
/// blocks is as large as it looks on the wire.
const BLOCK_OVERHEAD_BYTES: usize = 32;

/// The size of a result as the envelope would carry it (binary data grows
/// by a third in base64).
fn result_size(output: &PluginOutput) -> usize {
    let optional = |text: &Option<String>| text.as_ref().map_or(0, String::len);
    let block_size = |block: &ContentBlock| match block {
        ContentBlock::Text(text) => text.len(),
        ContentBlock::Image(media) | ContentBlock::Audio(media) => {
            media.data.len().div_ceil(3) * 4 + media.mime_type.len()
        }
        ContentBlock::ResourceLink(link) => {
            link.uri.len()
                + link.name.len()
                + optional(&link.title)
                + optional(&link.description)
                + optional(&link.mime_type)
        }
        ContentBlock::Resource(resource) => {
            resource.uri.len()
                + optional(&resource.mime_type)
                + match &resource.body {
                    ResourceBody::Text(text) => text.len(),
                    ResourceBody::Blob(bytes) => bytes.len().div_ceil(3) * 4,
                }
        }
    };
    output
        .content
        .iter()
        .map(|block| block_size(block) + BLOCK_OVERHEAD_BYTES)
        .sum::<usize>()
        + optional(&output.structured)
}

/// The RESULT_TOO_LARGE refusal of an answer of `size` bytes.
fn too_large(tool: &str, what: &str, size: usize, mut details: Value) -> Envelope {
    details["tool"] = json!(tool);
    details["sizeBytes"] = json!(size);
    details["limitBytes"] = json!(MAX_RESULT_BYTES);
    Envelope::host_error(
        ErrorCode::ResultTooLarge,
        format!(
            "tool {tool:?} answered with a {what} of about {size} bytes, \
             over the {MAX_RESULT_BYTES}-byte limit"
        ),
        Some(details),
    )
}

/// At most `max_bytes` of `text`, cut on a character boundary.
fn truncate(text: &str, max_bytes: usize) -> &str {
    let end = (0..=max_bytes.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
}

fn build_success(
    output: PluginOutput,
    tool: &Tool,
    format: TextFormat,
) -> Result<Envelope, InvalidOutput> {
    let mut content = output
        .content
        .into_iter()
        .enumerate()
        .map(|(index, block)| {
            content_block(block).map_err(|block| InvalidOutput::Content { index, block })
        })
        .collect::<Result<Vec<_>, _>>()?;

    let structured = match output.structured {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(object)) => Some(object),
            Ok(other) => return Err(InvalidOutput::StructuredNotObject(json_kind(&other))),
            Err(e) => return Err(InvalidOutput::StructuredNotJson(e)),
        },
    };

    if let Some(validator) = &tool.output_validator {
        let Some(object) = &structured else {
            return Err(InvalidOutput::NoStructured);
        };
        let instance = Value::Object(object.clone());
        let problems = schema_problems(validator, &instance);
        if !problems.is_empty() {
            return Err(InvalidOutput::OutputSchema(problems));
        }
    }

    if content.is_empty() {
        let Some(object) = &structured else {
            return Err(InvalidOutput::Empty);
        };
        content.push(text_block(render(object, format)));
    }

    Ok(Envelope {
        content,
        structured_content: structured,
        is_error: false,
        error: None,
        meta: None,
    })
}

/// One failing place in a JSON instance: `{path, message}`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SchemaProblem {
    pub(crate) path: String,
    pub(crate) message: String,
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Every way `instance` breaks the schema, each with its JSON pointer.
pub(crate) fn schema_problems(
    validator: &jsonschema::Validator,
    instance: &Value,
) -> Vec<SchemaProblem> {
    validator
        .iter_errors(instance)
        .map(|error| SchemaProblem {
            path: error.instance_path().to_string(),
            message: error.to_string(),
        })
        .collect()
}

fn text_block(text: String) -> Value {
    json!({ "type": "text", "text": text })
}

pub(crate) fn content_block(block: ContentBlock) -> Result<Value, InvalidBlock> {
    Ok(match block {
        ContentBlock::Text(text) => text_block(text),
        ContentBlock::Image(media) | ContentBlock::Audio(media) if media.data.is_empty() => {
            return Err(InvalidBlock::NoMediaData);
        }
        ContentBlock::Image(media) => {
            check_mime_type(&media.mime_type)?;
            json!({ "type": "image", "data": BASE64.encode(&media.data), "mimeType": media.mime_type })
        }
        ContentBlock::Audio(media) => {
            check_mime_type(&media.mime_type)?;
            json!({ "type": "audio", "data": BASE64.encode(&media.data), "mimeType": media.mime_type })
        }
        ContentBlock::ResourceLink(link) => {
            check_uri(&link.uri)?;
            if link.name.is_empty() {
                return Err(InvalidBlock::LinkWithoutName);
            }
            let mut block = json!({ "type": "resource_link", "uri": link.uri, "name": link.name });
            let optional = [
                ("title", link.title),
                ("description", link.description),
                ("mimeType", link.mime_type),
            ];
            for (key, value) in optional {
                if let Some(value) = value {
                    block[key] = json!(value);
                }
            }
            block
        }
        ContentBlock::Resource(resource) => {
            let inner = resource_contents(resource.uri, resource.mime_type, resource.body)?;
            json!({ "type": "resource", "resource": inner })
        }
    })
}

/// One resource's contents as MCP carries them: `uri`, `mimeType`, and
/// `text` or base64 `blob`.
pub(crate) fn resource_contents(
    uri: String,
    mime_type: Option<String>,
    body: ResourceBody,
) -> Result<Value, InvalidBlock> {
    check_uri(&uri)?;
    let mut inner = json!({ "uri": uri });
    if let Some(mime_type) = mime_type {
        check_mime_type(&mime_type)?;
        inner["mimeType"] = json!(mime_type);
    }
    match body {
        ResourceBody::Text(text) => inner["text"] = json!(text),
        ResourceBody::Blob(bytes) => inner["blob"] = json!(BASE64.encode(bytes)),
    }
    Ok(inner)
}

fn check_mime_type(mime_type: &str) -> Result<(), InvalidBlock> {
    let valid = mime_type
        .split_once('/')
        .is_some_and(|(kind, sub)| !kind.is_empty() && !sub.is_empty());
    if valid && !mime_type.contains(char::is_whitespace) {
        Ok(())
    } else {
        Err(InvalidBlock::MimeType(mime_type.to_string()))
    }
}

/// A URI needs at least a scheme (`file:`, `https:`, `data:`, ...).
fn check_uri(uri: &str) -> Result<(), InvalidBlock> {
    let scheme = uri.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(InvalidBlock::Uri(uri.to_string()))
    }
}

/// A JSON value's kind, for error sentences ("not an array").
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_mime_types_are_checked() {
        assert!(check_uri("https://example.com/a").is_ok());
        assert!(check_uri("file:///tmp/x").is_ok());
        assert!(check_uri("no scheme").is_err());
        assert!(check_uri("").is_err());
        assert!(check_mime_type("image/png").is_ok());
        assert!(check_mime_type("png").is_err());
        assert!(check_mime_type("image/").is_err());
    }

    #[test]
    fn tool_error_details_survive_when_not_json() {
        let envelope = Envelope::tool_error(
            PluginError {
                code: "X".into(),
                message: "m".into(),
                details: Some("not json".into()),
            },
            "t",
        );
        let error = envelope.error.unwrap();
        assert_eq!(error.details, Some(json!("not json")));
        assert_eq!(
            envelope.content,
            vec![json!({"type":"text","text":"Error: m"})]
        );
    }

    #[test]
    fn a_plugin_code_that_breaks_the_rule_becomes_tool_error_with_the_code_cut() {
        let long = "x".repeat(1 << 20);
        for (code, kept) in [("not-a-code", "not-a-code"), (long.as_str(), &long[..64])] {
            let envelope = Envelope::tool_error(
                PluginError {
                    code: code.into(),
                    message: "m".into(),
                    details: Some(r#"{"n":1}"#.into()),
                },
                "t",
            );
            assert_eq!(envelope.http_status(), 422);
            let error = envelope.error.unwrap();
            assert_eq!(error.code, "TOOL_ERROR");
            assert_eq!(error.outcome(), "TOOL_ERROR");
            assert_eq!(
                error.details,
                Some(json!({ "pluginCode": kept, "details": { "n": 1 } }))
            );
        }
        let valid = Envelope::tool_error(
            PluginError {
                code: "DIVISION_BY_ZERO".into(),
                message: "m".into(),
                details: None,
            },
            "t",
        );
        let error = valid.error.unwrap();
        assert_eq!(error.code, "DIVISION_BY_ZERO");
        assert_eq!(error.outcome(), "TOOL_ERROR");
    }
}
