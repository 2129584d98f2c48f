//! `echo`: the smallest useful toolhost plugin, and the template to copy.
//!
//! It provides one tool, `echo`, that answers with the text it was given.
//! Everything a plugin needs is here: generate the bindings from the WIT
//! contract, describe the tools, and answer calls.

// Generates Rust types and traits from `wit/plugin.wit`.
wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use exports::toolhost::plugin::tools::{Annotations, ContentBlock, Guest, Output, Tool, ToolError};

struct Echo;

impl Guest for Echo {
    fn list_tools() -> Vec<Tool> {
        vec![Tool {
            name: "echo".into(),
            title: Some("Echo".into()),
            description: "Answers with the text it is given.".into(),
            // The host validates arguments against this schema before
            // `call_tool` runs, so `text` is known to be a string below.
            input_schema: r#"{
                "type": "object",
                "properties": { "text": { "type": "string", "description": "What to echo back" } },
                "required": ["text"],
                "additionalProperties": false
            }"#
            .into(),
            output_schema: None,
            annotations: Some(Annotations {
                read_only: Some(true),
                destructive: Some(false),
                idempotent: Some(true),
                open_world: Some(false),
            }),
        }]
    }

    fn call_tool(name: String, arguments: String) -> Result<Output, ToolError> {
        if name != "echo" {
            return Err(ToolError {
                code: "UNKNOWN_TOOL".into(),
                message: format!("this plugin has no tool named {name}"),
                details: None,
            });
        }
        // Strict: a missing or mistyped `text` is an error, never "".
        let args: serde_json::Value = serde_json::from_str(&arguments).map_err(|e| ToolError {
            code: "INVALID_ARGUMENTS".into(),
            message: format!("the arguments are not JSON: {e}"),
            details: None,
        })?;
        let Some(text) = args.get("text").and_then(|text| text.as_str()) else {
            return Err(ToolError {
                code: "INVALID_ARGUMENTS".into(),
                message: "\"text\" must be a string".into(),
                details: None,
            });
        };
        let text = text.to_string();
        Ok(Output {
            content: vec![ContentBlock::Text(text)],
            structured: None,
        })
    }
}

export!(Echo);
