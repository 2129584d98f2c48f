//! MCP over Streamable HTTP at `/mcp`: rmcp's transport, twice.
//!
//! - The session service does what MCP clients expect: `initialize` opens a
//!   session, requests carry `Mcp-Session-Id`, answers and notifications
//!   (list changes, logs, progress) stream as SSE, GET opens the session's
//!   notification stream. Requests naming the stateless 2026-07-28 revision
//!   are served without a session by this service too.
//! - The one-shot service answers a lone JSON-RPC request that carries no
//!   session (`curl -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'`)
//!   with plain JSON, as if it had been the whole conversation. Without it
//!   such a request would be refused for want of a session.
//!
//! The dispatcher answers a POST whose body is not JSON (-32700) or not a
//! JSON-RPC message (-32600) itself, with a JSON-RPC error (rmcp would answer
//! plain text). It sends a POST without `Mcp-Session-Id` whose message is a
//! request other than `initialize` to the one-shot service, everything else
//! to the session service.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use serde_json::{Value, json};

use crate::envelope::{Envelope, TextFormat};
use crate::mcp::McpFront;
use crate::registry::Registry;

type McpService = StreamableHttpService<McpFront, LocalSessionManager>;

struct Services {
    sessions: McpService,
    oneshot: McpService,
    max_body_bytes: usize,
}

pub struct McpHttpSettings {
    pub text_format: TextFormat,
    pub allowed_hosts: Vec<String>,
    pub max_body_bytes: usize,
    /// Cancelled at shutdown: ends every session's open streams.
    pub shutdown: CancellationToken,
}

/// The `/mcp` route.
pub fn router(registry: Arc<Registry>, settings: McpHttpSettings) -> Router {
    let service = |legacy_sessions: bool| {
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(settings.allowed_hosts.clone())
            .with_legacy_session_mode(legacy_sessions);
        config.json_response = !legacy_sessions;
        config.cancellation_token = settings.shutdown.clone();
        config.max_request_body_bytes = settings.max_body_bytes;
        let (registry, text_format) = (registry.clone(), settings.text_format);
        StreamableHttpService::new(
            move || Ok(McpFront::new(registry.clone(), text_format)),
            LocalSessionManager::default().into(),
            config,
        )
    };
    let services = Arc::new(Services {
        sessions: service(true),
        oneshot: service(false),
        max_body_bytes: settings.max_body_bytes,
    });
    Router::new()
        .route("/mcp", any(dispatch))
        .with_state(services)
}

async fn dispatch(State(services): State<Arc<Services>>, request: Request) -> Response {
    if request.method() != Method::POST {
        return forward(&services.sessions, request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, services.max_body_bytes).await else {
        return Envelope::payload_too_large(services.max_body_bytes).into_response();
    };
    let message = match serde_json::from_slice::<Value>(&bytes) {
        Ok(message) => message,
        Err(e) => return rpc_error(-32700, format!("Parse error: {e}")),
    };
    if let Err(problem) = check_message(&message) {
        return rpc_error(-32600, format!("Invalid Request: {problem}"));
    }
    let has_session = parts.headers.contains_key("mcp-session-id");
    let target = if !has_session && is_lone_request(&message) {
        &services.oneshot
    } else {
        &services.sessions
    };
    forward(target, Request::from_parts(parts, Body::from(bytes))).await
}

/// A JSON-RPC 2.0 error answer, for a message with no usable id.
fn rpc_error(code: i64, message: String) -> Response {
    let body =
        json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// Checks the JSON-RPC 2.0 envelope of a message (or of each message of a
/// batch): `"jsonrpc": "2.0"`, and a method, or a result or error.
fn check_message(message: &Value) -> Result<(), String> {
    match message {
        Value::Array(batch) if !batch.is_empty() => batch.iter().try_for_each(check_message),
        Value::Object(object) => {
            if object.get("jsonrpc") != Some(&json!("2.0")) {
                return Err(r#"jsonrpc must be "2.0""#.into());
            }
            let is_call = object.get("method").is_some_and(Value::is_string);
            let is_answer = object.contains_key("id")
                && (object.contains_key("result") || object.contains_key("error"));
            if is_call || is_answer {
                Ok(())
            } else {
                Err("a message needs a method, or a result or error".into())
            }
        }
        _ => Err("a message must be a JSON object".into()),
    }
}

/// A single JSON-RPC request (it has an `id`) that is not `initialize`.
fn is_lone_request(message: &Value) -> bool {
    message.get("id").is_some()
        && message
            .get("method")
            .and_then(|method| method.as_str())
            .is_some_and(|method| method != "initialize")
}

async fn forward(service: &McpService, request: Request) -> Response {
    match service.clone().oneshot(request).await {
        Ok(response) => response.map(Body::new).into_response(),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lone_non_initialize_requests_are_one_shot() {
        let lone = |text: &str| is_lone_request(&serde_json::from_str(text).unwrap());
        assert!(lone(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
        assert!(!lone(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!lone(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        ));
        assert!(!lone(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#));
    }

    #[test]
    fn json_rpc_envelopes_are_checked() {
        let check = |text: &str| check_message(&serde_json::from_str(text).unwrap());
        assert!(check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(check(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_ok());
        assert!(check(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_ok());
        assert!(check(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
        assert!(check(r#"{"id":1,"method":"ping"}"#).is_err());
        assert!(check(r#"[]"#).is_err());
        assert!(check(r#"42"#).is_err());
    }
}
