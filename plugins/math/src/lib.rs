//! `math`: a plugin with several tools, structured results and a business
//! error, to show the whole contract.
//!
//! - `add` and `divide` take two numbers and answer `{"result": n}` with the
//!   number as text beside it; `divide` refuses a zero divisor with the
//!   business error DIVISION_BY_ZERO.
//! - `stats` summarises a list of numbers as structured data only, and lets
//!   the host render the readable text.
//! - A result too large for a 64-bit float (`add` of 1e308 and 1e308) is the
//!   business error RESULT_OUT_OF_RANGE, not an infinity JSON cannot carry.

use toolhost_plugin::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TwoNumbers {
    /// First operand
    a: f64,
    /// Second operand
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Answer {
    result: f64,
}

#[derive(Deserialize, JsonSchema)]
struct Numbers {
    #[schemars(length(min = 1))]
    numbers: Vec<f64>,
}

#[derive(Serialize, JsonSchema)]
struct Stats {
    count: usize,
    sum: f64,
    mean: f64,
    min: f64,
    max: f64,
}

/// `value`, if a 64-bit float can hold it.
fn finite(what: &str, value: f64) -> Result<f64, ToolError> {
    if value.is_finite() {
        return Ok(value);
    }
    let message = format!("{what} is too large for a 64-bit floating-point number");
    Err(ToolError::new("RESULT_OUT_OF_RANGE", message))
}

/// The result as readable text and as structured data.
fn answer(what: &str, value: f64) -> Result<Structured<Answer>, ToolError> {
    let result = finite(what, value)?;
    Ok(Structured::new(Answer { result }).text(result.to_string()))
}

fn add(TwoNumbers { a, b }: TwoNumbers) -> Result<Structured<Answer>, ToolError> {
    answer("a + b", a + b)
}

fn divide(TwoNumbers { a, b }: TwoNumbers) -> Result<Structured<Answer>, ToolError> {
    if b == 0.0 {
        let error = ToolError::new("DIVISION_BY_ZERO", "cannot divide by zero");
        return Err(error.with_details(json!({ "a": a })));
    }
    answer("a / b", a / b)
}

fn stats(Numbers { numbers }: Numbers) -> Result<Stats, ToolError> {
    if numbers.is_empty() {
        return Err(ToolError::new(
            "INVALID_ARGUMENTS",
            "\"numbers\" must not be empty",
        ));
    }
    let count = numbers.len() as f64;
    Ok(Stats {
        count: numbers.len(),
        sum: finite("the sum", numbers.iter().sum())?,
        // Summing x/n rather than dividing the sum keeps the mean finite
        // whenever every number is.
        mean: numbers.iter().map(|x| x / count).sum(),
        min: numbers.iter().copied().fold(f64::INFINITY, f64::min),
        max: numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// Every math tool is a pure function of its arguments.
fn pure(tool: Tool, title: &str) -> Tool {
    tool.title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn tools() -> Tools {
    Tools::new()
        .tool(pure(Tool::new("add", "Adds two numbers.", add), "Add"))
        .tool(pure(
            Tool::new(
                "divide",
                "Divides a by b. Fails with DIVISION_BY_ZERO when b is 0.",
                divide,
            ),
            "Divide",
        ))
        .tool(pure(
            Tool::new(
                "stats",
                "Count, sum, mean, minimum and maximum of a list of numbers.",
                stats,
            ),
            "Statistics",
        ))
}

toolhost_plugin::export!(tools);
