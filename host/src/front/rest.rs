//! The REST front: one `POST /tools/{name}` per tool, plus discovery
//! (`/tools`, `/openapi.json`, `/plugins`, `/health`).
//!
//! Every answer, success or failure, is JSON; failures use the same
//! envelope as results, with the HTTP status that `errors.rs` assigns to the
//! code. Axum's own plain-text rejections never reach a client: bodies are
//! read by hand (so the size limit answers with the envelope), unknown
//! routes and wrong methods answer with envelopes too.
//!
//! The CGI adapter serves this same router, so the two cannot drift apart.

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tracing::Instrument;

use crate::call::Calls;
use crate::call::envelope::{Envelope, TextFormat};
use crate::call::errors::ErrorCode;
use crate::call::invoke::{self, Front};
use crate::edge::body::read_arguments;
use crate::edge::guard::{self, GuardSettings, Requester, view_of};
use crate::edge::listener::Shortcut;
use crate::edge::responses::json_response;
use crate::front::lists::ToolLists;
use crate::front::mcp::Rounds;
use crate::front::rest_rounds::{self, RestRounds};
use crate::ops::trace::{self, TraceParent};
use crate::registry::Registry;
use crate::registry::view::View;

/// What the REST front needs besides the registry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RestSettings {
    pub(crate) max_body_bytes: usize,
    pub(crate) text_format: TextFormat,
    /// Which front the calls are logged under: REST, or CGI through it.
    pub(crate) front: Front,
}

/// Shared by every request as one `Arc`: axum clones the state for each
/// request, and one count is cheaper than four.
struct AppState {
    registry: Arc<Registry>,
    /// The call path's books (the ledger, the call slots).
    calls: Arc<Calls>,
    settings: RestSettings,
    /// The manifest, made once per registry change.
    lists: Arc<ToolLists>,
    /// Input and tasks over REST (`rest_rounds.rs`); none through CGI.
    longer: Option<Arc<RestRounds>>,
}

/// `/health`: a router of its own, so that it can be guarded without the
/// token (a load balancer's probe has none).
pub(crate) fn health_router(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    settings: RestSettings,
) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(Arc::new(AppState {
            registry,
            calls,
            settings,
            lists: Arc::default(),
            longer: None,
        }))
}

/// Every other REST route, with the envelope answers for unknown routes
/// and wrong methods.
pub(crate) fn router(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    settings: RestSettings,
    rounds: Option<Rounds>,
) -> Router {
    let longer = rounds.map(|rounds| {
        Arc::new(RestRounds {
            registry: registry.clone(),
            calls: calls.clone(),
            rounds,
            max_body_bytes: settings.max_body_bytes,
        })
    });
    let tasks = match &longer {
        Some(longer) => Router::new()
            .route(
                "/tasks/{id}",
                get(rest_rounds::get_task)
                    .delete(rest_rounds::cancel_task)
                    .post(rest_rounds::answer_task),
            )
            .with_state(longer.clone()),
        None => Router::new(),
    };
    Router::new()
        .route("/tools", get(list_tools))
        .route("/tools/{name}", post(call_tool).get(call_read_only_tool))
        .route("/plugins", get(list_plugins))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // The call handler enforces its own limit, answering with an envelope.
        .layer(DefaultBodyLimit::disable())
        .with_state(Arc::new(AppState {
            registry,
            calls,
            settings,
            lists: Arc::default(),
            longer,
        }))
        .merge(tasks)
}

/// `ok`, or `degraded` while some plugin file is rejected (a newer version
/// that failed to load while the old one serves, say): still 200, since
/// the server answers, with the count so a watcher can tell.
async fn health(State(state): State<Arc<AppState>>) -> Response {
    let snapshot = state.registry.snapshot();
    let rejected = state.registry.rejected_count();
    let body = json!({
        "status": if rejected == 0 { "ok" } else { "degraded" },
        "plugins": snapshot.plugins().count(),
        "tools": snapshot.tools().count(),
        "rejected": rejected,
    });
    json_response(200, &body)
}

/// `/ready`: 200 once every plugin (from a file or a registry) has loaded
/// or failed, 503 before; for a load balancer's or Kubernetes' readiness
/// probe. `/health` is liveness: the process answers. Like `/health`, it
/// needs no token.
async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let snapshot = state.registry.snapshot();
    if !state.registry.is_ready() {
        return json_response(503, &json!({ "status": "loading" }));
    }
    json_response(
        200,
        &json!({
            "status": "ready",
            "plugins": snapshot.plugins().count(),
            "rejected": state.registry.rejected_count(),
        }),
    )
}

async fn list_tools(
    State(state): State<Arc<AppState>>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let view = view_of(requester.as_ref());
    let body = state.lists.manifest(&state.registry.snapshot(), &view);
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /me`: whose token this is, and the namespace they publish into
/// (`toolhost push` asks); on an open server, nobody's, at the top level.
/// `GET /plugins`: server paths and everyone's refusal reasons only for
/// admins (and on an open server).
async fn list_plugins(
    State(state): State<Arc<AppState>>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let report = state.registry.plugins_report();
    match requester {
        Some(axum::Extension(requester)) => json_response(200, &requester.sees(report)),
        None => json_response(200, &report),
    }
}

async fn openapi(
    State(state): State<Arc<AppState>>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let view = view_of(requester.as_ref());
    json_response(
        200,
        &crate::front::openapi::document(&state.registry.snapshot(), &view),
    )
}

async fn call_tool(
    State(state): State<Arc<AppState>>,
    name: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    requester: Option<axum::Extension<Requester>>,
    // The request itself, not a `HeaderMap` extractor: that clones every
    // header, on every call.
    request: axum::extract::Request,
) -> Response {
    let view = view_of(requester.as_ref());
    let name = tool_name(name);
    post_call(&state, name, query.as_deref(), &view, request).await
}

/// `POST /tools/{name}` answered before the router (`edge/listener.rs`'s
/// [`Shortcut`]): the guard (`guard::admit`, with `guard`, as the REST
/// router's layer has it), then the handler above with what its
/// extractors would have given it. It takes only a POST whose path is
/// `/tools/` and one segment; every other request goes on to the router.
/// So a layer added to [`router`] does not apply to tool calls, and a
/// fixed route under `/tools/` would never see a POST: add either here.
// A request not taken is handed back by value: boxing it would cost every
// other request an allocation.
#[allow(clippy::result_large_err)]
pub(crate) fn call_shortcut(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    settings: RestSettings,
    guard: GuardSettings,
    rounds: Rounds,
) -> Shortcut {
    let state = Arc::new(AppState {
        longer: Some(Arc::new(RestRounds {
            registry: registry.clone(),
            calls: calls.clone(),
            rounds,
            max_body_bytes: settings.max_body_bytes,
        })),
        registry,
        calls,
        settings,
        lists: Arc::default(),
    });
    let guard = Arc::new(guard);
    Box::new(move |mut request: Request| {
        let takes = request.method() == Method::POST
            && request
                .uri()
                .path()
                .strip_prefix("/tools/")
                .is_some_and(|segment| !segment.is_empty() && !segment.contains('/'));
        if !takes {
            return Err(request);
        }
        let (state, guard) = (state.clone(), guard.clone());
        Ok(Box::pin(async move {
            if let Err(refused) = guard::admit(&guard, &mut request).await {
                return refused;
            }
            let segment = &request.uri().path()["/tools/".len()..];
            let name = percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .map(|name| name.into_owned())
                .map_err(|_| bad_name());
            let query = request.uri().query().map(str::to_owned);
            let view = request
                .extensions()
                .get::<Requester>()
                .map_or_else(View::all, Requester::view);
            post_call(&state, name, query.as_deref(), &view, request).await
        }))
    })
}

/// A tool call's answer, from its name as decoded from the path, its query
/// and who asked.
async fn post_call(
    state: &AppState,
    name: Result<String, Envelope>,
    query: Option<&str>,
    view: &View,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let name = match name {
        Ok(name) => name,
        Err(refused) => return refused.into_response(),
    };
    let format = match text_format(query, state.settings.text_format) {
        Ok(format) => format,
        Err(envelope) => return envelope.into_response(),
    };
    if let Some(longer) = &state.longer
        && rest_rounds::takes(headers, &state.registry, &name)
    {
        return rest_rounds::call(
            longer,
            &name,
            format,
            headers,
            &parts.extensions,
            body,
            view,
        )
        .await;
    }
    let arguments = match read_arguments(headers, body, state.settings.max_body_bytes).await {
        Ok(arguments) => arguments,
        Err(envelope) => return envelope.into_response(),
    };
    run(state, "POST", &name, arguments, format, headers, view)
        .await
        .into_response()
}

/// `GET /tools/{name}?arg=value`: a tool whose annotations say
/// `readOnlyHint: true` (no side effects: seed 002's `GET /status`), its
/// arguments from the query string, coerced by its input schema
/// (`front/query.rs`). `format` picks the text rendering as on POST,
/// unless the tool takes an argument of that name. Other tools answer 405
/// with `Allow: POST`. Answers are `Cache-Control: no-store`: a read-only
/// tool's answer still changes (the time, the weather).
async fn call_read_only_tool(
    State(state): State<Arc<AppState>>,
    name: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    requester: Option<axum::Extension<Requester>>,
    headers: HeaderMap,
) -> Response {
    let view = view_of(requester.as_ref());
    let name = match tool_name(name) {
        Ok(name) => name,
        Err(refused) => return refused.into_response(),
    };
    let Some(entry) = invoke::visible_tool(&state.registry, &name, &view) else {
        return invoke::tool_not_found(&state.registry, &name, &view).into_response();
    };
    if !entry.tool.is_read_only() {
        let mut response = Envelope::host_error(
            ErrorCode::MethodNotAllowed,
            format!(
                "{name:?} is not marked read-only (readOnlyHint), so it is called with POST /tools/{name} only"
            ),
            None,
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return response;
    }
    let pairs: Vec<(String, String)> =
        match serde_urlencoded::from_str(query.as_deref().unwrap_or("")) {
            Ok(pairs) => pairs,
            Err(error) => {
                return Envelope::host_error(
                    ErrorCode::InvalidRequest,
                    format!("the query string cannot be read: {error}"),
                    None,
                )
                .into_response();
            }
        };
    let schema = &entry.tool.input_schema;
    let takes_format = schema["properties"].get("format").is_some();
    let (rendering, pairs): (Vec<_>, Vec<_>) = pairs
        .into_iter()
        .partition(|(key, _)| key == "format" && !takes_format);
    let requested = rendering.last().map(|(_, value)| value.as_str());
    let format = match format_named(requested, state.settings.text_format) {
        Ok(format) => format,
        Err(envelope) => return envelope.into_response(),
    };
    let arguments = match super::query::arguments(pairs, schema) {
        Ok(arguments) => arguments,
        Err(refused) => {
            return Envelope::host_error(
                ErrorCode::InvalidArguments,
                format!(
                    "the query argument {} is {:?}, which is not {}",
                    refused.path, refused.value, refused.expected
                ),
                Some(json!({ "errors": [{
                    "path": refused.path,
                    "value": refused.value,
                    "expected": refused.expected,
                }] })),
            )
            .into_response();
        }
    };
    let mut response = run(&state, "GET", &name, arguments, format, &headers, &view)
        .await
        .into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// `?format=json|markdown` overrides the server's default rendering of
/// structured-only results. Other query parameters are ignored.
fn text_format(query: Option<&str>, default: TextFormat) -> Result<TextFormat, Envelope> {
    let requested = query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "format")
        .map(|(_, value)| value);
    format_named(requested, default)
}

/// The rendering a `format` value names; `default` when there is none.
fn format_named(requested: Option<&str>, default: TextFormat) -> Result<TextFormat, Envelope> {
    match requested {
        None => Ok(default),
        Some(value) => TextFormat::parse(value).ok_or_else(|| {
            Envelope::host_error(
                ErrorCode::InvalidRequest,
                format!("format must be json or markdown, not {value:?}"),
                None,
            )
        }),
    }
}

/// The tool name from the path: `/tools/%FF` does not decode to text, and
/// axum would answer that in plain text.
fn tool_name(name: Result<Path<String>, PathRejection>) -> Result<String, Envelope> {
    name.map(|Path(name)| name).map_err(|_| bad_name())
}

fn bad_name() -> Envelope {
    Envelope::host_error(
        ErrorCode::InvalidRequest,
        "the tool name in the path is not valid percent-encoded UTF-8",
        None,
    )
}

/// One REST call on the call path, inside its request span (`method` names
/// the span: `POST /tools/x`, `GET /tools/x`).
async fn run(
    state: &AppState,
    method: &str,
    name: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
    format: TextFormat,
    headers: &HeaderMap,
    view: &View,
) -> Envelope {
    let span = trace::request_span(
        || format!("{method} /tools/{name}"),
        name,
        None,
        || TraceParent::from_headers(headers),
    );
    let envelope = invoke::call_tool(
        &state.registry,
        &state.calls,
        name,
        arguments,
        format,
        None,
        state.settings.front,
        view,
    )
    .instrument(span.clone())
    .await;
    trace::record_outcome(&span, &envelope);
    envelope
}

async fn not_found(uri: axum::http::Uri) -> Response {
    Envelope::host_error(
        ErrorCode::NotFound,
        format!(
            "no route {}; tools are called with POST /tools/{{name}}",
            uri.path()
        ),
        None,
    )
    .into_response()
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    Envelope::host_error(
        ErrorCode::MethodNotAllowed,
        format!("{} does not take {method}", uri.path()),
        None,
    )
    .into_response()
}
