//! Publishing source over HTTP, where the server builds it (`--builds`):
//!
//! - `PUT /plugins/{namespace}/{name}` with `Content-Type: text/x-python`
//!   (one `app.py`) or `text/javascript` (one `app.js`), at most
//!   `--max-source-kib`: the source is built (`builds/`), and the component
//!   goes through the one loader as a `.wasm` publish does. 201/200 with
//!   the report and `build` (language, seconds, notes); 422 `BUILD_FAILED`
//!   with the author's line first in the message, `details.line` and the
//!   end of the build's log in `details.log`, while the version that
//!   served serves on; 409 `BUILD_REPLACED` for a build a newer source of
//!   the same person replaced while it waited.
//! - `GET /plugins/{namespace}/{name}/source`: the source it serves from,
//!   to its publisher and admins only.
//!
//! Who may publish, the names and the content type are checked by
//! `plugin_routes.rs` before a byte of the body is read.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::json;

use crate::builds::recipe::Language;
use crate::builds::{BuildError, Builds, Source};
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::body;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::uploads::{Uploads, loaded_status, publish_failure, refuse};
use crate::registry::publish::{KeptSource, Noted, PublishError, Published, Publishing};

/// What a source publish needs.
pub(crate) struct SourcePublish {
    pub(crate) builds: Arc<Builds>,
    pub(crate) publishing: Arc<Publishing>,
    pub(crate) uploads: Arc<Uploads>,
    pub(crate) max_plugin_bytes: usize,
}

impl SourcePublish {
    /// Reads the source, builds it, and publishes what it built.
    pub(crate) async fn publish(
        &self,
        id: &str,
        by: &str,
        requester: Option<&Requester>,
        language: Language,
        headers: &HeaderMap,
        body: Body,
    ) -> Response {
        let limit = self.builds.settings().max_source_bytes;
        let too_large = || {
            Envelope::host_error(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the source is over the {} KiB this server builds (--max-source-kib)",
                    limit >> 10
                ),
                Some(json!({ "limit": limit })),
            )
            .into_response()
        };
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if declared.is_some_and(|length| length > limit as u64) {
            return too_large();
        }
        // A namespace already at its share builds nothing.
        if let Err(error) = self.publishing.has_room(id) {
            return publish_failure(id, error);
        }
        // The turn bounds the bodies one person sends at once: it ends
        // once this one is read, before the build waits for its own turn.
        let turn = match self.uploads.turn(by).await {
            Ok(turn) => turn,
            Err(busy) => return busy,
        };
        let text = match read(body, limit).await {
            Ok(Some(text)) => text,
            Ok(None) => return too_large(),
            Err(refusal) => return refusal,
        };
        drop(turn);
        let Ok(text) = String::from_utf8(text) else {
            return refuse(
                ErrorCode::InvalidRequest,
                &format!(
                    "the source is not UTF-8 text: send {} as it is saved",
                    language.source_file()
                ),
            );
        };
        let source = Source { language, text };
        let built = match self
            .builds
            .build(by, id, &source, self.max_plugin_bytes as u64)
            .await
        {
            Ok(built) => built,
            Err(error) => return self.build_failed(id, by, language, error),
        };
        let build = json!({
            "language": language.as_str(),
            "seconds": round(built.took.as_secs_f64()),
            "waitedSeconds": round(built.waited.as_secs_f64()),
            "peakMemoryMib": built.peak_memory_bytes >> 20,
            "peakDiskMib": built.peak_disk_bytes >> 20,
            "notes": built.notes,
        });
        let mut upload = match self
            .publishing
            .upload(id, self.max_plugin_bytes as u64)
            .await
        {
            Ok(upload) => upload,
            Err(error) => return publish_failure(id, error),
        };
        if let Err(error) = upload.write(&built.wasm).await {
            return match error {
                PublishError::TooLarge { .. } => Envelope::host_error(
                    ErrorCode::PayloadTooLarge,
                    format!(
                        "the component built from this source is over the {} MiB a plugin may be \
                         (--max-plugin-mib)",
                        self.max_plugin_bytes >> 20
                    ),
                    None,
                )
                .into_response(),
                other => publish_failure(id, other),
            };
        }
        let kept = KeptSource {
            language: language.as_str(),
            text: source.text,
            seconds: built.took.as_secs_f64(),
        };
        let shown = |report| match requester {
            Some(requester) => requester.sees_plugin(report),
            None => report,
        };
        let noted = |outcome, reason| Noted {
            language: Some(language.as_str()),
            build_seconds: Some(round(built.took.as_secs_f64())),
            reason,
            ..Noted::now(id, by, outcome)
        };
        match self.publishing.publish(upload, by, Some(kept)).await {
            Ok(Published::Live { report, created }) => {
                let (status, outcome) = loaded_status(&report, created);
                self.publishing.note(noted(outcome, None));
                let mut answer = serde_json::to_value(shown(report)).unwrap_or_default();
                answer["build"] = build;
                json_response(status, &answer)
            }
            Ok(Published::Refused { report }) => {
                let report = shown(report);
                let reason = report.reason.clone().unwrap_or_default();
                self.publishing.note(noted("refused", Some(reason.clone())));
                Envelope::host_error(
                    ErrorCode::PluginRejected,
                    format!("plugin {id:?} built, and was refused: {reason}"),
                    Some(
                        json!({ "plugin": id, "reason": reason, "report": report, "build": build }),
                    ),
                )
                .into_response()
            }
            Err(error) => publish_failure(id, error),
        }
    }

    /// The answer for a source that made no component; noted for the
    /// room's view.
    fn build_failed(&self, id: &str, by: &str, language: Language, error: BuildError) -> Response {
        let message = error.to_string();
        let (code, details, line, outcome) = match &error {
            BuildError::Failed {
                line, log, took, ..
            } => (
                ErrorCode::BuildFailed,
                json!({ "line": line, "log": log, "seconds": round(took.as_secs_f64()) }),
                *line,
                "build_failed",
            ),
            BuildError::TimedOut { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-timeout-secs", "seconds": limit.as_secs(), "log": log }),
                None,
                "build_failed",
            ),
            BuildError::OutOfMemory { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-memory-mib", "mib": limit >> 20, "log": log }),
                None,
                "build_failed",
            ),
            BuildError::OutOfDisk { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-disk-mib", "mib": limit >> 20, "log": log }),
                None,
                "build_failed",
            ),
            BuildError::TooLarge { size, limit } => (
                ErrorCode::PayloadTooLarge,
                json!({ "limit": "--max-plugin-mib", "size": size, "bytes": limit }),
                None,
                "build_failed",
            ),
            BuildError::Unavailable(_) => (
                ErrorCode::BuildsUnavailable,
                json!({}),
                None,
                "build_failed",
            ),
            BuildError::Replaced => (ErrorCode::BuildReplaced, json!({}), None, "replaced"),
            BuildError::NotBuiltHere(_) => (
                ErrorCode::UnsupportedMediaType,
                json!({}),
                None,
                "build_failed",
            ),
            BuildError::Toolchain { .. } | BuildError::Io(_) => {
                (ErrorCode::HostError, json!({}), None, "build_failed")
            }
        };
        let mut details = details;
        details["plugin"] = id.into();
        details["language"] = language.as_str().into();
        if outcome != "replaced" {
            tracing::info!(plugin = %id, person = %by, error = %message, "build failed");
        }
        self.publishing.note(Noted {
            language: Some(language.as_str()),
            reason: Some(message.clone()),
            line,
            ..Noted::now(id, by, outcome)
        });
        let message = match code {
            ErrorCode::BuildFailed => format!("plugin {id:?} did not build: {message}"),
            _ => message,
        };
        Envelope::host_error(code, message, Some(details)).into_response()
    }
}

/// The body whole, if it is at most `limit` bytes (`None`: over it).
async fn read(mut body: Body, limit: usize) -> Result<Option<Vec<u8>>, Response> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| body::unread(&error, limit).into_response())?;
        if let Ok(piece) = frame.into_data() {
            if bytes.len() + piece.len() > limit {
                return Ok(None);
            }
            bytes.extend_from_slice(&piece);
        }
    }
    Ok(Some(bytes))
}

/// `GET .../source`: the source plugin `id` serves from (the requester's
/// right to it checked by the caller).
pub(crate) fn source(publishing: &Publishing, id: &str) -> Response {
    match publishing.source_of(id) {
        Some((language, text)) => {
            let kind = Language::of_name(&language)
                .unwrap_or(Language::JavaScript)
                .media_type();
            (
                [
                    (header::CONTENT_TYPE, kind),
                    (header::CACHE_CONTROL, "no-store"),
                ],
                text,
            )
                .into_response()
        }
        None => refuse(
            ErrorCode::NotFound,
            &format!(
                "no source is kept for plugin {id:?}: only a plugin this server built from \
                 source has one"
            ),
        ),
    }
}

fn round(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}
