//! Publishing over HTTP, on a plugin's canonical URL:
//!
//! - `PUT /plugins/{namespace}/{name}` publishes into a namespace (a
//!   publisher into their own, an admin into any), `PUT /plugins/{name}` at
//!   the top level (admins); the body is the component, `Content-Type:
//!   application/wasm`, at most `--max-plugin-mib`;
//! - `DELETE` on the same URL removes it, `GET` reports it.
//!
//! A PUT answers once the plugin has loaded or been refused: 201 (new) or
//! 200 (replaced) with its report, the tools under the names clients see,
//! or 202 with it held for an admin's approval (`--require-approval`);
//! 422 `PLUGIN_REJECTED` with the loader's reason while the version that
//! served keeps serving. Every check (names, role, content type, declared
//! size) comes before anything is written, and the body is streamed to
//! disk with its size and the namespace's share checked as it comes: a
//! refused request leaves nothing. One person sends at most
//! `--max-uploads-per-person` bodies at once (another waits up to
//! [`UPLOAD_WAIT`](crate::front::uploads::UPLOAD_WAIT) for a turn, then gets 503 `BUSY` unread). The writing
//! and loading are publishing's (`publishing/publish.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::builds::Builds;
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::query::query_value;
use crate::front::source_routes;
use crate::front::uploads::{Uploads, loaded_status, publish_failure, receive, refuse};
use crate::languages::Language;
use crate::publishing::publish::{Noted, PublishOutcome, Published, Publishing};
use crate::publishing::source::{SourceFlow, Tier};
use crate::registry::Registry;
use crate::registry::layout::is_valid_namespace;
use crate::registry::report::PluginReport;

/// What publishing needs.
#[derive(Clone)]
struct PublishState {
    registry: Arc<Registry>,
    authority: Arc<crate::edge::auth::Authority>,
    publishing: Arc<Publishing>,
    builds: Arc<Builds>,
    max_plugin_bytes: usize,
    uploads: Arc<Uploads>,
}

pub(crate) fn router(
    registry: Arc<Registry>,
    authority: Arc<crate::edge::auth::Authority>,
    publishing: Arc<Publishing>,
    builds: Arc<Builds>,
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
        .route("/plugins/{namespace}/{name}/source", get(source_in))
        .route("/publishes", get(publishes))
        .route("/me", get(me))
        .with_state(PublishState {
            registry,
            authority,
            publishing,
            builds,
            max_plugin_bytes,
            uploads: Arc::new(Uploads::new(max_uploads_per_person)),
        })
}

pub(crate) use crate::registry::layout::is_valid_plugin_name;

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

async fn report_top(
    State(state): State<PublishState>,
    Path(name): Path<String>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    report(&state, None, &name, requester.map(|r| r.0))
}

/// `GET /plugins/{namespace}/{name}`, which is also where a top-level
/// plugin's source is asked for (`GET /plugins/{name}/source`): a plugin
/// `{namespace}/source`, when there is one, comes first.
async fn report_in(
    State(state): State<PublishState>,
    Path((namespace, name)): Path<(String, String)>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let requester = requester.map(|r| r.0);
    if name == "source" {
        let known = state.registry.plugins_report();
        // A top-level plugin out of the requester's view is not there.
        let seen = |plugin: &&PluginReport| {
            requester
                .as_ref()
                .is_none_or(|requester| !requester.hides(plugin))
        };
        if known.plugin(&format!("{namespace}/source")).is_none()
            && known.plugin(&namespace).filter(seen).is_some()
        {
            return source(&state, None, &namespace, requester);
        }
    }
    report(&state, Some(&namespace), &name, requester)
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
    // One out of the requester's view is as one that is not there.
    let seen = |plugin: &&PluginReport| {
        requester
            .as_ref()
            .is_none_or(|requester| !requester.hides(plugin))
    };
    match report.plugin(&id).filter(seen).cloned() {
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
        let kind = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        let folder = kind.is_some_and(|kind| {
            kind.split(';')
                .next()
                .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/zip"))
        });
        let language = match kind.and_then(Language::of_media_type) {
            _ if folder => Language::Python,
            Some(language) if language.is_source() => language,
            language => {
                let kind = kind.map_or("no Content-Type".to_string(), |kind| format!("{kind:?}"));
                let rust = if language == Some(Language::Rust) {
                    ": Rust is never built on a server (its build scripts and macros run \
                     natively): build it where you write it (cargo build --release --target \
                     wasm32-wasip2) and publish the component (toolhost push \
                     target/wasm32-wasip2/release/NAME.wasm)"
                } else {
                    ""
                };
                return refuse(
                    ErrorCode::UnsupportedMediaType,
                    &format!(
                        "a plugin is published as its component (Content-Type: \
                         application/wasm), as one Python (text/x-python), JavaScript \
                         (text/javascript) or TypeScript (text/typescript) source file, or as \
                         a tool folder (application/zip of app.py and its own files), not \
                         {kind}{rust}"
                    ),
                );
            }
        };
        let tier = match query_value(parts.uri.query(), "build") {
            None | Some("auto") => Tier::Auto,
            Some("full") => Tier::Build,
            Some(other) => {
                return refuse(
                    ErrorCode::InvalidRequest,
                    &format!("build={other:?} is neither auto nor full"),
                );
            }
        };
        let publish = source_routes::SourcePublish {
            flow: SourceFlow {
                builds: state.builds.clone(),
                publishing: state.publishing.clone(),
                max_plugin_bytes: state.max_plugin_bytes as u64,
            },
            uploads: state.uploads.clone(),
            max_source_bytes: state.builds.settings().max_source_bytes,
        };
        // A task of its own: a client that hangs up while its source builds
        // or waits does not cancel the build half-way (its child, scratch
        // folder, queue place and the room's record are all settled by the
        // task, as a `.wasm` publish is).
        let headers = parts.headers;
        let task = tokio::spawn(async move {
            let asked = source_routes::Asked {
                id: &id,
                by: &by,
                requester: requester.as_ref(),
                language,
                tier,
                folder,
            };
            publish.publish(asked, &headers, Body::new(body)).await
        });
        return task.await.unwrap_or_else(|_| {
            Envelope::host_error(
                ErrorCode::HostError,
                "the publish of this source ended unexpectedly; nothing was published".to_string(),
                None,
            )
            .into_response()
        });
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
    match state.publishing.publish(upload, &by, None).await {
        Ok(Published::Live { report, created }) => {
            let (status, outcome) = loaded_status(&report, created);
            state.publishing.note(Noted::now(&id, &by, outcome));
            json_response(status, &shown(report))
        }
        Ok(Published::Refused { report, .. }) => {
            let report = shown(report);
            let reason = report.reason.clone().unwrap_or_default();
            state.publishing.note(Noted {
                reason: Some(reason.clone()),
                ..Noted::now(&id, &by, PublishOutcome::Refused)
            });
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

/// `GET /me`: who the token is (`name`, `role`, `namespace`), the source
/// languages they may publish (`builds`: each one whose runtime this server
/// has, or that it builds; none for a caller), which of them this server
/// also builds into components of their own (`fullBuilds`), and how those
/// builds are contained (`buildContainment`: `bubblewrap`, `uncontained`,
/// `off`).
async fn me(
    State(state): State<PublishState>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let requester = requester.map_or(Requester(None), |r| r.0);
    let contained = state.builds.containment();
    let full: Vec<&str> = [Language::Python, Language::JavaScript]
        .into_iter()
        .filter(|language| state.builds.builds(*language).is_ok())
        .map(Language::as_str)
        .collect();
    let builds: Vec<&str> = [Language::Python, Language::JavaScript, Language::TypeScript]
        .into_iter()
        .filter(|language| {
            crate::languages::runtimes::component(*language).is_ok()
                || full.contains(&language.as_str())
        })
        .map(Language::as_str)
        .collect();
    match &requester.0 {
        Some(identity) => {
            let builds = if requester.may_publish(identity.namespace.as_deref()) {
                builds
            } else {
                Vec::new()
            };
            // The set as the tokens file says now (null: every tool).
            let tools = state
                .authority
                .view_now(Some(identity))
                .key()
                .map(|key| key.split('\n').map(str::to_string).collect::<Vec<_>>());
            let mut me = json!({
                "name": identity.name,
                "role": identity.role.as_str(),
                "namespace": identity.namespace,
                "tools": tools,
                "builds": builds,
                "fullBuilds": full,
                "buildContainment": contained,
            });
            // An admin is told of the top-level plugins people do not see.
            if identity.role == crate::edge::auth::Role::Admin {
                me["unseenTopLevel"] = json!(
                    state
                        .authority
                        .unseen_top_level(&state.registry.plugins_report())
                );
            }
            json_response(200, &me)
        }
        None => json_response(
            200,
            &json!({ "name": null, "role": "admin", "namespace": null, "builds": builds,
                     "fullBuilds": full, "buildContainment": contained }),
        ),
    }
}

async fn source_in(
    State(state): State<PublishState>,
    Path((namespace, name)): Path<(String, String)>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    source(&state, Some(&namespace), &name, requester.map(|r| r.0))
}

/// A plugin's source, readable by who may publish it: its publisher, and
/// admins.
fn source(
    state: &PublishState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
) -> Response {
    let (id, _) = match plugin_id(namespace, name, requester.as_ref(), true) {
        Ok(id) => id,
        Err(refusal) => return *refusal,
    };
    source_routes::source(&state.publishing, &id)
}

/// `GET /publishes`: the room's view, newest first: who published what and
/// when, each build's time and outcome (`publishes`, the recent history);
/// the newest publish of each plugin (`latest`, the present, never pushed
/// out by a burst); and the build line (`line`: what waits, in order, and
/// what builds). Reasons only for the requester's own namespace (all of
/// them for admins and on an open server).
async fn publishes(
    State(state): State<PublishState>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let requester = requester.map_or(Requester(None), |r| r.0);
    let known = state.registry.plugins_report();
    let shown = |noted: Vec<Noted>| -> Vec<Noted> {
        noted
            .into_iter()
            .filter_map(|noted| requester.sees_noted(noted, &known))
            .collect()
    };
    let held = state.registry.approvals().is_some().then_some(&known);
    let line = state.builds.line().seen_by(
        |id| requester.sees_build_of(id, held),
        |id| requester.sees_reasons_of(id),
    );
    json_response(
        200,
        &json!({
            "publishes": shown(state.publishing.noted()),
            // A plugin removed since is no longer the room's present.
            "latest": shown(state.publishing.latest())
                .into_iter()
                .filter(|noted| {
                    !matches!(noted.outcome, PublishOutcome::Live | PublishOutcome::Pending) || known.plugin(&noted.plugin).is_some()
                })
                .collect::<Vec<_>>(),
            "line": line,
        }),
    )
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
