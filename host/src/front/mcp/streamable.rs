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
//! The dispatcher in front of both:
//! - answers a POST without `Mcp-Session-Id` whose message is a plain
//!   `tools/call` or `tools/list` itself, read without a JSON value and
//!   without rmcp's per-request service (`fast/`);
//! - checks every other POSTed message (`jsonrpc.rs`) and answers a
//!   malformed one itself with a JSON-RPC error; sends any other request
//!   but `initialize` without a session to the one-shot service,
//!   everything else to the session service;
//! - answers an unknown session with 404 and a JSON-RPC error, DELETE of an
//!   open session with 204, and `initialize` past `--max-sessions` (or the
//!   person's `--max-sessions-per-person`) with 503;
//! - lets a session answer only to the person who opened it (anyone else
//!   gets the 404 of an unknown session), and ends it after
//!   `--session-idle-secs` without a request (unless a client listens on
//!   its GET stream) or when its token is revoked (`sessions.rs`);
//! - turns every plain-text refusal of rmcp (406, 415, 405, 400) into a
//!   JSON-RPC error object with `Content-Type: application/json`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use serde_json::Value;

use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::edge::auth::{Authority, Identity};
use crate::edge::guard::Requester;
use crate::front::lists::ToolLists;
use crate::front::mcp::McpFront;
use crate::front::mcp::catalog_methods::CatalogLimits;
use crate::front::mcp::fast::FastPath;
use crate::front::mcp::jsonrpc::{self, INVALID_REQUEST};
use crate::front::mcp::legacy_tasks::{self, LegacyTasks};
use crate::front::mcp::sessions::{SESSION_HEADER, Sessions};
use crate::registry::Registry;
use crate::registry::view::View;

type McpService = StreamableHttpService<McpFront, LocalSessionManager>;

/// The JSON-RPC code for an unknown or closed session (the code the MCP
/// SDKs use).
const SESSION_NOT_FOUND: i64 = -32001;
use crate::edge::holds::{Hold, Holds, Refused, Ticket};
use crate::edge::responses::JSON_RPC_SERVER_BUSY as SERVER_BUSY;
/// The JSON-RPC code for an internal error.
const INTERNAL_ERROR: i64 = -32603;

struct Services {
    sessions: McpService,
    oneshot: McpService,
    /// A lone stateless `tools/call` or `tools/list`, without rmcp's
    /// per-request service (`fast/`).
    fast: FastPath,
    manager: Arc<LocalSessionManager>,
    /// Who holds each session, and the task that ends idle and revoked
    /// ones.
    held: Arc<Sessions>,
    max_body_bytes: usize,
    max_sessions: usize,
    /// Each person's open streams (`--max-streams-per-person`): the GET
    /// stream and `subscriptions/listen`, with `/events`.
    holds: Arc<Holds>,
    /// Tasks as the 2025-11-25 revision has them (`legacy_tasks.rs`).
    legacy: LegacyTasks,
}

pub(crate) struct McpHttpSettings {
    /// What MCP's `requestState` is sealed with, and the tasks.
    pub(crate) rounds: super::Rounds,
    pub(crate) text_format: TextFormat,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) max_body_bytes: usize,
    /// How many sessions may be open at once; `initialize` past it is
    /// refused with HTTP 503.
    pub(crate) max_sessions: usize,
    /// How many of them one person may hold.
    pub(crate) max_sessions_per_person: usize,
    /// The longest resource URI, and how many subscriptions one person
    /// may hold over their sessions.
    pub(crate) max_uri_bytes: usize,
    pub(crate) max_subscriptions_per_person: usize,
    /// Who may use the server: a session ends when its token is revoked.
    pub(crate) authority: Arc<Authority>,
    /// A session with no request for this long, and no client listening
    /// on its GET stream, is closed and its memory released.
    pub(crate) session_idle: Duration,
    /// Cancelled at shutdown: ends every session's open streams.
    pub(crate) shutdown: CancellationToken,
    /// Each person's open streams, shared with `/events`.
    pub(crate) holds: Arc<Holds>,
}

/// How many MCP sessions are open, and how many requests the fast path
/// answered, for `/metrics`.
#[derive(Clone)]
pub(crate) struct OpenSessions(Arc<LocalSessionManager>, Arc<AtomicU64>);

impl OpenSessions {
    pub(crate) fn fast_answers(&self) -> u64 {
        self.1.load(Ordering::Relaxed)
    }

    /// `None` in the instant a session is being added or removed.
    pub(crate) fn count(&self) -> Option<usize> {
        self.0
            .sessions
            .try_read()
            .ok()
            .map(|sessions| sessions.len())
    }
}

/// The MCP routes, and a reader of how many sessions they hold.
pub(crate) fn router(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    settings: McpHttpSettings,
) -> (Router, OpenSessions) {
    // rmcp's own idle timer counts messages only and would end a session
    // whose client just listens: expiry is `sessions.rs`'s.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let limits = CatalogLimits::new(
        settings.max_uri_bytes,
        settings.max_subscriptions_per_person,
    );
    let held = Sessions::start(
        manager.clone(),
        settings.session_idle,
        settings.max_sessions_per_person,
        settings.authority.clone(),
        limits.clone(),
        settings.shutdown.clone(),
    );
    // One set of tool lists for every session and both services.
    let lists = Arc::new(ToolLists::default());
    let service = |legacy_sessions: bool| {
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(settings.allowed_hosts.clone())
            .with_legacy_session_mode(legacy_sessions);
        config.json_response = !legacy_sessions;
        config.cancellation_token = settings.shutdown.clone();
        config.max_request_body_bytes = settings.max_body_bytes;
        let (registry, calls, text_format, lists, limits, authority, rounds) = (
            registry.clone(),
            calls.clone(),
            settings.text_format,
            lists.clone(),
            limits.clone(),
            settings.authority.clone(),
            settings.rounds.clone(),
        );
        StreamableHttpService::new(
            move || {
                Ok(McpFront::new(
                    registry.clone(),
                    calls.clone(),
                    text_format,
                    lists.clone(),
                    limits.clone(),
                    Some(authority.clone()),
                    rounds.clone(),
                ))
            },
            manager.clone(),
            config,
        )
    };
    let answered = Arc::new(AtomicU64::new(0));
    let fast = FastPath {
        answered: answered.clone(),
        registry: registry.clone(),
        calls: calls.clone(),
        text_format: settings.text_format,
        lists: lists.clone(),
        allowed_hosts: settings.allowed_hosts.clone(),
        shutdown: settings.shutdown.clone(),
        input_keys: settings.rounds.input_keys.clone(),
    };
    let services = Arc::new(Services {
        sessions: service(true),
        oneshot: service(false),
        fast,
        manager: manager.clone(),
        held,
        max_body_bytes: settings.max_body_bytes,
        max_sessions: settings.max_sessions,
        holds: settings.holds.clone(),
        legacy: LegacyTasks {
            registry: registry.clone(),
            calls: calls.clone(),
            text_format: settings.text_format,
            rounds: settings.rounds.clone(),
            shutdown: settings.shutdown.clone(),
        },
    });
    let router = Router::new()
        .route("/mcp", any(dispatch))
        .with_state(services);
    (router, OpenSessions(manager, answered))
}

async fn dispatch(State(services): State<Arc<Services>>, request: Request) -> Response {
    let response = match *request.method() {
        Method::POST => post(&services, request).await,
        Method::DELETE => delete(&services, request).await,
        Method::GET => listen(&services, request).await,
        _ => forward(&services.sessions, request).await,
    };
    as_json_rpc_error(response).await
}

async fn post(services: &Services, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, services.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let refusal = crate::edge::body::unread(&error, services.max_body_bytes);
            let status = StatusCode::from_u16(refusal.http_status())
                .unwrap_or(StatusCode::PAYLOAD_TOO_LARGE);
            let message = refusal
                .error
                .map_or_else(String::new, |error| error.message);
            return rpc_error(
                status,
                Value::Null,
                INVALID_REQUEST,
                &format!("Invalid Request: {message}"),
            );
        }
    };
    let requester = requester_of(&parts.extensions);
    let session = parts.headers.get(SESSION_HEADER).cloned();
    if session.is_none() {
        let view = requester
            .as_ref()
            .map_or_else(View::all, |identity| identity.tools.clone());
        if let Some(answer) = services.fast.answer(&parts, &bytes, view).await {
            return answer;
        }
    }
    let message = match jsonrpc::parse(&bytes) {
        Ok(message) => message,
        Err(rejection) => {
            // A well-formed request with bad params is answered like any
            // other JSON-RPC error (HTTP 200), so that clients read the
            // error object rather than stopping at the status.
            let status = if rejection.code == jsonrpc::INVALID_PARAMS && !rejection.id.is_null() {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            return rpc_error(
                status,
                rejection.id.clone(),
                rejection.code,
                &rejection.message,
            );
        }
    };
    if let Some(id) = &session {
        let Some(id) = id
            .to_str()
            .ok()
            .filter(|id| services.held.answers_to(id, requester.as_ref()))
        else {
            return session_not_found(message.get("id").cloned().unwrap_or(Value::Null));
        };
        if !services
            .manager
            .has_session(&id.to_string().into())
            .await
            .unwrap_or(false)
        {
            return session_not_found(message.get("id").cloned().unwrap_or(Value::Null));
        }
        services.held.used(id);
    }
    let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    let mut opening = None;
    if session.is_none() && initialize {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let refuse =
            |why: String| rpc_error(StatusCode::SERVICE_UNAVAILABLE, id, SERVER_BUSY, &why);
        let open = services.manager.sessions.read().await.len();
        if open >= services.max_sessions {
            return refuse(format!(
                "the server already has its maximum of {} sessions open (--max-sessions); \
                 close one (DELETE /mcp) or try again later",
                services.max_sessions
            ));
        }
        match services.held.open(requester.as_ref()) {
            Ok(slot) => opening = Some(slot),
            Err(full) => return refuse(full.to_string()),
        }
    }
    // Tasks as the 2025-11-25 revision has them are answered in front of
    // rmcp; a `tasks/result`, which waits, is a stream of its person's.
    if legacy_tasks::speaks_legacy(&parts.headers) {
        let waiting = match legacy_tasks::waits(&message) {
            true => match open_stream(services, &parts.extensions) {
                Ok(open) => Some(open),
                Err(refused) => return crate::edge::guard::busy(true, &refused),
            },
            false => None,
        };
        if let Some(answer) = services.legacy.answer(&message, requester.as_ref()).await {
            drop(waiting);
            return answer;
        }
    }
    let legacy_list = legacy_tasks::speaks_legacy(&parts.headers)
        && services.legacy.rounds.tasks.is_some()
        && message.get("method").and_then(Value::as_str) == Some("tools/list");
    let legacy_initialize = initialize
        && services.legacy.rounds.tasks.is_some()
        && message
            .get("params")
            .and_then(|params| params.get("protocolVersion"))
            .and_then(Value::as_str)
            == Some(legacy_tasks::REVISION);
    // A `subscriptions/listen` answer is a stream: counted for its person.
    let stream = match message.get("method").and_then(Value::as_str) {
        Some("subscriptions/listen") => match open_stream(services, &parts.extensions) {
            Ok(open) => Some(open),
            Err(refused) => return crate::edge::guard::busy(true, &refused),
        },
        _ => None,
    };
    let lone = session.is_none() && is_lone_request(&message);
    let request = Request::from_parts(parts, Body::from(bytes));
    let target = if lone {
        &services.oneshot
    } else {
        &services.sessions
    };
    let mut response = forward(target, request).await;
    if legacy_initialize {
        response = rewritten(response, legacy_tasks::declare_in);
    }
    if legacy_list {
        let registry = services.legacy.registry.clone();
        response = rewritten(response, move |body| {
            legacy_tasks::mark_task_tools(body, &registry)
        });
    }
    if let Some(opening) = opening
        && let Some(opened) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|id| id.to_str().ok())
    {
        services.held.opened(opened, requester, opening);
    }
    match stream {
        Some(open) => held_until_sent(response, open),
        None => response,
    }
}

/// `response` with each frame that carries its answer (a JSON body, or
/// the SSE event) rewritten by `change` (`legacy_tasks.rs`: what the
/// 2025-11-25 revision's tasks add to `initialize` and `tools/list`).
fn rewritten(
    mut response: Response,
    change: impl Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync + 'static,
) -> Response {
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response.map(|body| {
        Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
            frame.map_data(|bytes| change(&bytes).map_or(bytes, axum::body::Bytes::from))
        }))
    })
}

/// A stream for the request's person (`edge/holds.rs`), or its refusal.
fn open_stream(services: &Services, extensions: &axum::http::Extensions) -> Result<Hold, Refused> {
    let peer = extensions.get::<Ticket>().map(|ticket| ticket.peer);
    services
        .holds
        .stream(requester_of(extensions).as_ref(), peer)
}

/// `response` with `hold` kept until its body has been sent whole.
fn held_until_sent(response: Response, hold: Hold) -> Response {
    response.map(|body| {
        Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
            let _open = &hold;
            frame
        }))
    })
}

/// The identity the guard found for a request (`None` on an open server).
fn requester_of(extensions: &axum::http::Extensions) -> Option<Identity> {
    extensions
        .get::<Requester>()
        .and_then(|requester| requester.0.clone())
}

/// GET: the session's stream of server messages. While it is open, the
/// session does not expire.
async fn listen(services: &Services, request: Request) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|id| id.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session
        && !services
            .held
            .answers_to(id, requester_of(request.extensions()).as_ref())
    {
        return session_not_found(Value::Null);
    }
    let open = match open_stream(services, request.extensions()) {
        Ok(open) => open,
        Err(refused) => return crate::edge::guard::busy(true, &refused),
    };
    let response = forward(&services.sessions, request).await;
    let Some(id) = session.filter(|_| response.status() == StatusCode::OK) else {
        return response;
    };
    let listening = services.held.listening(&id);
    response.map(|body| {
        Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
            let _open = (&listening, &open);
            frame
        }))
    })
}

/// Ends a session: 204 when it was open, 404 when there is no such session
/// (or it is someone else's).
async fn delete(services: &Services, request: Request) -> Response {
    let Some(id) = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|id| id.to_str().ok())
        .map(str::to_string)
    else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: DELETE /mcp needs the Mcp-Session-Id header of the session to end",
        );
    };
    if !services
        .held
        .answers_to(&id, requester_of(request.extensions()).as_ref())
        || !services
            .manager
            .has_session(&id.clone().into())
            .await
            .unwrap_or(false)
    {
        return session_not_found(Value::Null);
    }
    let response = forward(&services.sessions, request).await;
    if response.status() == StatusCode::ACCEPTED {
        services.held.ended(&id);
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

fn session_not_found(id: Value) -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        SESSION_NOT_FOUND,
        "Session not found: it was closed or has expired; start a new one with initialize",
    )
}

/// A JSON-RPC 2.0 error answer with its HTTP status.
fn rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response {
    (
        status,
        axum::Json(jsonrpc::error_response(id, code, message)),
    )
        .into_response()
}

/// rmcp answers its own refusals (wrong Accept, Content-Type or method, no
/// session, unknown session) as plain text. Every such answer becomes a
/// JSON-RPC error object with the same status and rmcp's sentence.
async fn as_json_rpc_error(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let code = match status {
        StatusCode::NOT_FOUND => SESSION_NOT_FOUND,
        status if status.is_server_error() => INTERNAL_ERROR,
        _ => INVALID_REQUEST,
    };
    let message = if text.trim().is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text.trim().to_string()
    };
    let mut answer = rpc_error(status, Value::Null, code, &message);
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    answer
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
}
