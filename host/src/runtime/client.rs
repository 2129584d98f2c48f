//! The channel back to the client of a call: what a running plugin may ask
//! of whoever made the call (log, progress, sampling, elicitation). The
//! `client` import's host side (`sandbox.rs`) forwards to it.
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
}

/// The client of the call a sandbox runs, if any.
pub type CallClient = Option<Arc<dyn ClientChannel>>;
