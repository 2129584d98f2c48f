//! What a running plugin's `client` import reaches over MCP: log messages
//! at the session's level, progress for the request's token, and sampling,
//! elicitation and roots relayed to the client when it declared them (the
//! revisions before 2026-07-28; from it on, `input_round.rs` answers).

// rmcp marks logging and sampling deprecated (see `mod.rs`).
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use crate::runtime::{AskError, ClientChannel, LogLevel, ROOTS};

/// What a plugin's `client` import reaches during one MCP call.
pub(super) struct SessionClient {
    pub(super) peer: Peer<RoleServer>,
    pub(super) progress_token: Option<ProgressToken>,
    pub(super) log_level: Arc<Mutex<LoggingLevel>>,
}

#[wasmtime_wasi::async_trait]
impl ClientChannel for SessionClient {
    async fn log(&self, level: LogLevel, message: String) {
        let threshold = *self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        if severity(logging_level(level)) < severity(threshold) {
            return;
        }
        let level = logging_level(level);
        let _ = self
            .peer
            .notify_logging_message(LoggingMessageNotificationParam::new(level, json!(message)))
            .await;
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        let params = json!({ "progressToken": token, "progress": progress, "total": total, "message": message });
        if let Ok(params) = serde_json::from_value::<ProgressNotificationParam>(strip_nulls(params))
        {
            let _ = self.peer.notify_progress(params).await;
        }
    }

    async fn create_message(&self, params: String) -> Result<String, AskError> {
        let supported = self.client_supports(|c| c.sampling.is_some());
        relay(supported, "sampling/createMessage", &params, |params| {
            self.peer.create_message(params)
        })
        .await
    }

    async fn elicit(&self, params: String) -> Result<String, AskError> {
        let supported = self.client_supports(|c| c.elicitation.is_some());
        relay(supported, "elicitation/create", &params, |params| {
            self.peer.create_elicitation(params)
        })
        .await
    }

    async fn list_roots(&self) -> Result<String, AskError> {
        if !self.client_supports(|c| c.roots.is_some()) {
            return Err(AskError::Unsupported(ROOTS.into()));
        }
        let answer = self.peer.list_roots().await.map_err(|e| AskError::Failed {
            method: ROOTS.into(),
            source: e.into(),
        })?;
        serde_json::to_string(&answer).map_err(AskError::AnswerNotJson)
    }
}

impl SessionClient {
    fn client_supports(&self, capability: impl Fn(&ClientCapabilities) -> bool) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| capability(&info.capabilities))
    }
}

/// Relays one request of a plugin to the client: the capability is
/// checked, the plugin's JSON params parsed into the SDK's type, the answer
/// returned as JSON. Every failure is an [`AskError`], a sentence for the
/// plugin.
async fn relay<Params, Answer, Sent>(
    supported: bool,
    method: &str,
    params: &str,
    send: impl FnOnce(Params) -> Sent,
) -> Result<String, AskError>
where
    Params: serde::de::DeserializeOwned,
    Answer: serde::Serialize,
    Sent: Future<Output = Result<Answer, rmcp::ServiceError>>,
{
    if !supported {
        return Err(AskError::Unsupported(method.into()));
    }
    let params: Params =
        serde_json::from_str(params).map_err(|source| AskError::InvalidParams {
            method: method.into(),
            source,
        })?;
    let answer = send(params).await.map_err(|e| AskError::Failed {
        method: method.into(),
        source: e.into(),
    })?;
    serde_json::to_string(&answer).map_err(AskError::AnswerNotJson)
}

fn strip_nulls(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.retain(|_, v| !v.is_null());
    }
    value
}

/// Syslog order, least severe first (rmcp's level type has no ordering).
pub(super) fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

pub(super) fn logging_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}
