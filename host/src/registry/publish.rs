//! Publishing: a component handed over by a front (an HTTP upload) is
//! written into the plugin folder and the answer waits for its load
//! outcome. The watcher stays the one path into the registry, so a
//! published plugin loads exactly as a dropped file does, and a restart
//! serves what was published.
//!
//! - The file is written beside its final name (hidden, so never taken for
//!   a plugin) and renamed over it: the watcher never reads half a file.
//! - Publishes and removals of one plugin are serialised: the last one
//!   wins whole, and every answer is the outcome of its own bytes. In a
//!   namespace they are serialised over the whole namespace, so that its
//!   share of plugins and bytes ([`shares`](crate::registry::shares)) is
//!   checked against what is there, and a publish over it writes nothing.
//! - A version the loader refuses is answered with the reason, and the
//!   file it replaced is put back, so what serves is what is on disk (a
//!   restart serves it too); a plugin refused on its first publish leaves
//!   no file behind.
//! - Who published what, and when, is logged and kept beside the file
//!   (`.<name>.published`, hidden), for `/plugins`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use crate::registry::Registry;
use crate::registry::events::{LoadEvent, LoadEventKind};
use crate::registry::layout::namespace_of;
use crate::registry::loader::{content_hash, published_file};
use crate::registry::report::{PluginReport, PluginState};
use crate::registry::shares::{OverShare, check_storage};

/// How long a publish waits for its load outcome.
const LOAD_DEADLINE: Duration = Duration::from_secs(120);

/// What became of a publish.
#[derive(Debug)]
pub(crate) enum Published {
    /// Serves now; `created` when the plugin did not exist before.
    Live { report: PluginReport, created: bool },
    /// The loader refused it (`report.reason` says why); what served
    /// before serves on.
    Refused { report: PluginReport },
}

/// Why a publish or removal could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PublishError {
    #[error("this server serves no plugin folder")]
    NoFolder,
    #[error("no plugin {0:?} is published here")]
    NotFound(String),
    #[error("cannot write into the plugin folder: {0}")]
    Write(#[source] std::io::Error),
    #[error("the plugin did not finish loading within {} s", LOAD_DEADLINE.as_secs())]
    Timeout,
    #[error(transparent)]
    OverShare(#[from] OverShare),
}

impl Registry {
    /// Where plugin `id` lives in the folder, if the registry serves one.
    fn file_of(&self, id: &str) -> Result<PathBuf, PublishError> {
        let root = self.layout.get().ok_or(PublishError::NoFolder)?.root();
        Ok(root.join(format!("{id}.wasm")))
    }

    /// The lock that serialises publishes of plugin `id`: its namespace's,
    /// or its own at the top level.
    fn publish_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let key = namespace_of(id).map_or_else(|| id.to_string(), |ns| format!("{ns}/"));
        let mut locks = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks.entry(key).or_default().clone()
    }

    /// Writes `wasm` as plugin `id` (`name` or `namespace/name`, already
    /// validated) and waits for its load outcome. `by` is who published it.
    pub(crate) async fn publish(
        &self,
        id: &str,
        wasm: &[u8],
        by: &str,
    ) -> Result<Published, PublishError> {
        let lock = self.publish_lock(id);
        let _serialised = lock.lock().await;
        let file = self.file_of(id)?;
        let folder = file.parent().ok_or(PublishError::NoFolder)?.to_path_buf();
        let name = file_name(&file);
        if let Some(namespace) = namespace_of(id) {
            check_storage(&self.shares, namespace, &folder, &name, wasm.len() as u64)?;
        }
        let hash = content_hash(wasm);
        let before = self.plugins_report().plugin(id).cloned();
        let previous = std::fs::read(&file).ok();
        let record_file = published_file(&file);
        let previous_record = std::fs::read(&record_file).ok();

        // Listen before writing, so the outcome cannot slip past.
        let mut events = self.events();
        tokio::fs::create_dir_all(&folder)
            .await
            .map_err(PublishError::Write)?;
        // Who and when goes first, so the load that follows reads it.
        let record = serde_json::json!({
            "by": by,
            "at": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        });
        write_atomically(
            &folder,
            &file_name(&record_file),
            record.to_string().as_bytes(),
        )
        .await
        .map_err(PublishError::Write)?;
        write_atomically(&folder, &name, wasm)
            .await
            .map_err(PublishError::Write)?;
        let report = match before.as_ref() {
            // The same bytes as what serves (or was refused) load nothing
            // new, so no event comes: the report is the outcome.
            Some(report) if report.content_hash.as_deref() == Some(hash.as_str()) => report.clone(),
            _ => self
                .wait_for(&mut events, id, &hash)
                .await
                .ok_or(PublishError::Timeout)?,
        };
        if report.state == PluginState::Rejected {
            tracing::warn!(plugin = %id, person = %by, reason = report.reason.as_deref().unwrap_or(""), "publish refused");
            // Put back what served, or leave nothing behind.
            let _ = match previous_record {
                Some(bytes) => write_atomically(&folder, &file_name(&record_file), &bytes).await,
                None => tokio::fs::remove_file(&record_file).await,
            };
            let restored = match previous {
                Some(bytes) => write_atomically(&folder, &name, &bytes).await,
                None => tokio::fs::remove_file(&file).await,
            };
            if let Err(error) = restored {
                tracing::warn!(plugin = %id, %error, "cannot put back the version that served");
            }
            return Ok(Published::Refused { report });
        }
        tracing::info!(plugin = %id, person = %by, hash = %&hash[..12], "published");
        Ok(Published::Live {
            report: self.plugins_report().plugin(id).cloned().unwrap_or(report),
            created: before.is_none(),
        })
    }

    /// Removes plugin `id` and waits until its tools are gone.
    pub(crate) async fn unpublish(&self, id: &str, by: &str) -> Result<(), PublishError> {
        let lock = self.publish_lock(id);
        let _serialised = lock.lock().await;
        let file = self.file_of(id)?;
        if self.plugins_report().plugin(id).is_none() || !file.exists() {
            return Err(PublishError::NotFound(id.to_string()));
        }
        let mut events = self.events();
        tokio::fs::remove_file(&file)
            .await
            .map_err(PublishError::Write)?;
        let _ = tokio::fs::remove_file(published_file(&file)).await;
        let removed = tokio::time::timeout(LOAD_DEADLINE, async {
            loop {
                match events.recv().await {
                    Ok(event) if event.plugin == id && event.kind == LoadEventKind::Removed => {
                        return true;
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        if self.plugins_report().plugin(id).is_none() {
                            return true;
                        }
                    }
                    Err(RecvError::Closed) => return false,
                }
            }
        })
        .await;
        if !matches!(removed, Ok(true)) {
            return Err(PublishError::Timeout);
        }
        tracing::info!(plugin = %id, person = %by, "removed");
        Ok(())
    }
}

fn file_name(file: &Path) -> String {
    file.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes `bytes` beside `folder/name` under a hidden name, then renames it
/// over: readers see the old file or the new one, never half of one.
async fn write_atomically(folder: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let temp = folder.join(format!(".{name}.upload-{}", std::process::id()));
    tokio::fs::write(&temp, bytes).await?;
    let file = tokio::fs::File::open(&temp).await?;
    file.sync_all().await?;
    tokio::fs::rename(&temp, folder.join(name)).await
}

impl Registry {
    /// The report on plugin `id` once the version with `hash` has settled
    /// (a receiver that fell behind looks at the report instead).
    async fn wait_for(
        &self,
        events: &mut tokio::sync::broadcast::Receiver<LoadEvent>,
        id: &str,
        hash: &str,
    ) -> Option<PluginReport> {
        tokio::time::timeout(LOAD_DEADLINE, async {
            loop {
                match events.recv().await {
                    Ok(event) if event.plugin == id && event.settles(hash) => {
                        return Some(event.report);
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        if let Some(report) = self.plugins_report().plugin(id)
                            && report.content_hash.as_deref() == Some(hash)
                            && report.compiling.is_none()
                        {
                            return Some(report.clone());
                        }
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::layout;

    #[test]
    fn the_publish_record_is_hidden_beside_the_plugin() {
        let file = Path::new("/p/ada/echo.wasm");
        assert_eq!(
            published_file(file),
            Path::new("/p/ada/.echo.wasm.published")
        );
        assert!(
            layout::Layout::new(Path::new("/p"))
                .plugin_id(&published_file(file))
                .is_none()
        );
    }
}
