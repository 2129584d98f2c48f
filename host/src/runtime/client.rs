//! The channel back to the client of a call: what a running plugin may ask
//! of whoever made the call (log, progress, sampling, elicitation, roots).
//! The `client` and `input` imports' host side (`sandbox.rs`) forwards to
//! it, every request keyed (`input.ask` by the plugin's keys, the single
//! requests by their method and order), so that a front that answers
//! requests from a later round (MCP's input-required results) finds each
//! answer again.
//!
//! The runtime does not know what a client is. A front that has one (MCP)
//! hands a [`ClientChannel`] to the call; fronts without one (REST, CGI, the
//! CLI) hand none, and the plugin gets a clear `err` from the requests and
//! silence from the notifications, never a trap. Why a request has no
//! answer is an [`AskError`], whose sentence is that `err`.

use std::sync::Arc;

pub use super::bindings::toolhost::plugin0_1_0::client::LogLevel;

/// A link back to the client of one call. Notifications are awaited, so
/// they reach the client in the order the plugin sent them.
#[wasmtime_wasi::async_trait]
pub trait ClientChannel: Send + Sync {
    async fn log(&self, level: LogLevel, message: String);
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
    /// `sampling/createMessage`: JSON params in, JSON result out.
    async fn create_message(&self, params: String) -> Result<String, AskError>;
    /// `elicitation/create`: JSON params in, JSON result out.
    async fn elicit(&self, params: String) -> Result<String, AskError>;
    /// `roots/list`: the JSON result.
    async fn list_roots(&self) -> Result<String, AskError> {
        Err(AskError::Unsupported(ROOTS.into()))
    }
    /// Several requests, each under its key; answers in the same order.
    /// By default one after another, as the single requests.
    async fn ask(&self, requests: Vec<InputRequest>) -> Vec<Result<String, AskError>> {
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            answers.push(match request.method.as_str() {
                ELICIT => self.elicit(request.params).await,
                SAMPLE => self.create_message(request.params).await,
                ROOTS => self.list_roots().await,
                _ => Err(AskError::UnknownMethod(request.method)),
            });
        }
        answers
    }
}

/// Why a request of a plugin to its client has no answer. Its `Display`
/// is the sentence the plugin gets as `err` (the WIT imports return
/// strings: `sandbox.rs` turns it into one there).
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The call came over REST, CGI or the CLI, with no client to ask.
    #[error(
        "there is no MCP client behind this call (it came over REST, CGI or the CLI; a REST \
         client that can answer says so with Toolhost-Input)"
    )]
    NoClient,
    /// The client did not declare the capability the method needs.
    #[error("the client does not support {0}")]
    Unsupported(String),
    /// The method is none of [`ELICIT`], [`SAMPLE`] and [`ROOTS`].
    #[error("{0} is not a request a plugin may make")]
    UnknownMethod(String),
    /// The plugin's params are not the method's.
    #[error("invalid {method} params: {source}")]
    InvalidParams {
        method: String,
        source: serde_json::Error,
    },
    /// The client was asked and answered with an error, or went away.
    #[error("{method} failed: {source}")]
    Failed {
        method: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The client's answer could not be written as JSON text.
    #[error(transparent)]
    AnswerNotJson(serde_json::Error),
    /// The client is asked in an input-required result, and the call runs
    /// again with its answer (the 2026-07-28 revision).
    #[error(
        "the client is asked for this in an input-required result; the call runs again with \
         its answer"
    )]
    AskedLater,
    /// The answer the client sent is not a result of the method.
    #[error(transparent)]
    NotAResult(#[from] NotAResult),
    /// The client's channel gave no answer to a request.
    #[error("the client gave no answer")]
    NoAnswer,
}

/// An answer that does not read as a result of its request's method (an
/// elicitation answered with a list of roots, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer is not a result of {method}")]
pub struct NotAResult {
    pub method: String,
}

/// The methods a plugin may ask its client for.
pub const ELICIT: &str = "elicitation/create";
pub const SAMPLE: &str = "sampling/createMessage";
pub const ROOTS: &str = "roots/list";

/// One request of a plugin to its client: its key within the call, its
/// MCP method and the JSON text of its params.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    pub key: String,
    pub method: String,
    pub params: String,
}

/// The client of the call a sandbox runs, if any.
pub type CallClient = Option<Arc<dyn ClientChannel>>;
