//! The `client` import of the plugin world: what a running call may ask of
//! the client that made it (log, progress, sampling, elicitation).
//!
//! The runtime does not know what a client is. A front that has one (MCP)
//! hands a [`ClientChannel`] to the call; fronts without one (REST, CGI, the
//! CLI) hand none, and the plugin gets a clear `err` from the requests and
//! silence from the notifications, never a trap.

use std::sync::Arc;

use super::bindings::toolhost::plugin::client::Host;
use super::sandbox::Sandbox;

pub use super::bindings::toolhost::plugin::client::LogLevel;

/// Why a request to the client cannot be made when the call has no client.
const NO_CLIENT: &str =
    "there is no MCP client behind this call (it came over REST, CGI or the CLI)";

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

impl Host for Sandbox {
    async fn log(&mut self, level: LogLevel, message: String) {
        if let Some(client) = &self.client {
            client.log(level, message).await;
        }
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(client) = &self.client {
            client.progress(progress, total, message).await;
        }
    }

    async fn create_message(&mut self, params: String) -> Result<String, String> {
        match self.client.clone() {
            Some(client) => client.create_message(params).await,
            None => Err(NO_CLIENT.into()),
        }
    }

    async fn elicit(&mut self, params: String) -> Result<String, String> {
        match self.client.clone() {
            Some(client) => client.elicit(params).await,
            None => Err(NO_CLIENT.into()),
        }
    }
}
