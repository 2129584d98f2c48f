//! What a tool may ask of the MCP client while a call runs: log messages,
//! progress, sampling (an LLM completion), elicitation (input from the
//! user) and the client's roots, one at a time or several at once
//! ([`ask`]). A client of MCP 2026-07-28 answers through input-required
//! results: the host runs the call again with the answers, so whatever a
//! tool does before it asks runs once per round. Each is safe to call at any time: without an MCP client behind
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

/// Asks the client for its roots (`roots/list`): the answer holds `roots`.
pub fn list_roots() -> Result<Value, String> {
    static ASKED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    ask(&[Request::roots(&format!("roots-{n}"))])
        .pop()
        .unwrap_or_else(|| Err("no answer".into()))
}

/// One request of [`ask`]: a key of the tool's choosing (unique within
/// the call; letters, digits, `_`, `.` and `-`), the method and its params.
pub struct Request {
    key: String,
    method: &'static str,
    params: Value,
}

impl Request {
    /// `elicitation/create`, with `message` and `requestedSchema`.
    pub fn elicit(key: &str, params: Value) -> Self {
        Request {
            key: key.into(),
            method: "elicitation/create",
            params,
        }
    }

    /// `sampling/createMessage`, with `messages` and `maxTokens`.
    pub fn create_message(key: &str, params: Value) -> Self {
        Request {
            key: key.into(),
            method: "sampling/createMessage",
            params,
        }
    }

    /// `roots/list`.
    pub fn roots(key: &str) -> Self {
        Request {
            key: key.into(),
            method: "roots/list",
            params: Value::Object(Default::default()),
        }
    }
}

/// Asks for several things at once: a client of MCP 2026-07-28 gets them
/// in one input-required result. Each answer, in order, is the client's
/// result or why there is none (such as a capability the client did not
/// declare).
pub fn ask(requests: &[Request]) -> Vec<Result<Value, String>> {
    use crate::bindings::toolhost::plugin0_2_0::input;
    let requests: Vec<input::Request> = requests
        .iter()
        .map(|request| input::Request {
            key: request.key.clone(),
            method: request.method.to_string(),
            params: request.params.to_string(),
        })
        .collect();
    input::ask(&requests)
        .into_iter()
        .map(|answer| parse(answer?))
        .collect()
}

fn parse(answer: String) -> Result<Value, String> {
    serde_json::from_str(&answer)
        .map_err(|error| format!("the client's answer is not JSON: {error}"))
}
