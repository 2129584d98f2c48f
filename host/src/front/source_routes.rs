//! Publishing source over HTTP (the workflow itself is
//! `publishing/source.rs`'s; this is its HTTP):
//!
//! - `PUT /plugins/{namespace}/{name}` with `Content-Type: text/x-python`
//!   (one `app.py`) or `text/javascript` (one `app.js`), at most
//!   `--max-source-kib`: served by its language's runtime in a moment, or
//!   built into a component (an import the runtime does not carry, or
//!   `?build=full`, where `--builds` builds the language). 201/200 with the
//!   report and `build` (language, `servedBy`: `runtime` or `build`,
//!   seconds); 422 `BUILD_FAILED` with the author's line first in the
//!   message, `details.line` and the end of the log in `details.log`,
//!   while the version that served serves on (an import outside the
//!   runtime: `details.imports`); 409 `BUILD_REPLACED` for a build a newer
//!   source of the same person replaced while it waited.
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

use crate::builds::BuildError;
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::body;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::uploads::{Uploads, loaded_status, publish_failure, refuse};
use crate::languages::Language;
use crate::publishing::publish::{Published, Publishing};
use crate::publishing::source::{SourceError, SourceFlow, SourcePublished, Tier};

/// One source asked for: which plugin, by whom, in which language and
/// tier.
pub(crate) struct Asked<'a> {
    pub(crate) id: &'a str,
    pub(crate) by: &'a str,
    pub(crate) requester: Option<&'a Requester>,
    pub(crate) language: Language,
    pub(crate) tier: Tier,
    /// A tool folder (`application/zip`), not one file.
    pub(crate) folder: bool,
}

/// The header a publisher numbers a publish with (the page does), told
/// back with each of its build stages on `/events`.
pub(crate) const PUBLISH_HEADER: &str = "toolhost-publish";

/// The publisher's own number for this publish: at most 64 letters,
/// digits, `_` or `-`, in one header; anything else is refused before the
/// body is read.
fn publish_number(headers: &HeaderMap) -> Result<Option<String>, Box<Response>> {
    let mut values = headers.get_all(PUBLISH_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let one = values.next().is_none();
    match value.to_str() {
        Ok(text)
            if one
                && (1..=64).contains(&text.len())
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(Some(text.to_string()))
        }
        _ => Err(Box::new(
            Envelope::host_error(
                ErrorCode::InvalidRequest,
                "the Toolhost-Publish header is a publish's own number, given once: 1 to 64 \
                 letters, digits, _ or -",
                None,
            )
            .into_response(),
        )),
    }
}

/// What a source publish needs.
pub(crate) struct SourcePublish {
    pub(crate) flow: SourceFlow,
    pub(crate) uploads: Arc<Uploads>,
    /// `--max-source-kib`.
    pub(crate) max_source_bytes: usize,
}

impl SourcePublish {
    /// Reads the source and publishes it.
    pub(crate) async fn publish(
        &self,
        asked: Asked<'_>,
        headers: &HeaderMap,
        body: Body,
    ) -> Response {
        let Asked {
            id,
            by,
            requester,
            language,
            tier,
            folder,
        } = asked;
        let publish = match publish_number(headers) {
            Ok(publish) => publish,
            Err(refusal) => return *refusal,
        };
        // A folder may hold data files: the size of a component bounds it.
        let limit = if folder {
            (self.flow.max_plugin_bytes).min(crate::languages::folder::MAX_ZIP) as usize
        } else {
            self.max_source_bytes
        };
        let too_large = || {
            Envelope::host_error(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the source is over the {} KiB this server takes (--max-source-kib)",
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
        let outcome = if folder {
            self.flow.publish_folder(id, by, text).await
        } else {
            self.flow
                .publish(id, by, language, text, tier, publish.as_deref())
                .await
        };
        match outcome {
            Ok(published) => answer(id, language, requester, published),
            Err(error) => failed(id, language, error),
        }
    }
}

/// The answer for a source that went live (or loaded and was refused).
fn answer(
    id: &str,
    language: Language,
    requester: Option<&Requester>,
    done: SourcePublished,
) -> Response {
    let mut build = json!({
        "language": language.as_str(),
        "servedBy": done.served.as_str(),
        "seconds": round(done.took.as_secs_f64()),
    });
    if let Some(facts) = &done.build {
        build["seconds"] = round(facts.seconds).into();
        build["waitedSeconds"] = round(facts.waited_seconds).into();
        build["peakMemoryMib"] = (facts.peak_memory_bytes >> 20).into();
        build["peakDiskMib"] = (facts.peak_disk_bytes >> 20).into();
        build["notes"] = json!(facts.notes);
        if let Some(replica) = &facts.replica {
            build["builtOn"] = replica.as_str().into();
        }
    }
    let shown = |report| match requester {
        Some(requester) => requester.sees_plugin(report),
        None => report,
    };
    match done.published {
        Published::Live { report, created } => {
            let (status, _) = loaded_status(&report, created);
            let mut answer = serde_json::to_value(shown(report)).unwrap_or_default();
            answer["build"] = build;
            json_response(status, &answer)
        }
        Published::Refused { report, .. } => {
            let report = shown(report);
            let reason = report.reason.clone().unwrap_or_default();
            Envelope::host_error(
                ErrorCode::PluginRejected,
                format!("plugin {id:?} was refused: {reason}"),
                Some(json!({ "plugin": id, "reason": reason, "report": report, "build": build })),
            )
            .into_response()
        }
    }
}

/// The answer for a source that did not go live.
fn failed(id: &str, language: Language, error: SourceError) -> Response {
    let message = error.to_string();
    let (code, mut details) = match error {
        SourceError::Publish(error) => return publish_failure(id, error),
        SourceError::NotText(_) => return refuse(ErrorCode::InvalidRequest, &message),
        SourceError::Folder(_) => (ErrorCode::BuildFailed, json!({})),
        SourceError::NoBuilds(_) => (ErrorCode::UnsupportedMediaType, json!({})),
        SourceError::Outside { line, modules, .. } => (
            ErrorCode::BuildFailed,
            json!({ "line": line, "imports": modules, "carried": crate::languages::runtimes::modules(language) }),
        ),
        SourceError::Raised { line, log, .. } => {
            (ErrorCode::BuildFailed, json!({ "line": line, "log": log }))
        }
        SourceError::Build(error) => match error {
            BuildError::Failed {
                line, log, took, ..
            } => (
                ErrorCode::BuildFailed,
                json!({ "line": line, "log": log, "seconds": round(took.as_secs_f64()) }),
            ),
            BuildError::TimedOut { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-timeout-secs", "seconds": limit.as_secs(), "log": log }),
            ),
            BuildError::OutOfMemory { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-memory-mib", "mib": limit >> 20, "log": log }),
            ),
            BuildError::OutOfDisk { limit, log } => (
                ErrorCode::BuildFailed,
                json!({ "limit": "--build-disk-mib", "mib": limit >> 20, "log": log }),
            ),
            BuildError::LeftBehind { path, kind } => (
                ErrorCode::BuildFailed,
                json!({ "leftBehind": path, "kind": kind }),
            ),
            BuildError::TooLarge { size, limit } => (
                ErrorCode::PayloadTooLarge,
                json!({ "limit": "--max-plugin-mib", "size": size, "bytes": limit }),
            ),
            BuildError::Unavailable(_) => (ErrorCode::BuildsUnavailable, json!({})),
            BuildError::Replaced => (ErrorCode::BuildReplaced, json!({})),
            BuildError::Elsewhere(_) => (ErrorCode::BuildFailed, json!({ "elsewhere": true })),
            BuildError::NotBuiltHere(_) => (ErrorCode::UnsupportedMediaType, json!({})),
            BuildError::Toolchain { .. } | BuildError::NoToolchain(_) | BuildError::Io(_) => {
                (ErrorCode::HostError, json!({}))
            }
        },
    };
    details["plugin"] = id.into();
    details["language"] = language.as_str().into();
    let message = match code {
        ErrorCode::BuildFailed => format!("plugin {id:?} did not build: {message}"),
        _ => message,
    };
    Envelope::host_error(code, message, Some(details)).into_response()
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
            let kind = match language.as_str() {
                "python" => "text/x-python; charset=utf-8",
                _ => "text/javascript; charset=utf-8",
            };
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
