//! Results and errors: [`Content`] is what a call answers (MCP content
//! blocks, optionally with structured data), [`ToolError`] a business error
//! (the tool ran and says the request cannot be served).

use serde::Serialize;
use serde_json::Value;

use crate::bindings::exports::toolhost::plugin0_1_0::tools as wit;

/// A tool result: content blocks in order, and optionally structured data.
///
/// ```
/// # use toolhost_plugin::Content;
/// let result = Content::new()
///     .text("Here is the chart")
///     .image(vec![0x89, b'P', b'N', b'G'], "image/png");
/// ```
#[derive(Default, Debug)]
pub struct Content {
    blocks: Vec<wit::ContentBlock>,
    structured: Option<String>,
}

impl Content {
    pub fn new() -> Self {
        Content::default()
    }

    /// A text (or markdown) block.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(wit::ContentBlock::Text(text.into()));
        self
    }

    /// An image block; the host base64-encodes `data`.
    pub fn image(mut self, data: Vec<u8>, mime_type: &str) -> Self {
        self.blocks
            .push(wit::ContentBlock::Image(media(data, mime_type)));
        self
    }

    /// An audio block; the host base64-encodes `data`.
    pub fn audio(mut self, data: Vec<u8>, mime_type: &str) -> Self {
        self.blocks
            .push(wit::ContentBlock::Audio(media(data, mime_type)));
        self
    }

    /// A link to a resource the client may fetch or open.
    pub fn link(mut self, link: ResourceLink) -> Self {
        self.blocks
            .push(wit::ContentBlock::ResourceLink(wit::ResourceLink {
                uri: link.uri,
                name: link.name,
                title: link.title,
                description: link.description,
                mime_type: link.mime_type,
            }));
        self
    }

    /// A text resource carried in the result itself.
    pub fn embedded_text(mut self, uri: &str, mime_type: &str, text: impl Into<String>) -> Self {
        self.blocks.push(embedded(
            uri,
            mime_type,
            wit::ResourceBody::Text(text.into()),
        ));
        self
    }

    /// A binary resource carried in the result itself (base64 on the wire).
    pub fn embedded_blob(mut self, uri: &str, mime_type: &str, data: Vec<u8>) -> Self {
        self.blocks
            .push(embedded(uri, mime_type, wit::ResourceBody::Blob(data)));
        self
    }

    /// Structured data beside the blocks (`structuredContent`): must be an
    /// object. Without any text block, the host adds one rendering it.
    pub fn structured(self, data: &impl Serialize) -> Self {
        // A value that cannot serialise is a bug in the plugin: `null` is
        // not an object, so the host reports INVALID_PLUGIN_OUTPUT rather
        // than a half result.
        self.structured_value(serde_json::to_value(data).unwrap_or(Value::Null))
    }

    /// The text blocks, in order (for tests).
    pub fn texts(&self) -> Vec<&str> {
        self.blocks
            .iter()
            .filter_map(|block| match block {
                wit::ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The structured data, if any (for tests).
    pub fn structured_data(&self) -> Option<Value> {
        self.structured
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
    }

    pub(crate) fn structured_value(mut self, value: Value) -> Self {
        self.structured = Some(value.to_string());
        self
    }

    pub(crate) fn into_wit(self) -> wit::Output {
        wit::Output {
            content: self.blocks,
            structured: self.structured,
        }
    }
}

fn media(data: Vec<u8>, mime_type: &str) -> wit::Media {
    wit::Media {
        data,
        mime_type: mime_type.to_string(),
    }
}

fn embedded(uri: &str, mime_type: &str, body: wit::ResourceBody) -> wit::ContentBlock {
    wit::ContentBlock::Resource(wit::EmbeddedResource {
        uri: uri.to_string(),
        mime_type: Some(mime_type.to_string()),
        body,
    })
}

/// A link to a resource, for [`Content::link`].
#[derive(Default, Clone)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl ResourceLink {
    pub fn new(uri: &str, name: &str) -> Self {
        ResourceLink {
            uri: uri.to_string(),
            name: name.to_string(),
            ..ResourceLink::default()
        }
    }
}

/// A business error: the host answers `isError: true` with the text
/// `Error: <message>` (HTTP 422 over REST, with `code`, `message` and
/// `details` in its `error` object).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    code: String,
    message: String,
    details: Option<Value>,
}

impl ToolError {
    /// `code` is stable and machine-readable (UPPER_SNAKE_CASE by
    /// convention, for example `LOCATION_NOT_FOUND`); `message` is a
    /// sentence for people.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ToolError {
            code: code.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// Anything that helps the caller, as JSON.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn details(&self) -> Option<&Value> {
        self.details.as_ref()
    }

    pub(crate) fn into_wit(self) -> wit::ToolError {
        wit::ToolError {
            code: self.code,
            message: self.message,
            details: self.details.map(|details| details.to_string()),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_order_and_kind() {
        let output = Content::new()
            .text("a")
            .image(vec![1], "image/png")
            .audio(vec![2], "audio/wav")
            .link(ResourceLink::new("file:///x", "x"))
            .embedded_text("file:///y", "text/plain", "y")
            .embedded_blob("file:///z", "application/octet-stream", vec![3])
            .structured(&serde_json::json!({"n": 1}))
            .into_wit();
        let kinds: Vec<&str> = output
            .content
            .iter()
            .map(|block| match block {
                wit::ContentBlock::Text(_) => "text",
                wit::ContentBlock::Image(_) => "image",
                wit::ContentBlock::Audio(_) => "audio",
                wit::ContentBlock::ResourceLink(_) => "link",
                wit::ContentBlock::Resource(_) => "resource",
            })
            .collect();
        assert_eq!(
            kinds,
            ["text", "image", "audio", "link", "resource", "resource"]
        );
        assert_eq!(output.structured.as_deref(), Some(r#"{"n":1}"#));
    }

    #[test]
    fn errors_carry_code_message_and_json_details() {
        let error = ToolError::new("DIVISION_BY_ZERO", "b must not be 0")
            .with_details(serde_json::json!({"b": 0}))
            .into_wit();
        assert_eq!(error.code, "DIVISION_BY_ZERO");
        assert_eq!(error.details.as_deref(), Some(r#"{"b":0}"#));
    }
}
