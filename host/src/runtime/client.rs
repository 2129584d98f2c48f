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
//! silence from the notifications, never a trap.

use std::sync::Arc;

pub use super::bindings::toolhost::plugin0_1_0::client::LogLevel;

/// A link back to the client of one call. Notifications are awaited, so
/// they reach the client in the order the plugin sent them.
#[wasmtime_wasi::async_trait]
pub trait ClientChannel: Send + Sync {
    async fn log(&self, level: LogLevel, message: String);
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
    /// `sampling/createMessage`: JSON params in, JSON result out.
    async fn create_message(&self, params: String) -> Result<String, String>;
    /// `elicitation/create`: JSON params in, JSON result out.
    async fn elicit(&self, params: String) -> Result<String, String>;
    /// `roots/list`: the JSON result.
    async fn list_roots(&self) -> Result<String, String> {
        Err("the client does not support roots/list".into())
    }
    /// Several requests, each under its key; answers in the same order.
    /// By default one after another, as the single requests.
    async fn ask(&self, requests: Vec<InputRequest>) -> Vec<Result<String, String>> {
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            answers.push(match request.method.as_str() {
                ELICIT => self.elicit(request.params).await,
                SAMPLE => self.create_message(request.params).await,
                ROOTS => self.list_roots().await,
                other => Err(format!("{other} is not a request a plugin may make")),
            });
        }
        answers
    }
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
