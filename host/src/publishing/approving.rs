//! An admin's decision on a version held for approval
//! (`--require-approval`; the rules are `approvals.rs`'s): the fronts
//! (`POST /plugins/…/approve` and `…/refuse`, the page, `toolhost
//! approve`) all come here.
//!
//! - **Approve**: the held version's definitions (and hash) are recorded
//!   as approved and its component kept; the file is put in place again
//!   (the same bytes, by rename) so that every server watching the folder
//!   loads it, and this one loads it now: it serves.
//! - **Refuse**: the approved component goes back in the folder, or, for a
//!   plugin never approved, its file is removed; the approved version
//!   serves on, as it did.
//!
//! Each decision is serialised with the plugin's publishes, logged and
//! written to the audit log with who decided, on which hash.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::audit::Action;
use super::publish::{PublishError, Publishing};
use crate::registry::approvals::Approvals;
use crate::registry::layout::{self, write_by_rename};
use crate::registry::plugin::Held;
use crate::registry::plugin::{content_hash, published_file, source_file};
use crate::registry::report::PluginReport;

/// What an admin decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Approve,
    Refuse,
}

impl Decision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Refuse => "refuse",
        }
    }

    /// How the audit log records it.
    fn action(self) -> Action {
        match self {
            Decision::Approve => Action::Approve,
            Decision::Refuse => Action::Refuse,
        }
    }
}

/// Applies `decision` by `by` to plugin `id`'s held version; answers with
/// the plugin's report afterwards (`None`: it is gone, a new plugin
/// refused). With `shown`, the hash the admin was shown: a version held
/// since under another hash is not decided on.
pub(crate) async fn decide(
    publishing: &Arc<Publishing>,
    id: &str,
    by: &str,
    decision: Decision,
    shown: Option<&str>,
) -> Result<Option<PluginReport>, PublishError> {
    let registry = publishing.registry().clone();
    if registry.approvals().is_none() {
        return Err(PublishError::NothingPending(
            "this server asks for no approvals (toolhost serve --require-approval)".into(),
        ));
    }
    // A decision cannot be undone here once made: the shared store must
    // answer first.
    if let Some(shared) = publishing.shared() {
        shared.reachable().await?;
    }
    let lock = publishing.publish_lock(id);
    let _serialised = lock.lock().await;
    let file = publishing.file_of(id)?;
    let snapshot = registry.snapshot();
    let Some((_, record)) = snapshot.plugins().find(|(known, _)| known.as_str() == id) else {
        return Err(PublishError::NotFound(id.to_string()));
    };
    let Some((rejection, held)) = record
        .rejected
        .as_ref()
        .and_then(|rejection| Some((rejection, rejection.reason.held()?)))
    else {
        return Err(PublishError::NothingPending(format!(
            "plugin {id:?} has no version waiting for approval"
        )));
    };
    let hash = rejection.version.content_hash.clone();
    if shown.is_some_and(|shown| shown != hash) {
        return Err(PublishError::NothingPending(format!(
            "plugin {id:?}'s held version is {}, not the one shown ({}): look at it again",
            short(&hash),
            short(shown.unwrap_or_default())
        )));
    }
    // The disk work, reads and writes of whole plugins, off the async
    // workers; the publish lock is held meanwhile.
    let on_disk = {
        let (registry, id, file, hash, held, by) = (
            registry.clone(),
            id.to_string(),
            file.clone(),
            hash.clone(),
            held.clone(),
            by.to_string(),
        );
        tokio::task::spawn_blocking(move || {
            let approvals = registry.approvals().expect("checked above");
            apply_on_disk(approvals, decision, &id, &file, &hash, &held, &by)
        })
    };
    on_disk
        .await
        .map_err(|error| PublishError::Write(std::io::Error::other(error)))??;
    let changes = held.changes.as_array().map_or(0, Vec::len);
    drop(snapshot);
    let report = registry.load_settled(file).await;
    // Every replica is to decide alike: the plugin's files and its
    // approval's, as they are now, go to the shared store.
    if let Some(shared) = publishing.shared() {
        let file = publishing.file_of(id)?;
        let shared_now = if file.exists() {
            let source = tokio::fs::read(source_file(&file)).await.ok();
            publishing.share(id, &file, source.as_deref(), by).await
        } else {
            shared.remove(id, by).await
        };
        if let Err(error) = shared_now {
            tracing::warn!(plugin = %id, %error, "a decision made here did not reach the shared store: decide again once it is back");
            return Err(error.into());
        }
    }
    tracing::info!(plugin = %id, person = %by, hash = %short(&hash), decision = decision.as_str(), "approval decided");
    if let Some(audit) = publishing.audit() {
        audit.record(
            decision.action(),
            by,
            Some(id),
            json!({ "hash": hash, "changes": changes }),
        );
    }
    Ok(report)
}

/// Applies `decision` to plugin `id`'s held version on disk (`file`, its
/// bytes hashing to `hash`): approved, its copy kept and the file written
/// again so every watcher loads it; refused, the approved copy (or
/// nothing) put back. Blocking: run off the async workers.
fn apply_on_disk(
    approvals: &Approvals,
    decision: Decision,
    id: &str,
    file: &Path,
    hash: &str,
    held: &Held,
    by: &str,
) -> Result<(), PublishError> {
    // A plugin from an OCI source has no file in the folder: its tag
    // names the version.
    let from_folder = file.exists();
    match (decision, from_folder) {
        (Decision::Approve, false) => {
            approvals
                .approve(id, file, None, hash, held, by)
                .map_err(PublishError::Write)?;
        }
        (Decision::Approve, true) => {
            // The bytes held must be the bytes in the folder: a file
            // replaced by hand since is not what the admin read.
            let on_disk = std::fs::read(file).map_err(PublishError::Write)?;
            if content_hash(&on_disk) != *hash {
                return Err(changed_since(id));
            }
            approvals
                .approve(id, file, Some(&on_disk), hash, held, by)
                .map_err(PublishError::Write)?;
            put_again(file, &on_disk, hash).map_err(PublishError::Write)?;
        }
        (Decision::Refuse, false) => {
            return Err(PublishError::NothingPending(format!(
                "plugin {id:?} comes from an OCI source, whose tag names its version: point \
                 the tag back to the approved digest to refuse this one"
            )));
        }
        (Decision::Refuse, true) => {
            let on_disk = std::fs::read(file).map_err(PublishError::Write)?;
            if content_hash(&on_disk) != *hash {
                return Err(changed_since(id));
            }
            match approvals.approved_copy(id) {
                Some(copy) => {
                    let approved = std::fs::read(&copy).map_err(PublishError::Write)?;
                    for (beside, kept) in approvals.kept_beside(id, file) {
                        let restored = match std::fs::read(&kept) {
                            Ok(bytes) => write_by_rename(&beside, &bytes),
                            Err(_) => layout::gone_is_fine(std::fs::remove_file(&beside)),
                        };
                        restored.map_err(PublishError::Write)?;
                    }
                    // As the file it was (a source, or a component).
                    let restored = file.with_extension(
                        copy.extension().and_then(|e| e.to_str()).unwrap_or("wasm"),
                    );
                    write_by_rename(&restored, &approved).map_err(PublishError::Write)?;
                    if restored != *file {
                        layout::gone_is_fine(std::fs::remove_file(file))
                            .map_err(PublishError::Write)?;
                    }
                }
                None => {
                    for gone in [published_file(file), source_file(file), file.to_path_buf()] {
                        layout::gone_is_fine(std::fs::remove_file(&gone))
                            .map_err(PublishError::Write)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn short(hash: &str) -> &str {
    &hash[..12.min(hash.len())]
}

fn changed_since(id: &str) -> PublishError {
    PublishError::NothingPending(format!(
        "plugin {id:?}'s file changed since it was held; look at it again"
    ))
}

/// Writes `bytes` (whose hash is `hash`) as `file` again, by rename, so
/// that watchers (this server's and every replica's on the folder) load
/// it; unless the file changed meanwhile (a newer publish, from another
/// server on the folder), which then stays and loads on its own.
fn put_again(file: &Path, bytes: &[u8], hash: &str) -> std::io::Result<()> {
    match std::fs::read(file) {
        Ok(now) if content_hash(&now) == hash => write_by_rename(file, bytes),
        _ => Ok(()),
    }
}
