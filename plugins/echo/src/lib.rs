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
        let args: serde_json::Value = serde_json::from_str(&arguments).unwrap_or_default();
        let text = args["text"].as_str().unwrap_or_default().to_string();
        Ok(Output {
            content: vec![ContentBlock::Text(text)],
            structured: None,
        })
    }
}

export!(Echo);
