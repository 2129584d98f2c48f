//! `math`: a plugin with several tools, structured results and a business
//! error, to show the whole contract.
//!
//! - `add` and `divide` take two numbers and answer `{"result": n}`, declared
//!   by an output schema; `divide` refuses a zero divisor with the business
//!   error DIVISION_BY_ZERO.
//! - `stats` summarises a list of numbers as structured data only, and lets
//!   the host render the readable text.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use exports::toolhost::plugin::tools::{Annotations, ContentBlock, Guest, Output, Tool, ToolError};
use serde_json::{Value, json};

/// Every math tool is a pure function of its arguments.
fn pure() -> Option<Annotations> {
    Some(Annotations {
        read_only: Some(true),
        destructive: Some(false),
        idempotent: Some(true),
        open_world: Some(false),
    })
}

const TWO_NUMBERS: &str = r#"{
    "type": "object",
    "properties": {
        "a": { "type": "number", "description": "First operand" },
        "b": { "type": "number", "description": "Second operand" }
    },
    "required": ["a", "b"],
    "additionalProperties": false
}"#;

const ONE_RESULT: &str = r#"{
    "type": "object",
    "properties": { "result": { "type": "number" } },
    "required": ["result"]
}"#;

struct Math;

impl Guest for Math {
    fn list_tools() -> Vec<Tool> {
        vec![
            Tool {
                name: "add".into(),
                title: Some("Add".into()),
                description: "Adds two numbers.".into(),
                input_schema: TWO_NUMBERS.into(),
                output_schema: Some(ONE_RESULT.into()),
                annotations: pure(),
            },
            Tool {
                name: "divide".into(),
                title: Some("Divide".into()),
                description: "Divides a by b. Fails with DIVISION_BY_ZERO when b is 0.".into(),
                input_schema: TWO_NUMBERS.into(),
                output_schema: Some(ONE_RESULT.into()),
                annotations: pure(),
            },
            Tool {
                name: "stats".into(),
                title: Some("Statistics".into()),
                description: "Count, sum, mean, minimum and maximum of a list of numbers.".into(),
                input_schema: r#"{
                    "type": "object",
                    "properties": {
                        "numbers": { "type": "array", "items": { "type": "number" }, "minItems": 1 }
                    },
                    "required": ["numbers"]
                }"#
                .into(),
                output_schema: Some(
                    r#"{
                    "type": "object",
                    "properties": {
                        "count": { "type": "integer" },
                        "sum": { "type": "number" },
                        "mean": { "type": "number" },
                        "min": { "type": "number" },
                        "max": { "type": "number" }
                    },
                    "required": ["count", "sum", "mean", "min", "max"]
                }"#
                    .into(),
                ),
                annotations: pure(),
            },
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<Output, ToolError> {
        // The host has validated `arguments` against the input schema, so
        // the fields are present and have the declared types.
        let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
        let number = |key: &str| args[key].as_f64().unwrap_or_default();
        match name.as_str() {
            "add" => Ok(answer(number("a") + number("b"))),
            "divide" if number("b") == 0.0 => Err(ToolError {
                code: "DIVISION_BY_ZERO".into(),
                message: "cannot divide by zero".into(),
                details: Some(json!({ "a": number("a") }).to_string()),
            }),
            "divide" => Ok(answer(number("a") / number("b"))),
            "stats" => {
                let numbers: Vec<f64> = args["numbers"]
                    .as_array()
                    .map(|items| items.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default();
                let sum: f64 = numbers.iter().sum();
                let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
                let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let stats = json!({
                    "count": numbers.len(),
                    "sum": sum,
                    "mean": sum / numbers.len() as f64,
                    "min": min,
                    "max": max,
                });
                // No content blocks: the host renders the structured data as
                // text (JSON, or a markdown block with `?format=markdown`).
                Ok(Output {
                    content: vec![],
                    structured: Some(stats.to_string()),
                })
            }
            other => Err(ToolError {
                code: "UNKNOWN_TOOL".into(),
                message: format!("this plugin has no tool named {other}"),
                details: None,
            }),
        }
    }
}

/// A result given both ways: readable text and structured data.
fn answer(result: f64) -> Output {
    Output {
        content: vec![ContentBlock::Text(result.to_string())],
        structured: Some(json!({ "result": result }).to_string()),
    }
}

export!(Math);
