//! `math`: a plugin with several tools, structured results and a business
//! error, to show the whole contract.
//!
//! - `add` and `divide` take two numbers and answer `{"result": n}`, declared
//!   by an output schema; `divide` refuses a zero divisor with the business
//!   error DIVISION_BY_ZERO.
//! - `stats` summarises a list of numbers as structured data only, and lets
//!   the host render the readable text.
//! - A result too large for a 64-bit float (`add` of 1e308 and 1e308) is the
//!   business error RESULT_OUT_OF_RANGE, not an infinity JSON cannot carry.
//! - Arguments are parsed strictly: the host validates them against the
//!   input schema first, but a plugin must not guess at what it was given
//!   (`toolhost call`, another host), so a missing or mistyped field is the
//!   business error INVALID_ARGUMENTS rather than a silent zero.

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
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid(format!("the arguments are not JSON: {e}")))?;
        match name.as_str() {
            "add" => {
                let (a, b) = (number(&args, "a")?, number(&args, "b")?);
                Ok(answer(finite("a + b", a + b)?))
            }
            "divide" => {
                let (a, b) = (number(&args, "a")?, number(&args, "b")?);
                if b == 0.0 {
                    return Err(ToolError {
                        code: "DIVISION_BY_ZERO".into(),
                        message: "cannot divide by zero".into(),
                        details: Some(json!({ "a": a }).to_string()),
                    });
                }
                Ok(answer(finite("a / b", a / b)?))
            }
            "stats" => {
                let numbers = args["numbers"]
                    .as_array()
                    .ok_or_else(|| invalid("\"numbers\" must be an array of numbers".into()))?
                    .iter()
                    .map(|item| {
                        item.as_f64().ok_or_else(|| {
                            invalid(format!("{item} in \"numbers\" is not a number"))
                        })
                    })
                    .collect::<Result<Vec<f64>, _>>()?;
                if numbers.is_empty() {
                    return Err(invalid("\"numbers\" must not be empty".into()));
                }
                let count = numbers.len() as f64;
                let sum = finite("the sum", numbers.iter().sum())?;
                // Summing x/n rather than dividing the sum keeps the mean
                // finite whenever every number is.
                let mean = numbers.iter().map(|x| x / count).sum::<f64>();
                let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
                let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let stats = json!({
                    "count": numbers.len(),
                    "sum": sum,
                    "mean": mean,
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

fn invalid(message: String) -> ToolError {
    ToolError {
        code: "INVALID_ARGUMENTS".into(),
        message,
        details: None,
    }
}

/// The number at `key`, or why it is not there.
fn number(args: &Value, key: &str) -> Result<f64, ToolError> {
    args.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| invalid(format!("{key:?} must be a number")))
}

/// `value`, if a 64-bit float can hold it.
fn finite(what: &str, value: f64) -> Result<f64, ToolError> {
    if value.is_finite() {
        return Ok(value);
    }
    Err(ToolError {
        code: "RESULT_OUT_OF_RANGE".into(),
        message: format!("{what} is too large for a 64-bit floating-point number"),
        details: None,
    })
}

/// A result given both ways: readable text and structured data.
fn answer(result: f64) -> Output {
    Output {
        content: vec![ContentBlock::Text(result.to_string())],
        structured: Some(json!({ "result": result }).to_string()),
    }
}

export!(Math);
