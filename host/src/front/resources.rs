//! REST for resources and prompts (contract 0.2.0), answering what MCP
//! answers, from the same call path (`call/catalog_path.rs`):
//!
//! - `GET /resources`: `{resources, resourceTemplates}`;
//! - `GET /resources/{uri}`: `{contents: [{uri, mimeType, text | blob}]}`
//!   for the URI, percent-encoded (`/resources/test%3A%2F%2Fstatic-text`)
//!   or as it is (`/resources/test://static-text`);
//! - `GET /prompts`: `{prompts}`;
//! - `POST /prompts/{name}` with the arguments as a JSON object of strings:
//!   `{description?, messages: [{role, content}]}`.
//!
//! Failures are the envelope with its code and status (`errors.rs`):
//! `RESOURCE_NOT_FOUND` and `PROMPT_NOT_FOUND` 404, arguments that are not
//! the prompt's 422, the plugin's own error 422 with its code.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::call::Calls;
use crate::call::catalog_path;
use crate::edge::body::read_arguments;
use crate::edge::guard::{Requester, view_of};
use crate::edge::responses::json_response;
use crate::registry::Registry;

#[derive(Clone)]
struct CatalogState {
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    max_body_bytes: usize,
    /// The longest URI a read may name (`--max-uri-bytes`).
    max_uri_bytes: usize,
}

pub(crate) fn router(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    max_body_bytes: usize,
    max_uri_bytes: usize,
) -> Router {
    Router::new()
        .route("/resources", get(list_resources))
        .route("/resources/{*uri}", get(read_resource))
        .route("/prompts", get(list_prompts))
        .route("/prompts/{name}", post(get_prompt))
        .with_state(CatalogState {
            registry,
            calls,
            max_body_bytes,
            max_uri_bytes,
        })
}

async fn list_resources(
    State(state): State<CatalogState>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let view = view_of(requester.as_ref());
    let mut answer = catalog_path::list_resources(&state.registry, &view);
    answer["resourceTemplates"] =
        catalog_path::list_templates(&state.registry, &view)["resourceTemplates"].take();
    json_response(200, &answer)
}

async fn read_resource(
    State(state): State<CatalogState>,
    requester: Option<axum::Extension<Requester>>,
    Path(uri): Path<String>,
) -> Response {
    let view = view_of(requester.as_ref());
    if let Err(refusal) = catalog_path::check_uri(&uri, state.max_uri_bytes) {
        return refusal.into_response();
    }
    match catalog_path::read_resource(&state.registry, &state.calls, &uri, &view).await {
        Ok(answer) => json_response(200, &answer),
        Err(envelope) => envelope.into_response(),
    }
}

async fn list_prompts(
    State(state): State<CatalogState>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let view = view_of(requester.as_ref());
    json_response(200, &catalog_path::list_prompts(&state.registry, &view))
}

async fn get_prompt(
    State(state): State<CatalogState>,
    requester: Option<axum::Extension<Requester>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let view = view_of(requester.as_ref());
    let arguments = match read_arguments(&headers, body, state.max_body_bytes).await {
        Ok(arguments) => arguments,
        Err(envelope) => return envelope.into_response(),
    };
    match catalog_path::get_prompt(&state.registry, &state.calls, &name, arguments, &view, None)
        .await
    {
        Ok(answer) => json_response(200, &answer),
        Err(envelope) => envelope.into_response(),
    }
}
