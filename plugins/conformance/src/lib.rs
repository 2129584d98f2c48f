//! `conformance`: the fixture tools of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios), served by
//! toolhost like any other plugin. It doubles as the example of the `client`
//! import: logging, progress, sampling and elicitation from inside a tool.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use std::time::Duration;

use exports::toolhost::plugin::tools::{
    ContentBlock, EmbeddedResource, Guest, Media, Output, ResourceBody, Tool, ToolError,
};
use serde_json::{Value, json};
use toolhost::plugin::client::{self, LogLevel};

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file: 8 kHz, 8-bit mono, four samples of silence.
fn silent_wav() -> Vec<u8> {
    let samples = [0x80u8; 4];
    let mut wav = Vec::new();
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

const NO_ARGUMENTS: &str = r#"{"type":"object","properties":{}}"#;

fn tool(name: &str, description: &str, input_schema: &str) -> Tool {
    Tool {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: input_schema.into(),
        output_schema: None,
        annotations: None,
    }
}

fn text(text: impl Into<String>) -> Output {
    Output {
        content: vec![ContentBlock::Text(text.into())],
        structured: None,
    }
}

fn image() -> ContentBlock {
    ContentBlock::Image(Media {
        data: RED_PIXEL_PNG.to_vec(),
        mime_type: "image/png".into(),
    })
}

fn failure(code: &str, message: impl Into<String>) -> ToolError {
    ToolError {
        code: code.into(),
        message: message.into(),
        details: None,
    }
}

fn pause() {
    std::thread::sleep(Duration::from_millis(50));
}

struct Conformance;

impl Guest for Conformance {
    fn list_tools() -> Vec<Tool> {
        let string_arg = |name: &str, description: &str| {
            json!({
                "type": "object",
                "properties": { name: { "type": "string", "description": description } },
                "required": [name]
            })
            .to_string()
        };
        vec![
            tool("test_simple_text", "Returns simple text", NO_ARGUMENTS),
            tool("test_image_content", "Returns an image", NO_ARGUMENTS),
            tool("test_audio_content", "Returns audio", NO_ARGUMENTS),
            tool(
                "test_embedded_resource",
                "Returns an embedded resource",
                NO_ARGUMENTS,
            ),
            tool(
                "test_multiple_content_types",
                "Returns text, an image and a resource",
                NO_ARGUMENTS,
            ),
            tool(
                "test_tool_with_logging",
                "Logs three messages while it runs",
                NO_ARGUMENTS,
            ),
            tool(
                "test_tool_with_progress",
                "Reports progress while it runs",
                NO_ARGUMENTS,
            ),
            tool("test_error_handling", "Always fails", NO_ARGUMENTS),
            tool(
                "test_sampling",
                "Asks the client's LLM",
                &string_arg("prompt", "The prompt to send to the LLM"),
            ),
            tool(
                "test_elicitation",
                "Asks the user",
                &string_arg("message", "The message to show the user"),
            ),
            tool(
                "test_elicitation_sep1034_defaults",
                "Asks the user, with defaults",
                NO_ARGUMENTS,
            ),
            tool(
                "test_elicitation_sep1330_enums",
                "Asks the user to pick from enums",
                NO_ARGUMENTS,
            ),
            tool(
                "test_reconnection",
                "Takes a moment, for SSE reconnection tests",
                NO_ARGUMENTS,
            ),
            tool(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features",
                r##"{
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {
                        "address": {
                            "type": "object",
                            "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                        }
                    },
                    "properties": {
                        "name": { "type": "string" },
                        "address": { "$ref": "#/$defs/address" }
                    },
                    "additionalProperties": false
                }"##,
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<Output, ToolError> {
        let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
        match name.as_str() {
            "test_simple_text" => Ok(text("This is a simple text response for testing.")),
            "test_image_content" => Ok(Output {
                content: vec![image()],
                structured: None,
            }),
            "test_audio_content" => Ok(Output {
                content: vec![ContentBlock::Audio(Media {
                    data: silent_wav(),
                    mime_type: "audio/wav".into(),
                })],
                structured: None,
            }),
            "test_embedded_resource" => Ok(Output {
                content: vec![ContentBlock::Resource(EmbeddedResource {
                    uri: "test://embedded-resource".into(),
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("This is an embedded resource content.".into()),
                })],
                structured: None,
            }),
            "test_multiple_content_types" => Ok(Output {
                content: vec![
                    ContentBlock::Text("Multiple content types test:".into()),
                    image(),
                    ContentBlock::Resource(EmbeddedResource {
                        uri: "test://mixed-content-resource".into(),
                        mime_type: Some("application/json".into()),
                        body: ResourceBody::Text(r#"{"test":"data","value":123}"#.into()),
                    }),
                ],
                structured: None,
            }),
            "test_tool_with_logging" => {
                client::log(LogLevel::Info, "Tool execution started");
                pause();
                client::log(LogLevel::Info, "Tool processing data");
                pause();
                client::log(LogLevel::Info, "Tool execution completed");
                Ok(text("Logging test completed"))
            }
            "test_tool_with_progress" => {
                client::progress(0.0, Some(100.0), None);
                pause();
                client::progress(50.0, Some(100.0), None);
                pause();
                client::progress(100.0, Some(100.0), None);
                Ok(text("Progress test completed"))
            }
            "test_error_handling" => Err(failure(
                "TEST_ERROR",
                "This tool intentionally returns an error for testing",
            )),
            "test_sampling" => {
                let params = json!({
                    "messages": [{ "role": "user", "content": { "type": "text", "text": args["prompt"] } }],
                    "maxTokens": 100
                });
                let answer = client::create_message(&params.to_string())
                    .map_err(|reason| failure("SAMPLING_UNAVAILABLE", reason))?;
                let answer: Value = serde_json::from_str(&answer).unwrap_or_default();
                let reply = answer["content"]["text"].as_str().unwrap_or_default();
                Ok(text(format!("LLM response: {reply}")))
            }
            "test_elicitation" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    },
                    "required": ["username", "email"]
                });
                let answer = elicit(args["message"].as_str().unwrap_or_default(), schema)?;
                Ok(text(format!(
                    "User response: action={}, content={}",
                    answer["action"], answer["content"]
                )))
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "default": "John Doe" },
                        "age": { "type": "integer", "default": 30 },
                        "score": { "type": "number", "default": 95.5 },
                        "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                        "verified": { "type": "boolean", "default": true }
                    }
                });
                let answer = elicit("Please review your details", schema)?;
                Ok(completed(&answer))
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                        "titledSingle": { "type": "string", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" }
                        ] },
                        "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                                        "enumNames": ["Option One", "Option Two", "Option Three"] },
                        "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                        "titledMulti": { "type": "array", "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" }
                        ] } }
                    }
                });
                let answer = elicit("Please pick your options", schema)?;
                Ok(completed(&answer))
            }
            "test_reconnection" => {
                std::thread::sleep(Duration::from_millis(100));
                Ok(text("Reconnection test completed"))
            }
            "json_schema_2020_12_tool" => Ok(text(format!("Received: {args}"))),
            other => Err(failure(
                "UNKNOWN_TOOL",
                format!("this plugin has no tool named {other}"),
            )),
        }
    }
}

fn elicit(message: &str, requested_schema: Value) -> Result<Value, ToolError> {
    let params = json!({ "message": message, "requestedSchema": requested_schema });
    let answer = client::elicit(&params.to_string())
        .map_err(|reason| failure("ELICITATION_UNAVAILABLE", reason))?;
    Ok(serde_json::from_str(&answer).unwrap_or_default())
}

fn completed(answer: &Value) -> Output {
    text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"], answer["content"]
    ))
}

export!(Conformance);
