//! What a tool may ask of the MCP client while a call runs: log messages,
//! progress, sampling (an LLM completion) and elicitation (input from the
//! user). Each is safe to call at any time: without an MCP client behind
//! the call (REST, CGI, the CLI), or when the client did not declare the
//! capability, `log` and `progress` do nothing and the requests return
//! `Err` with a sentence saying why.

use serde_json::Value;

use crate::bindings::toolhost::plugin0_1_0::client as wit;

pub use wit::LogLevel;

/// Sends `notifications/message` at `level`, if the client asked for it.
pub fn log(level: LogLevel, message: &str) {
    wit::log(level, message);
}

/// Sends `notifications/progress`, when the request carried a progress
/// token. `progress` should grow with every call.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    wit::progress(progress, total, message);
}

/// Asks the client for an LLM completion (`sampling/createMessage`):
/// `params` and the answer are that request's params and result, for
/// example `json!({"messages": [...], "maxTokens": 100})`.
pub fn create_message(params: &Value) -> Result<Value, String> {
    parse(wit::create_message(&params.to_string())?)
}

/// Asks the user for input (`elicitation/create`): `params` holds
/// `message` and `requestedSchema`; the answer `action` and `content`.
pub fn elicit(params: &Value) -> Result<Value, String> {
    parse(wit::elicit(&params.to_string())?)
}

fn parse(answer: String) -> Result<Value, String> {
    serde_json::from_str(&answer)
        .map_err(|error| format!("the client's answer is not JSON: {error}"))
}
