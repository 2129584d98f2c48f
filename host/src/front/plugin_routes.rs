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
//! served keeps serving. Every check (names, role, content type, declared
//! size) comes before anything is written, and the body is streamed to
//! disk with its size and the namespace's share checked as it comes: a
//! refused request leaves nothing. One person sends at most
//! `--max-uploads-per-person` bodies at once (another waits up to
//! [`UPLOAD_WAIT`] for a turn, then gets 503 `BUSY` unread). The writing
//! and loading are the registry's (`registry/publish.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http_body_util::BodyExt;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::body;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::registry::Registry;
use crate::registry::layout::is_valid_namespace;
use crate::registry::publish::{PublishError, Published, Publishing, Upload};
use crate::registry::report::PluginReport;

/// How long an upload past the person's `--max-uploads-per-person` waits
/// for one of theirs to finish before it is refused.
const UPLOAD_WAIT: Duration = Duration::from_secs(10);

/// What publishing needs.
#[derive(Clone)]
struct PublishState {
    registry: Arc<Registry>,
    publishing: Arc<Publishing>,
    max_plugin_bytes: usize,
    uploads: Arc<Uploads>,
}

/// Each person's uploads in progress.
struct Uploads {
    per_person: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Uploads {
    /// A turn for `person` to send a body, waiting up to [`UPLOAD_WAIT`].
    async fn turn(&self, person: &str) -> Result<OwnedSemaphorePermit, Response> {
        let slots = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.retain(|_, slot| slot.available_permits() < self.per_person);
            slots
                .entry(person.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_person)))
                .clone()
        };
        match tokio::time::timeout(UPLOAD_WAIT, slots.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(Envelope::host_error(
                ErrorCode::Busy,
                format!(
                    "{person:?} is already sending {} uploads, the most one person may at once \
                     (--max-uploads-per-person); send this one when one of them is done",
                    self.per_person
                ),
                Some(json!({ "maxUploadsPerPerson": self.per_person })),
            )
            .into_response()),
        }
    }
}

pub(crate) fn router(
    registry: Arc<Registry>,
    publishing: Arc<Publishing>,
    max_plugin_bytes: usize,
    max_uploads_per_person: usize,
) -> Router {
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
            publishing,
            max_plugin_bytes,
            uploads: Arc::new(Uploads {
                per_person: max_uploads_per_person,
                slots: Mutex::default(),
            }),
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
             without `__`, not ending in `-data` (kept for plugins' data folders)",
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
        let no_namespace = identity
            .as_ref()
            .is_some_and(|identity| identity.namespace.is_none());
        let whom = identity.map_or_else(String::new, |identity| identity.name);
        let message = match namespace {
            Some(_) if no_namespace => format!(
                "{whom:?} has no namespace to publish into: their access token's namespace \
                 claim (--auth-namespace-claim) is missing or cannot be a namespace name"
            ),
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
    Envelope::host_error(code, message, None).into_response()
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
    let report = state.registry.plugins_report();
    match report.plugin(&id).cloned() {
        Some(plugin) => {
            let plugin = match &requester {
                Some(requester) => requester.sees_plugin(plugin),
                None => plugin,
            };
            json_response(200, &plugin)
        }
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
        return Envelope::payload_too_large(limit).into_response();
    }
    let _turn = match state.uploads.turn(&by).await {
        Ok(turn) => turn,
        Err(busy) => return busy,
    };
    let upload = match receive(&state.publishing, &id, Body::new(body), limit).await {
        Ok(upload) => upload,
        Err(refusal) => return refusal,
    };
    let shown = |report: PluginReport| match &requester {
        Some(requester) => requester.sees_plugin(report),
        None => report,
    };
    match state.publishing.publish(upload, &by).await {
        Ok(Published::Live { report, created }) => {
            json_response(if created { 201 } else { 200 }, &shown(report))
        }
        Ok(Published::Refused { report }) => {
            let report = shown(report);
            let reason = report.reason.clone().unwrap_or_default();
            let envelope = Envelope::host_error(
                ErrorCode::PluginRejected,
                format!("plugin {id:?} was refused: {reason}"),
                Some(json!({ "plugin": id, "reason": reason, "report": report })),
            );
            envelope.into_response()
        }
        Err(error) => publish_failure(&id, error),
    }
}

/// The body, written to disk as it comes (`registry/publish.rs`'s
/// [`Upload`]): refused at the first piece over the size limit or the
/// namespace's share, or when it comes too slowly; then nothing is left.
async fn receive(
    publishing: &Publishing,
    id: &str,
    mut body: Body,
    limit: usize,
) -> Result<Upload, Response> {
    let mut upload = publishing
        .upload(id, limit as u64)
        .await
        .map_err(|error| publish_failure(id, error))?;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| body::unread(&error, limit).into_response())?;
        if let Ok(piece) = frame.into_data() {
            upload.write(&piece).await.map_err(|error| match error {
                PublishError::TooLarge { .. } => Envelope::payload_too_large(limit).into_response(),
                other => publish_failure(id, other),
            })?;
        }
    }
    Ok(upload)
}

/// Whether the body is declared a component (media types are
/// case-insensitive: `APPLICATION/WASM` too).
fn is_wasm(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/wasm"))
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
        return envelope.into_response();
    }
    let code = match error {
        PublishError::OverShare(_) => ErrorCode::QuotaExceeded,
        PublishError::NotFound(_) => ErrorCode::NotFound,
        PublishError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
        PublishError::NoFolder | PublishError::Write(_) | PublishError::Gone => {
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
    match state.publishing.unpublish(&id, &by).await {
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
