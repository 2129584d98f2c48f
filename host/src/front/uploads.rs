//! What publishing over HTTP shares, a component or a source alike: each
//! person's turns to send a body (`--max-uploads-per-person`), a body
//! received into an [`Upload`] as it comes, and the answers for what
//! publishing refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::body;
use crate::publishing::publish::{PublishError, PublishOutcome, Publishing, Upload};

/// How long an upload past the person's `--max-uploads-per-person` waits
/// for one of theirs to finish before it is refused.
pub(crate) const UPLOAD_WAIT: Duration = Duration::from_secs(10);

/// Each person's uploads in progress.
pub(crate) struct Uploads {
    per_person: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Uploads {
    /// A turn for `person` to send a body, waiting up to [`UPLOAD_WAIT`].
    pub(crate) async fn turn(&self, person: &str) -> Result<OwnedSemaphorePermit, Response> {
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

impl Uploads {
    pub(crate) fn new(per_person: usize) -> Uploads {
        Uploads {
            per_person,
            slots: Mutex::default(),
        }
    }
}

/// The body, written to disk as it comes (`publishing/publish.rs`'s
/// [`Upload`]): refused at the first piece over the size limit or the
/// namespace's share, or when it comes too slowly; then nothing is left.
pub(crate) async fn receive(
    publishing: &Publishing,
    id: &str,
    mut body: Body,
    limit: usize,
) -> Result<Upload, Response> {
    let mut upload = publishing
        .upload(id, "wasm", limit as u64)
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

pub(crate) fn publish_failure(id: &str, error: PublishError) -> Response {
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
        PublishError::NothingPending(_) => ErrorCode::NothingPending,
        PublishError::Unshared(crate::publishing::shared::SharedError::Read(_)) => {
            ErrorCode::HostError
        }
        PublishError::Unshared(_) => ErrorCode::StoreUnavailable,
        PublishError::NoFolder | PublishError::Write(_) | PublishError::Gone => {
            ErrorCode::HostError
        }
    };
    refuse(code, &format!("plugin {id:?}: {error}"))
}

/// The status and the room's outcome of a publish that loaded: 202
/// `pending` when it is held for an admin's approval
/// (`--require-approval`), else 201 (new) or 200 (replaced) `live`.
pub(crate) fn loaded_status(
    report: &crate::registry::report::PluginReport,
    created: bool,
) -> (u16, PublishOutcome) {
    let outcome = PublishOutcome::of_loaded(report);
    let status = match (outcome, created) {
        (PublishOutcome::Pending, _) => 202,
        (_, true) => 201,
        (_, false) => 200,
    };
    (status, outcome)
}

pub(crate) fn refuse(code: ErrorCode, message: &str) -> Response {
    Envelope::host_error(code, message, None).into_response()
}
