//! Admins' routes for what changes who sees what (`--require-approval`,
//! the audit log):
//!
//! - `POST /plugins/{namespace}/{name}/approve` and `…/refuse` (and
//!   `POST /plugins/{name}/approve`, `…/refuse` at the top level) decide
//!   on a version held for approval (`publishing/approving.rs`), answering
//!   with the plugin's report afterwards (`{"removed": id}` for a new
//!   plugin refused); 409 `NOTHING_PENDING` when nothing waits, or when
//!   `?hash=` (the held version's `contentHash` the admin was shown, which
//!   the page and `toolhost approve` send) is not the one held now;
//! - `GET /audit?limit=N` lists the audit log newest first (at most
//!   `limit`, 1000 by default).
//!
//! Admins alone decide and read the log; anyone else is refused here (403),
//! and a `POST` on a plugin's URL that is no decision is the 405 it was
//! before these routes (`Allow: GET,PUT,DELETE`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::call::errors::ErrorCode;
use crate::edge::auth::Role;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::query::query_value;
use crate::front::uploads::{publish_failure, refuse};
use crate::publishing::approving::{Decision, decide};
use crate::publishing::publish::Publishing;
use crate::registry::layout::is_valid_namespace;

/// Entries `GET /audit` answers with when no `limit` is given.
const AUDIT_PAGE: usize = 1000;

pub(crate) fn router(publishing: Arc<Publishing>) -> Router {
    Router::new()
        .route("/plugins/{namespace}/{name}", post(decide_top))
        .route("/plugins/{namespace}/{name}/{action}", post(decide_in))
        .route("/audit", get(audit))
        .with_state(publishing)
}

/// `POST /plugins/{name}/approve|refuse`: the path's first part is the
/// top-level plugin's name.
async fn decide_top(
    State(publishing): State<Arc<Publishing>>,
    Path((name, action)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let shown = query_value(query.as_deref(), "hash");
    decision(&publishing, (None, &name, &action), shown, requester).await
}

async fn decide_in(
    State(publishing): State<Arc<Publishing>>,
    Path((namespace, name, action)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let shown = query_value(query.as_deref(), "hash");
    decision(
        &publishing,
        (Some(&namespace), &name, &action),
        shown,
        requester,
    )
    .await
}

async fn decision(
    publishing: &Arc<Publishing>,
    (namespace, name, action): (Option<&str>, &str, &str),
    shown: Option<&str>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let decision = match action {
        "approve" => Decision::Approve,
        "refuse" => Decision::Refuse,
        // `POST /plugins/{namespace}/{name}`: a plugin's URL, which takes
        // no POST (the answer's last layer makes it the envelope).
        _ if namespace.is_none() => {
            return (
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                [(axum::http::header::ALLOW, "GET,PUT,DELETE")],
            )
                .into_response();
        }
        _ => {
            return refuse(
                ErrorCode::NotFound,
                &format!(
                    "no route POST …/{action}: a held version is approved with …/approve or refused with …/refuse"
                ),
            );
        }
    };
    if let Some(refused) = admins_only(requester.as_ref()) {
        return refused;
    }
    if namespace.is_some_and(|namespace| !is_valid_namespace(namespace))
        || !crate::front::plugin_routes::is_valid_plugin_name(name)
    {
        return refuse(
            ErrorCode::InvalidRequest,
            "a plugin is named `namespace/name` or `name`: letters, digits, `_` or `-`, starting with a letter",
        );
    }
    let id = match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    };
    let by = requester
        .and_then(|axum::Extension(requester)| requester.0)
        .map_or_else(|| "local".to_string(), |identity| identity.name);
    match decide(publishing, &id, &by, decision, shown).await {
        Ok(Some(report)) => json_response(200, &report),
        Ok(None) => json_response(200, &json!({ "removed": id })),
        Err(error) => publish_failure(&id, error),
    }
}

/// A 403 for anyone but an admin (and nobody on an open server).
fn admins_only(requester: Option<&axum::Extension<Requester>>) -> Option<Response> {
    let identity = requester.and_then(|axum::Extension(requester)| requester.0.as_ref())?;
    (identity.role != Role::Admin).then(|| {
        refuse(
            ErrorCode::Forbidden,
            &format!(
                "{:?} is not an admin: only admins approve, refuse and read the audit log",
                identity.name
            ),
        )
    })
}

/// `GET /audit`: newest first, at most `?limit=N`.
async fn audit(
    State(publishing): State<Arc<Publishing>>,
    RawQuery(query): RawQuery,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    if let Some(refused) = admins_only(requester.as_ref()) {
        return refused;
    }
    let limit = query_value(query.as_deref(), "limit").map(str::parse::<usize>);
    let limit = match limit {
        None => AUDIT_PAGE,
        Some(Ok(limit)) if limit > 0 => limit,
        Some(_) => {
            return refuse(
                ErrorCode::InvalidRequest,
                "limit must be a positive whole number",
            );
        }
    };
    let entries = match publishing.audit() {
        Some(audit) => audit.newest(limit).await,
        None => Vec::new(),
    };
    json_response(
        200,
        &json!({ "entries": entries, "keptBytes": crate::publishing::audit::MAX_AUDIT_BYTES }),
    )
}
