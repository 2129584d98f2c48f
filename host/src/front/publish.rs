//! Publishing over HTTP, on a plugin's canonical URL:
//!
//! - `PUT /plugins/{namespace}/{name}` publishes into a namespace (a
//!   publisher into their own, an admin into any), `PUT /plugins/{name}` at
//!   the top level (admins); the body is the component, `Content-Type:
//!   application/wasm`, at most `--max-plugin-mib`;
//! - `DELETE` on the same URL removes it, `GET` reports it.
//!
//! A PUT answers once the plugin has loaded or been refused: 201 (new) or
//! 200 (replaced) with its report, the tools under the names clients see;
//! 422 `PLUGIN_REJECTED` with the loader's reason while the version that
//! served keeps serving. Every check (names, role, content type, size)
//! comes before anything is written: a refused request writes nothing.
//! The writing and waiting are the registry's (`registry/publish.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::get;
use serde_json::json;

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::front::guard::Requester;
use crate::front::http::json_response;
use crate::registry::Registry;
use crate::registry::layout::is_valid_namespace;
use crate::registry::publish::{PublishError, Published};

/// What publishing needs.
#[derive(Clone)]
struct PublishState {
    registry: Arc<Registry>,
    max_plugin_bytes: usize,
}

pub(crate) fn router(registry: Arc<Registry>, max_plugin_bytes: usize) -> Router {
    Router::new()
        .route(
            "/plugins/{name}",
            get(report_top).put(publish_top).delete(remove_top),
        )
        .route(
            "/plugins/{namespace}/{name}",
            get(report_in).put(publish_in).delete(remove_in),
        )
        .with_state(PublishState {
            registry,
            max_plugin_bytes,
        })
}

/// A plugin's name: its file's stem. 1 to 64 letters, digits, `_` or `-`,
/// starting with a letter: no `..`, separators, NUL, control or bidi
/// characters, leading dot or temporary-file suffix can pass.
pub(crate) fn is_valid_plugin_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The plugin id a URL names, once its parts and the requester's right to
/// change it are checked; `write` is whether the request changes it.
fn plugin_id(
    namespace: Option<&str>,
    name: &str,
    requester: Option<&Requester>,
    write: bool,
) -> Result<(String, String), Box<Response>> {
    if namespace.is_some_and(|namespace| !is_valid_namespace(namespace)) {
        return Err(refuse_boxed(
            ErrorCode::InvalidRequest,
            "a namespace is 1 to 24 letters, digits, `_` or `-`, starting with a letter, \
             without `__`",
        ));
    }
    if !is_valid_plugin_name(name) {
        return Err(refuse_boxed(
            ErrorCode::InvalidRequest,
            "a plugin's name is 1 to 64 letters, digits, `_` or `-`, starting with a letter",
        ));
    }
    let identity = requester.and_then(|requester| requester.0.clone());
    let by = identity
        .as_ref()
        .map_or_else(|| "local".to_string(), |identity| identity.name.clone());
    if write && !requester.is_none_or(|requester| requester.may_publish(namespace)) {
        let whom = identity.map_or_else(String::new, |identity| identity.name);
        let message = match namespace {
            Some(namespace) => format!(
                "{whom:?} may not publish into namespace {namespace:?}: a publisher \
                 publishes into their own namespace, an admin into any"
            ),
            None => format!("{whom:?} may not publish at the top level: only an admin may"),
        };
        return Err(refuse_boxed(ErrorCode::Forbidden, &message));
    }
    let id = match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    };
    Ok((id, by))
}

fn refuse_boxed(code: ErrorCode, message: &str) -> Box<Response> {
    Box::new(refuse(code, message))
}

fn refuse(code: ErrorCode, message: &str) -> Response {
    axum::response::IntoResponse::into_response(Envelope::host_error(code, message, None))
}

async fn report_top(
    State(state): State<PublishState>,
    Path(name): Path<String>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    report(&state, None, &name, requester.map(|r| r.0))
}

async fn report_in(
    State(state): State<PublishState>,
    Path((namespace, name)): Path<(String, String)>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    report(&state, Some(&namespace), &name, requester.map(|r| r.0))
}

fn report(
    state: &PublishState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
) -> Response {
    let (id, _) = match plugin_id(namespace, name, requester.as_ref(), false) {
        Ok(id) => id,
        Err(refusal) => return *refusal,
    };
    let mut report = state.registry.plugins_report();
    if !requester.as_ref().is_none_or(Requester::is_admin) {
        report = report.without_paths();
    }
    match report.plugin(&id) {
        Some(plugin) => json_response(200, plugin),
        None => refuse(
            ErrorCode::NotFound,
            &format!("no plugin {id:?} is loaded here"),
        ),
    }
}

async fn publish_top(
    State(state): State<PublishState>,
    Path(name): Path<String>,
    requester: Option<axum::Extension<Requester>>,
    request: Request,
) -> Response {
    publish(&state, None, &name, requester.map(|r| r.0), request).await
}

async fn publish_in(
    State(state): State<PublishState>,
    Path((namespace, name)): Path<(String, String)>,
    requester: Option<axum::Extension<Requester>>,
    request: Request,
) -> Response {
    publish(
        &state,
        Some(&namespace),
        &name,
        requester.map(|r| r.0),
        request,
    )
    .await
}

async fn publish(
    state: &PublishState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
    request: Request,
) -> Response {
    let (id, by) = match plugin_id(namespace, name, requester.as_ref(), true) {
        Ok(id) => id,
        Err(refusal) => return *refusal,
    };
    let (parts, body) = request.into_parts();
    if !is_wasm(&parts.headers) {
        return refuse(
            ErrorCode::InvalidRequest,
            "the body must be the component, with Content-Type: application/wasm",
        );
    }
    let limit = state.max_plugin_bytes;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return axum::response::IntoResponse::into_response(Envelope::payload_too_large(limit));
    }
    let Ok(wasm) = axum::body::to_bytes(Body::new(body), limit).await else {
        return axum::response::IntoResponse::into_response(Envelope::payload_too_large(limit));
    };
    let admin = requester.as_ref().is_none_or(Requester::is_admin);
    let shown = |report: crate::registry::report::PluginReport| {
        if admin {
            report
        } else {
            crate::registry::report::PluginsReport {
                folder: None,
                plugins: vec![report],
            }
            .without_paths()
            .plugins
            .remove(0)
        }
    };
    match state.registry.publish(&id, &wasm, &by).await {
        Ok(Published::Live { report, created }) => {
            json_response(if created { 201 } else { 200 }, &shown(report))
        }
        Ok(Published::Refused { report }) => {
            let reason = report.reason.clone().unwrap_or_default();
            let envelope = Envelope::host_error(
                ErrorCode::PluginRejected,
                format!("plugin {id:?} was refused: {reason}"),
                Some(json!({ "plugin": id, "reason": reason, "report": shown(report) })),
            );
            axum::response::IntoResponse::into_response(envelope)
        }
        Err(error) => publish_failure(&id, error),
    }
}

fn is_wasm(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|kind| kind.trim() == "application/wasm")
        })
}

fn publish_failure(id: &str, error: PublishError) -> Response {
    if let PublishError::OverShare(over) = &error {
        let envelope = Envelope::host_error(
            ErrorCode::QuotaExceeded,
            format!(
                "plugin {id:?} was not published: {over}; remove one of yours first (toolhost push --delete NAME)"
            ),
            Some(json!({
                "plugin": id,
                "namespace": over.namespace,
                "share": over.what,
                "would": over.would,
                "limit": over.limit,
            })),
        );
        return axum::response::IntoResponse::into_response(envelope);
    }
    let code = match error {
        PublishError::OverShare(_) => ErrorCode::QuotaExceeded,
        PublishError::NotFound(_) => ErrorCode::NotFound,
        PublishError::NoFolder | PublishError::Write(_) | PublishError::Timeout => {
            ErrorCode::HostError
        }
    };
    refuse(code, &format!("plugin {id:?}: {error}"))
}

async fn remove_top(
    State(state): State<PublishState>,
    Path(name): Path<String>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    remove(&state, None, &name, requester.map(|r| r.0)).await
}

async fn remove_in(
    State(state): State<PublishState>,
    Path((namespace, name)): Path<(String, String)>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    remove(&state, Some(&namespace), &name, requester.map(|r| r.0)).await
}

async fn remove(
    state: &PublishState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
) -> Response {
    let (id, by) = match plugin_id(namespace, name, requester.as_ref(), true) {
        Ok(id) => id,
        Err(refusal) => return *refusal,
    };
    match state.registry.unpublish(&id, &by).await {
        Ok(()) => json_response(200, &json!({ "removed": id })),
        Err(error) => publish_failure(&id, error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused() {
        for good in ["word_count", "wc", "word-count", "a1"] {
            assert!(is_valid_plugin_name(good), "{good}");
        }
        let long = "a".repeat(65);
        for bad in [
            "",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a\0b",
            "a\nb",
            ".hidden",
            "x.wasm",
            "x.tmp",
            "a\u{202e}b",
            "1abc",
            "-x",
            &long,
        ] {
            assert!(!is_valid_plugin_name(bad), "{bad:?}");
        }
    }
}
