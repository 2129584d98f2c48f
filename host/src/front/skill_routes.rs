//! Skills over HTTP (SEP-2640's skills, served to MCP clients by
//! `skills/list` and `skills/get`):
//!
//! - `GET /skills`: the skills the requester sees (their set holds the
//!   whole namespace), and why those of their own namespace that do not
//!   serve do not (refused with the line, or held for approval);
//! - `GET /skills/{namespace}/{name}` (`/skills/{name}` for the room's):
//!   one skill's entry and its `SKILL.md`;
//! - `PUT` on the same URL publishes it (a publisher into their own
//!   namespace, an admin into any, and the room's): a `SKILL.md` alone
//!   (`Content-Type: text/markdown`) or a zip of its folder
//!   (`application/zip`); 201 or 200 with its entry, 202 held for
//!   approval, 422 `SKILL_REFUSED` with the line, and nothing written;
//! - `DELETE` removes it; `POST …/approve` is an admin's approval under
//!   `--require-approval`.
//!
//! The checking, writing and audit are publishing's (`publishing/skills.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::auth::Role;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::uploads::{Uploads, refuse};
use crate::publishing::publish::Publishing;
use crate::publishing::skills::{SkillForm, SkillPublishError, SkillPublished};
use crate::registry::layout::is_valid_namespace;
use crate::registry::skills::frontmatter::is_skill_name;
use crate::registry::skills::skill::LIMITS;
use crate::registry::skills::{ApproveError, NotServing, Owner, Skill, SkillError};

#[derive(Clone)]
struct SkillState {
    publishing: Arc<Publishing>,
    uploads: Arc<Uploads>,
    max_body: usize,
}

pub(crate) fn router(
    publishing: Arc<Publishing>,
    max_plugin_bytes: usize,
    max_uploads_per_person: usize,
) -> Router {
    Router::new()
        .route("/skills", get(list))
        .route(
            "/skills/{name}",
            get(show_room).put(publish_room).delete(remove_room),
        )
        .route(
            "/skills/{namespace}/{name}",
            get(show_in)
                .put(publish_in)
                .delete(remove_in)
                .post(approve_room),
        )
        .route("/skills/{namespace}/{name}/approve", post(approve_in))
        .with_state(SkillState {
            publishing,
            uploads: Arc::new(Uploads::new(max_uploads_per_person)),
            max_body: max_plugin_bytes.min(LIMITS.max_zip() as usize),
        })
}

type Who = Option<axum::Extension<Requester>>;

fn requester(who: Who) -> Option<Requester> {
    who.map(|axum::Extension(requester)| requester)
}

/// The owner and name a URL names, checked; with `write`, the requester's
/// right to change it too.
fn named(
    namespace: Option<&str>,
    name: &str,
    requester: Option<&Requester>,
    write: bool,
) -> Result<Owner, Box<Response>> {
    if namespace.is_some_and(|namespace| !is_valid_namespace(namespace)) {
        return Err(Box::new(refuse(
            ErrorCode::InvalidRequest,
            "a namespace is 1 to 24 letters, digits, `_` or `-`, starting with a letter",
        )));
    }
    if !is_skill_name(name) {
        return Err(Box::new(refuse(
            ErrorCode::InvalidRequest,
            &format!(
                "{name:?} is not a skill name: 1 to 64 lowercase letters, digits and hyphens, \
                 no hyphen first, last or twice in a row"
            ),
        )));
    }
    if write && !requester.is_none_or(|requester| requester.may_publish(namespace)) {
        let whom = requester
            .and_then(|requester| requester.0.as_ref())
            .map_or_else(String::new, |identity| identity.name.clone());
        return Err(Box::new(refuse(
            ErrorCode::Forbidden,
            &match namespace {
                Some(namespace) => format!(
                    "{whom:?} may not publish skills into namespace {namespace:?}: a publisher \
                     publishes into their own namespace, an admin into any"
                ),
                None => format!("{whom:?} may not publish the room's skills: only an admin may"),
            },
        )));
    }
    Ok(match namespace {
        Some(namespace) => Owner::Namespace(namespace.to_string()),
        None => Owner::Room,
    })
}

fn person(requester: Option<&Requester>) -> String {
    requester
        .and_then(|requester| requester.0.as_ref())
        .map_or_else(|| "local".to_string(), |identity| identity.name.clone())
}

/// A skill as `GET /skills` shows it.
fn summary(skill: &Skill) -> Value {
    json!({
        "uri": skill.uri,
        "namespace": skill.owner.namespace(),
        "name": skill.name,
        "description": skill.description(),
        "frontmatter": skill.frontmatter,
        "files": skill.files.iter().map(|file| json!({
            "path": file.path, "size": file.bytes.len(), "digest": file.digest,
        })).collect::<Vec<_>>(),
        "digest": skill.digest,
    })
}

/// `GET /skills`.
async fn list(State(state): State<SkillState>, who: Who) -> Response {
    let requester = requester(who);
    let view = requester
        .as_ref()
        .map_or_else(crate::registry::view::View::all, Requester::view);
    let skills = state.publishing.registry().skills();
    let serving: Vec<Value> = skills
        .seen(&view)
        .iter()
        .map(|skill| summary(skill))
        .collect();
    let not_serving: Vec<Value> = skills
        .not_serving(None)
        .into_iter()
        .filter(|(owner, _, _)| {
            requester
                .as_ref()
                .is_none_or(|requester| requester.may_publish(owner.namespace()))
        })
        .map(|(owner, name, why)| match why {
            NotServing::Refused(reason) => json!({
                "namespace": owner.namespace(), "name": name, "state": "refused", "reason": reason,
            }),
            NotServing::Held { digest, .. } => json!({
                "namespace": owner.namespace(), "name": name, "state": "pending", "digest": digest,
            }),
        })
        .collect();
    json_response(
        200,
        &json!({ "skills": serving, "notServing": not_serving }),
    )
}

async fn show_room(
    State(state): State<SkillState>,
    Path(name): Path<String>,
    who: Who,
) -> Response {
    show(&state, None, &name, requester(who))
}

async fn show_in(
    State(state): State<SkillState>,
    Path((namespace, name)): Path<(String, String)>,
    who: Who,
) -> Response {
    show(&state, Some(&namespace), &name, requester(who))
}

fn show(
    state: &SkillState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
) -> Response {
    let owner = match named(namespace, name, requester.as_ref(), false) {
        Ok(owner) => owner,
        Err(refused) => return *refused,
    };
    let uri = format!("{}SKILL.md", owner.skill_root(name));
    let view = requester
        .as_ref()
        .map_or_else(crate::registry::view::View::all, Requester::view);
    let skills = state.publishing.registry().skills();
    // The version that waits for approval, to its namespace's publisher
    // and the admins: what an admin reads before approving it.
    let pending = requester
        .as_ref()
        .is_none_or(|requester| requester.may_publish(owner.namespace()))
        .then(|| {
            skills
                .not_serving(Some(&owner))
                .into_iter()
                .find_map(|(_, of, why)| match why {
                    NotServing::Held { candidate, .. } if of == name => Some(candidate),
                    _ => None,
                })
        })
        .flatten();
    let serving = skills.get(&uri, &view);
    let mut answer = match (&serving, &pending) {
        (Some(skill), _) => {
            let mut answer = summary(skill);
            answer["entry"] = skill.entry();
            answer["text"] = json!(String::from_utf8_lossy(&skill.files[0].bytes));
            answer["state"] = json!("serving");
            answer
        }
        (None, Some(_)) => json!({ "uri": uri, "name": name, "state": "pending" }),
        (None, None) => return crate::call::skills_path::not_found(&uri).into_response(),
    };
    if let Some(pending) = pending {
        let mut held = summary(&pending);
        held["text"] = json!(String::from_utf8_lossy(&pending.files[0].bytes));
        answer["pending"] = held;
    }
    json_response(200, &answer)
}

async fn publish_room(
    State(state): State<SkillState>,
    Path(name): Path<String>,
    who: Who,
    request: Request,
) -> Response {
    publish(&state, None, &name, requester(who), request).await
}

async fn publish_in(
    State(state): State<SkillState>,
    Path((namespace, name)): Path<(String, String)>,
    who: Who,
    request: Request,
) -> Response {
    publish(&state, Some(&namespace), &name, requester(who), request).await
}

async fn publish(
    state: &SkillState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
    request: Request,
) -> Response {
    let owner = match named(namespace, name, requester.as_ref(), true) {
        Ok(owner) => owner,
        Err(refused) => return *refused,
    };
    let (parts, body) = request.into_parts();
    let kind = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|kind| kind.split(';').next())
        .map(|kind| kind.trim().to_ascii_lowercase());
    let form = match kind.as_deref() {
        Some("text/markdown") => SkillForm::Markdown,
        Some("application/zip") => SkillForm::Zip,
        other => {
            return refuse(
                ErrorCode::UnsupportedMediaType,
                &format!(
                    "a skill is published as its SKILL.md (Content-Type: text/markdown) or as a \
                     zip of its folder (application/zip), not {}",
                    other.map_or("no Content-Type".to_string(), |kind| format!("{kind:?}"))
                ),
            );
        }
    };
    let by = person(requester.as_ref());
    let _turn = match state.uploads.turn(&by).await {
        Ok(turn) => turn,
        Err(busy) => return busy,
    };
    let bytes = match axum::body::to_bytes(Body::new(body), state.max_body).await {
        Ok(bytes) => bytes.to_vec(),
        Err(_) => return Envelope::payload_too_large(state.max_body).into_response(),
    };
    let publishing = state.publishing.clone();
    let name = name.to_string();
    // A task of its own: a client that hangs up never stops a write half-way.
    let task = tokio::spawn(async move {
        publishing
            .publish_skill(&owner, &name, form, bytes, &by)
            .await
    });
    match task.await {
        Ok(Ok(SkillPublished::Serving { skill, replaced })) => {
            let mut answer = summary(&skill);
            answer["state"] = json!("serving");
            json_response(if replaced { 200 } else { 201 }, &answer)
        }
        Ok(Ok(SkillPublished::Held { digest })) => json_response(
            202,
            &json!({ "state": "pending", "digest": digest,
                     "message": "held for an admin's approval (--require-approval); the approved version, if any, serves meanwhile" }),
        ),
        Ok(Err(error)) => publish_error(error),
        Err(_) => refuse(ErrorCode::HostError, "the publish ended unexpectedly"),
    }
}

fn publish_error(error: SkillPublishError) -> Response {
    match &error {
        SkillPublishError::Refused(refused) => {
            let line = match refused {
                SkillError::Frontmatter(fault) => Some(fault.line),
                _ => None,
            };
            Envelope::host_error(
                ErrorCode::SkillRefused,
                error.to_string(),
                Some(json!({ "line": line, "file": line.map(|_| "SKILL.md") })),
            )
            .into_response()
        }
        SkillPublishError::OverShare {
            what, would, limit, ..
        } => Envelope::host_error(
            ErrorCode::QuotaExceeded,
            error.to_string(),
            Some(json!({ "share": format!("skills {what}"), "would": would, "limit": limit })),
        )
        .into_response(),
        SkillPublishError::NotThere(name) => Envelope::host_error(
            ErrorCode::SkillNotFound,
            error.to_string(),
            Some(json!({ "name": name })),
        )
        .into_response(),
        SkillPublishError::Io(_) => refuse(ErrorCode::HostError, &error.to_string()),
    }
}

async fn remove_room(
    State(state): State<SkillState>,
    Path(name): Path<String>,
    who: Who,
) -> Response {
    remove(&state, None, &name, requester(who)).await
}

async fn remove_in(
    State(state): State<SkillState>,
    Path((namespace, name)): Path<(String, String)>,
    who: Who,
) -> Response {
    remove(&state, Some(&namespace), &name, requester(who)).await
}

async fn remove(
    state: &SkillState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
) -> Response {
    let owner = match named(namespace, name, requester.as_ref(), true) {
        Ok(owner) => owner,
        Err(refused) => return *refused,
    };
    let by = person(requester.as_ref());
    match state.publishing.remove_skill(&owner, name, &by).await {
        Ok(()) => json_response(
            200,
            &json!({ "removed": format!("{}SKILL.md", owner.skill_root(name)) }),
        ),
        Err(error) => publish_error(error),
    }
}

/// `POST /skills/{name}/approve`: the room's skill `name`.
async fn approve_room(
    State(state): State<SkillState>,
    Path((name, action)): Path<(String, String)>,
    who: Who,
    body: axum::body::Bytes,
) -> Response {
    if action != "approve" {
        return refuse(
            ErrorCode::NotFound,
            "no route POST /skills/{namespace}/{name}: a held skill is approved with …/approve",
        );
    }
    approve(&state, None, &name, requester(who), &body).await
}

async fn approve_in(
    State(state): State<SkillState>,
    Path((namespace, name)): Path<(String, String)>,
    who: Who,
    body: axum::body::Bytes,
) -> Response {
    approve(&state, Some(&namespace), &name, requester(who), &body).await
}

async fn approve(
    state: &SkillState,
    namespace: Option<&str>,
    name: &str,
    requester: Option<Requester>,
    body: &[u8],
) -> Response {
    let owner = match named(namespace, name, requester.as_ref(), false) {
        Ok(owner) => owner,
        Err(refused) => return *refused,
    };
    if let Some(identity) = requester
        .as_ref()
        .and_then(|requester| requester.0.as_ref())
        && identity.role != Role::Admin
    {
        return refuse(
            ErrorCode::Forbidden,
            &format!("{:?} is not an admin: only admins approve", identity.name),
        );
    }
    // An optional `{"digest": "sha256:…"}`: the version the admin looked at.
    let digest = match body {
        [] => None,
        body => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(fields)) => fields
                .get("digest")
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => {
                return refuse(
                    ErrorCode::InvalidJson,
                    "the body, when there is one, is {\"digest\": \"sha256:…\"}",
                );
            }
        },
    };
    let by = person(requester.as_ref());
    match state
        .publishing
        .approve_skill(&owner, name, digest, &by)
        .await
    {
        Ok(skill) => {
            let mut answer = summary(&skill);
            answer["state"] = json!("serving");
            json_response(200, &answer)
        }
        Err(
            error @ (ApproveError::NothingHeld
            | ApproveError::NotRequired
            | ApproveError::Changed(_)),
        ) => refuse(ErrorCode::NothingPending, &error.to_string()),
        Err(error) => refuse(ErrorCode::HostError, &error.to_string()),
    }
}
