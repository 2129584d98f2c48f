//! Publishing: a component handed over by a front (an HTTP upload) is
//! received into the plugin folder, put in place, and loaded through the
//! one load path, and the answer is its load outcome. A published plugin
//! loads exactly as a dropped file does, and a restart serves what was
//! published.
//!
//! - An [`Upload`] is written as it arrives, under a hidden name beside its
//!   final place (never taken for a plugin), its size and the namespace's
//!   share checked at every piece: nothing is held in memory, and an
//!   upload over a limit stops there and leaves nothing. Dropped before it
//!   is published (the client went away, a check failed), it is removed.
//! - [`Publishing::publish`] runs in a task of its own: the client hanging
//!   up, or the answer timing out, never skips the clean-up of a refused
//!   version.
//! - The file is renamed into place and loaded at once through the one
//!   load path, which answers with the outcome
//!   ([`Registry::load_settled`]; the watcher's event for it finds the same
//!   bytes and changes nothing), so a host with no watcher publishes too.
//! - Publishes and removals of one plugin are serialised: the last one
//!   wins whole, and every answer is the outcome of its own bytes. In a
//!   namespace they are serialised over the whole namespace, so that its
//!   share of plugins and bytes ([`shares`](crate::registry::shares)) is
//!   checked against what is there, and a publish over it writes nothing.
//! - A version the loader refuses (or that waits for a name another
//!   plugin holds) is answered with the reason, and the file it replaced (kept aside as a
//!   hard link) is put back, so what serves is what is on disk (a restart
//!   serves it too); a plugin refused on its first publish leaves no file
//!   behind.
//! - Who published what, and when, is logged and kept beside the file
//!   (`.<name>.published`, hidden), for `/plugins`, with when the plugin
//!   was first published: the first publisher goes first when two plugins
//!   claim one name or URI (`snapshot.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use std::collections::HashMap;
use std::sync::Mutex;

use super::audit::{Action, Audit};
use crate::registry::Registry;
use crate::registry::layout::{self, file_name, namespace_of};
use crate::registry::plugin::{PublishRecord, published_file, source_file};
use crate::registry::report::{PluginReport, PluginState};
use crate::registry::shares::{OverShare, PersonShares, storage_in_use};

/// What became of a publish.
#[derive(Debug)]
pub(crate) enum Published {
    /// Serves now; `created` when the plugin did not exist before.
    Live { report: PluginReport, created: bool },
    /// The loader refused it (`report.reason` says why, `why` as the
    /// loader gave it); what served before serves on.
    Refused {
        report: PluginReport,
        why: Option<Arc<crate::registry::plugin::LoadError>>,
    },
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
    #[error(
        "the file went away while it loaded (removed or replaced by hand); what served before serves on"
    )]
    Gone,
    #[error("the component is over the {limit}-byte limit")]
    TooLarge { limit: u64 },
    #[error(transparent)]
    OverShare(#[from] OverShare),
    /// An approval or refusal with nothing held (see `approving.rs`).
    #[error("{0}")]
    NothingPending(String),
    /// The replicas' shared store could not take it: nothing changed.
    #[error(transparent)]
    Unshared(#[from] super::shared::SharedError),
}

/// The source a component was built from on the server, kept beside it
/// (`.<name>.source`) once it serves.
#[derive(Debug, Clone)]
pub(crate) struct KeptSource {
    /// `python` or `js`.
    pub(crate) language: &'static str,
    pub(crate) text: String,
    /// How long the build took.
    pub(crate) seconds: f64,
}

/// How many publishes and failed builds the room's view keeps.
const NOTED: usize = 200;

/// How many plugins' newest publishes the room's present keeps.
const LATEST: usize = 4096;

/// What became of one publish, as the room's view shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PublishOutcome {
    /// Its tools serve.
    Live,
    /// Held for an admin's approval (`--require-approval`).
    Pending,
    /// The loader refused it.
    Refused,
    /// Its source did not build or run.
    BuildFailed,
    /// A newer publish of the same plugin took its place before it built.
    Replaced,
}

impl PublishOutcome {
    /// The outcome of a publish that loaded.
    pub(crate) fn of_loaded(report: &PluginReport) -> PublishOutcome {
        match report.state {
            PluginState::Pending => PublishOutcome::Pending,
            _ => PublishOutcome::Live,
        }
    }
}

/// One publish or failed build, for the room's view.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Noted {
    pub(crate) plugin: String,
    pub(crate) by: String,
    /// When it was answered (RFC 3339).
    pub(crate) at: String,
    pub(crate) outcome: PublishOutcome,
    /// The language of the source built, if it was source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) language: Option<&'static str>,
    /// How long the build took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) build_seconds: Option<f64>,
    /// Why it did not go live (the author's line first, for a build).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The line of the author's file a failed build points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
}

impl Noted {
    pub(crate) fn now(plugin: &str, by: &str, outcome: PublishOutcome) -> Noted {
        Noted {
            plugin: plugin.to_string(),
            by: by.to_string(),
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            outcome,
            language: None,
            build_seconds: None,
            reason: None,
            line: None,
        }
    }
}

/// A component being received into the plugin folder (see the module
/// documentation). Removed when dropped unless published.
pub(crate) struct Upload {
    id: String,
    folder: PathBuf,
    /// The plugin's file name (`x.wasm`).
    name: String,
    /// Where it is written as it arrives.
    temp: PathBuf,
    file: Option<tokio::fs::File>,
    hasher: Sha256,
    size: u64,
    limit: u64,
    /// The namespace's share, and what it holds besides this plugin.
    share: Option<(String, PersonShares, u64, u64)>,
    /// Whether `temp` still needs removing.
    owns_temp: bool,
}

impl Upload {
    /// Adds the next piece, refusing one that takes the component past the
    /// size limit or the namespace past its share (the upload is then to
    /// be dropped: nothing stays).
    pub(crate) async fn write(&mut self, piece: &[u8]) -> Result<(), PublishError> {
        self.size += piece.len() as u64;
        if self.size > self.limit {
            return Err(PublishError::TooLarge { limit: self.limit });
        }
        if let Some((namespace, shares, plugins, bytes)) = &self.share {
            shares.check(namespace, *plugins, bytes + self.size)?;
        }
        self.hasher.update(piece);
        let file = self.file.as_mut().ok_or(PublishError::NoFolder)?;
        file.write_all(piece).await.map_err(PublishError::Write)
    }

    /// Flushes what was written to disk, and gives the content hash.
    async fn finish(&mut self) -> Result<String, PublishError> {
        let Some(mut file) = self.file.take() else {
            return Err(PublishError::NoFolder);
        };
        file.flush().await.map_err(PublishError::Write)?;
        file.sync_all().await.map_err(PublishError::Write)?;
        let hash = std::mem::take(&mut self.hasher).finalize();
        Ok(hash.iter().map(|byte| format!("{byte:02x}")).collect())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.owns_temp {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Publishing onto a registry's folder: who is publishing what now (one
/// lock per plugin, or per namespace), and what one person may hold.
pub(crate) struct Publishing {
    registry: Arc<Registry>,
    /// The last [`NOTED`] publishes and failed builds, newest last: the
    /// room's view (`GET /publishes`).
    noted: Mutex<std::collections::VecDeque<Noted>>,
    /// The newest of each plugin's publishes (at most [`LATEST`]
    /// plugins): the room's present, which no burst of history pushes out.
    latest: Mutex<HashMap<String, Noted>>,
    /// Each publish's outcome as it is noted (`/events`' `publish`).
    noted_events: tokio::sync::broadcast::Sender<Noted>,
    /// One lock per plugin being published or removed over HTTP (per
    /// namespace in a namespace).
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// What one person may hold (see [`shares`](crate::registry::shares)).
    shares: PersonShares,
    /// The folder's audit log (`GET /audit`), once there is a folder.
    audit: Option<Audit>,
    /// The store replicas share publishes through (`--redis`), if any.
    shared: Option<Arc<super::shared::Shared>>,
}

impl Publishing {
    pub(crate) fn new(
        registry: Arc<Registry>,
        shares: PersonShares,
        audit: Option<Audit>,
        shared: Option<Arc<super::shared::Shared>>,
    ) -> Arc<Publishing> {
        Arc::new(Publishing {
            registry,
            noted: Mutex::default(),
            latest: Mutex::default(),
            noted_events: tokio::sync::broadcast::channel(256).0,
            locks: Mutex::default(),
            shares,
            audit,
            shared,
        })
    }

    /// The store replicas share publishes through, if any.
    pub(crate) fn shared(&self) -> Option<&Arc<super::shared::Shared>> {
        self.shared.as_ref()
    }

    /// Shares plugin `id` with the other replicas, if they share a store:
    /// its files as they are now at `file`, `source` (the text it was
    /// built from) as its kept source, and its approval's files.
    pub(crate) async fn share(
        &self,
        id: &str,
        file: &Path,
        source: Option<&[u8]>,
        by: &str,
    ) -> Result<(), super::shared::SharedError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let approvals = self.registry.approvals().map(|a| a.dir_of(id));
        shared
            .publish(id, file, source, by, approvals.as_deref())
            .await
    }

    /// The registry it publishes into.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// What one person may hold.
    pub(crate) fn shares(&self) -> PersonShares {
        self.shares
    }

    /// The folder's audit log, once there is a folder.
    pub(crate) fn audit(&self) -> Option<&Audit> {
        self.audit.as_ref()
    }

    /// Where plugin `id` lives in the folder, if the registry serves one.
    pub(super) fn file_of(&self, id: &str) -> Result<PathBuf, PublishError> {
        self.registry.plugin_file(id).ok_or(PublishError::NoFolder)
    }

    /// Keeps `noted` for the room's view (the last [`NOTED`], and the
    /// newest of each plugin).
    pub(crate) fn note(&self, noted: Noted) {
        {
            let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
            if latest.len() >= LATEST && !latest.contains_key(&noted.plugin) {
                // RFC 3339 times sort as text: the stalest plugin goes.
                if let Some(stalest) = latest
                    .values()
                    .min_by(|a, b| a.at.cmp(&b.at))
                    .map(|n| n.plugin.clone())
                {
                    latest.remove(&stalest);
                }
            }
            latest.insert(noted.plugin.clone(), noted.clone());
        }
        let _ = self.noted_events.send(noted.clone());
        let mut kept = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == NOTED {
            kept.pop_front();
        }
        kept.push_back(noted);
    }

    /// Each publish's outcome from now on, as it is noted.
    pub(crate) fn noted_events(&self) -> tokio::sync::broadcast::Receiver<Noted> {
        self.noted_events.subscribe()
    }

    /// The newest publish of each plugin, newest first.
    pub(crate) fn latest(&self) -> Vec<Noted> {
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<Noted> = latest.values().cloned().collect();
        all.sort_by(|a, b| b.at.cmp(&a.at));
        all
    }

    /// The publishes and failed builds kept, newest first.
    pub(crate) fn noted(&self) -> Vec<Noted> {
        let kept = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().rev().cloned().collect()
    }

    /// The source plugin `id` serves from, and its language: a source file
    /// (`x.py`, `x.js`), or the source the server built it from.
    pub(crate) fn source_of(&self, id: &str) -> Option<(String, String)> {
        let file = self.file_of(id).ok()?;
        // A source file is its own source.
        if let Some(language) = crate::languages::Language::of_path(&file) {
            let text = std::fs::read_to_string(&file).ok()?;
            return Some((language.as_str().to_string(), text));
        }
        let record = crate::registry::plugin::published_by(&file)?;
        let text = std::fs::read_to_string(source_file(&file)).ok()?;
        Some((record.built_from?, text))
    }

    /// The lock that serialises publishes of plugin `id`: its namespace's,
    /// or its own at the top level.
    pub(super) fn publish_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let key = namespace_of(id).map_or_else(|| id.to_string(), |ns| format!("{ns}/"));
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks.entry(key).or_default().clone()
    }

    /// Whether `id`'s namespace has room for it now, before anything is
    /// built for it (checked again when it is written).
    pub(crate) async fn has_room(&self, id: &str) -> Result<(), PublishError> {
        let file = self.file_of(id)?;
        let Some(namespace) = namespace_of(id) else {
            return Ok(());
        };
        let folder = file.parent().ok_or(PublishError::NoFolder)?.to_path_buf();
        let (plugins, bytes) = in_use(folder, file_name(&file)).await;
        self.shares.check(namespace, plugins, bytes)?;
        Ok(())
    }

    /// Starts receiving plugin `id` (`name` or `namespace/name`, already
    /// validated) as its file with `extension` (`wasm`, or a source's `py`
    /// or `js`), of at most `limit` bytes.
    pub(crate) async fn upload(
        &self,
        id: &str,
        extension: &str,
        limit: u64,
    ) -> Result<Upload, PublishError> {
        let file = self
            .registry
            .plugin_file_as(id, extension)
            .ok_or(PublishError::NoFolder)?;
        let folder = file.parent().ok_or(PublishError::NoFolder)?.to_path_buf();
        let name = file_name(&file);
        tokio::fs::create_dir_all(&folder)
            .await
            .map_err(PublishError::Write)?;
        let share = match namespace_of(id) {
            Some(namespace) => {
                let (plugins, bytes) = in_use(folder.clone(), name.clone()).await;
                Some((namespace.to_string(), self.shares, plugins, bytes))
            }
            None => None,
        };
        if let Some((namespace, shares, plugins, bytes)) = &share {
            shares.check(namespace, *plugins, *bytes)?;
        }
        let temp = layout::temporary_beside(&folder.join(&name));
        let created = tokio::fs::File::create(&temp)
            .await
            .map_err(PublishError::Write)?;
        Ok(Upload {
            id: id.to_string(),
            folder,
            name,
            temp,
            file: Some(created),
            hasher: Sha256::new(),
            size: 0,
            limit,
            share,
            owns_temp: true,
        })
    }

    /// Puts a received component in place as its plugin and answers with
    /// its load outcome. `by` is who published it. Runs in a task of its
    /// own: dropping the returned future (the client went away) does not
    /// stop it, and a refused version is always cleaned up.
    pub(crate) async fn publish(
        self: &Arc<Self>,
        upload: Upload,
        by: &str,
        source: Option<KeptSource>,
    ) -> Result<Published, PublishError> {
        let publishing = self.clone();
        let by = by.to_string();
        let task = tokio::spawn(async move { publishing.publish_now(upload, &by, source).await });
        task.await.unwrap_or_else(|error| {
            Err(PublishError::Write(std::io::Error::other(format!(
                "the publish did not finish: {error}"
            ))))
        })
    }

    async fn publish_now(
        self: &Arc<Self>,
        mut upload: Upload,
        by: &str,
        source: Option<KeptSource>,
    ) -> Result<Published, PublishError> {
        let hash = upload.finish().await?;
        let id = upload.id.clone();
        let lock = self.publish_lock(&id);
        let _serialised = lock.lock().await;
        let (folder, name) = (upload.folder.clone(), upload.name.clone());
        let file = folder.join(&name);
        if let Some(namespace) = namespace_of(&id) {
            let (plugins, bytes) = in_use(folder.clone(), name.clone()).await;
            self.shares.check(namespace, plugins, bytes + upload.size)?;
        }
        let before = self.registry.plugins_report().plugin(&id).cloned();
        let record_file = published_file(&file);
        // The plugin's other files (a source it served from, replaced by a
        // component, or the other way round) go aside, so that this one is
        // the plugin; they come back if it is refused.
        let aside = move_siblings_aside(&file).map_err(PublishError::Write)?;
        let previous_record = std::fs::read(&record_file).ok();
        let kept = keep_aside(&file).map_err(PublishError::Write)?;

        // Who and when goes first, so the load that follows reads it; when
        // it was first published carries over from the version it replaces.
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let replaced_record = match (&kept, &previous_record) {
            (Some(_), Some(record)) => Some(record.clone()),
            _ => aside.iter().find_map(|s| std::fs::read(&s.record).ok()),
        };
        let first = replaced_record
            .as_deref()
            .and_then(PublishRecord::read)
            .map_or_else(
                || now.clone(),
                |record| record.first_published().to_string(),
            );
        let record = PublishRecord {
            by: by.to_string(),
            at: now,
            first: Some(first),
            built_from: source.as_ref().map(|source| source.language.to_string()),
            build_seconds: source
                .as_ref()
                .map(|source| (source.seconds * 1000.0).round() / 1000.0),
        };
        let record = serde_json::to_vec(&record).expect("a record serialises");
        let placed = async {
            write_atomically(&folder, &file_name(&record_file), &record).await?;
            tokio::fs::rename(&upload.temp, &file).await
        };
        let before_publish = Previous {
            file: &file,
            kept: kept.as_deref(),
            record_file: &record_file,
            record: previous_record.as_deref(),
            aside: &aside,
        };
        if let Err(error) = placed.await {
            before_publish.put_back().await;
            return Err(PublishError::Write(error));
        }
        upload.owns_temp = false;

        // The same bytes as what serves (or was refused) load nothing new:
        // the report is the outcome, and it is no change to audit. Else
        // the load path answers.
        let unchanged = before
            .as_ref()
            .is_some_and(|report| report.content_hash.as_deref() == Some(hash.as_str()));
        let settled = match before.as_ref() {
            Some(report) if unchanged => Some(report.clone()),
            _ => self.registry.load_settled(file.clone()).await,
        };
        match settled {
            Some(report) if report.state != PluginState::Rejected => {
                // Every replica is to serve it: it is in the shared store
                // before it is answered, or undone here.
                let text = source.as_ref().map(|source| source.text.as_bytes());
                if let Err(error) = self.share(&id, &file, text, by).await {
                    tracing::warn!(plugin = %id, person = %by, %error, "publish undone: the shared store did not take it");
                    before_publish.put_back().await;
                    self.registry.load_settled(file.clone()).await;
                    return Err(error.into());
                }
                if let Some(kept) = &kept {
                    let _ = tokio::fs::remove_file(kept).await;
                }
                for sibling in &aside {
                    sibling.forget().await;
                }
                // The source it serves from, or none (a component).
                let kept_source = source_file(&file);
                let written = match &source {
                    Some(source) => {
                        write_atomically(&folder, &file_name(&kept_source), source.text.as_bytes())
                            .await
                    }
                    None => remove_if_there(&kept_source).await,
                };
                if let Err(error) = written {
                    tracing::warn!(plugin = %id, %error, "cannot keep the plugin's source");
                }
                tracing::info!(plugin = %id, person = %by, hash = %&hash[..12], "published");
                if let Some(audit) = self.audit().filter(|_| !unchanged) {
                    let held = report.state == PluginState::Pending;
                    audit.record(
                        if held {
                            Action::PublishHeld
                        } else {
                            Action::Publish
                        },
                        by,
                        Some(&id),
                        serde_json::json!({ "hash": hash, "replaced": before.is_some() }),
                    );
                }
                Ok(Published::Live {
                    report: self
                        .registry
                        .plugins_report()
                        .plugin(&id)
                        .cloned()
                        .unwrap_or(report),
                    // No file before: a load in progress (the watcher
                    // hearing of a removal late) is not a version.
                    created: kept.is_none() && aside.is_empty(),
                })
            }
            outcome => {
                let reason = outcome
                    .as_ref()
                    .and_then(|report| report.reason.as_deref())
                    .unwrap_or("its file went away as it loaded");
                tracing::warn!(plugin = %id, person = %by, %reason, "publish refused");
                let why = self.registry.rejection(&id);
                before_publish.put_back().await;
                self.registry.load_settled(file.clone()).await;
                match outcome {
                    Some(report) => Ok(Published::Refused { report, why }),
                    None => Err(PublishError::Gone),
                }
            }
        }
    }

    /// Removes plugin `id`; its tools are gone when this returns. Runs in a
    /// task of its own, as [`Publishing::publish`] does.
    pub(crate) async fn unpublish(
        self: &Arc<Self>,
        id: &str,
        by: &str,
    ) -> Result<(), PublishError> {
        let (publishing, id, by) = (self.clone(), id.to_string(), by.to_string());
        let task = tokio::spawn(async move { publishing.unpublish_now(&id, &by).await });
        task.await.unwrap_or_else(|error| {
            Err(PublishError::Write(std::io::Error::other(format!(
                "the removal did not finish: {error}"
            ))))
        })
    }

    async fn unpublish_now(self: &Arc<Self>, id: &str, by: &str) -> Result<(), PublishError> {
        let lock = self.publish_lock(id);
        let _serialised = lock.lock().await;
        let file = self.file_of(id)?;
        if self.registry.plugins_report().plugin(id).is_none() || !file.exists() {
            return Err(PublishError::NotFound(id.to_string()));
        }
        // In the shared store first: refused there, nothing goes here.
        if let Some(shared) = &self.shared {
            shared.remove(id, by).await?;
        }
        tokio::fs::remove_file(&file)
            .await
            .map_err(PublishError::Write)?;
        let _ = tokio::fs::remove_file(published_file(&file)).await;
        let _ = tokio::fs::remove_file(source_file(&file)).await;
        for sibling in layout::siblings(&file) {
            let _ = tokio::fs::remove_file(published_file(&sibling)).await;
            let _ = tokio::fs::remove_file(source_file(&sibling)).await;
            let _ = tokio::fs::remove_file(sibling).await;
        }
        if let Some(approvals) = self.registry.approvals() {
            approvals.forget(id);
        }
        self.registry.load_settled(file).await;
        tracing::info!(plugin = %id, person = %by, "removed");
        if let Some(audit) = self.audit() {
            audit.record(Action::Remove, by, Some(id), serde_json::json!({}));
        }
        Ok(())
    }
}

/// [`storage_in_use`] (a folder's listing and sizes) off the async
/// workers.
async fn in_use(folder: PathBuf, name: String) -> (u64, u64) {
    tokio::task::spawn_blocking(move || storage_in_use(&folder, &name))
        .await
        .unwrap_or((u64::MAX, u64::MAX))
}

/// Keeps the version at `file` aside under a hidden name (a hard link: no
/// copy), to put back if the new one is refused; `None` when there is none.
fn keep_aside(file: &Path) -> std::io::Result<Option<PathBuf>> {
    if !file.exists() {
        return Ok(None);
    }
    let kept = file.with_file_name(format!(
        ".{}.previous-{}-{}",
        file_name(file),
        std::process::id(),
        layout::next_temp()
    ));
    std::fs::hard_link(file, &kept)?;
    Ok(Some(kept))
}

/// What a plugin's file and its publish record were before a publish: the
/// version kept aside (or none), the record's bytes (or none), and the
/// plugin's other files moved aside.
struct Previous<'a> {
    file: &'a Path,
    kept: Option<&'a Path>,
    record_file: &'a Path,
    record: Option<&'a [u8]>,
    aside: &'a [Sibling],
}

/// One of a plugin's other files, moved aside under a hidden name for the
/// time of a publish, with its publish record and kept source.
struct Sibling {
    file: PathBuf,
    /// Where it, its record and its source are meanwhile.
    moved: Vec<(PathBuf, PathBuf)>,
    record: PathBuf,
}

/// Moves the files of `file`'s plugin other than `file` aside (renamed to
/// hidden names, with their records and kept sources).
fn move_siblings_aside(file: &Path) -> std::io::Result<Vec<Sibling>> {
    let mut aside = Vec::new();
    for sibling in layout::siblings(file) {
        let mut moved = Vec::new();
        for what in [
            sibling.clone(),
            published_file(&sibling),
            source_file(&sibling),
        ] {
            if !what.exists() {
                continue;
            }
            let hidden = what.with_file_name(format!(
                ".{}.previous-{}-{}",
                file_name(&what).trim_start_matches('.'),
                std::process::id(),
                layout::next_temp()
            ));
            std::fs::rename(&what, &hidden)?;
            moved.push((what, hidden));
        }
        let record = moved
            .iter()
            .find(|(what, _)| *what == published_file(&sibling))
            .map_or_else(|| published_file(&sibling), |(_, hidden)| hidden.clone());
        aside.push(Sibling {
            file: sibling,
            moved,
            record,
        });
    }
    Ok(aside)
}

impl Sibling {
    /// Renames it back.
    async fn put_back(&self) {
        for (what, hidden) in &self.moved {
            if let Err(error) = tokio::fs::rename(hidden, what).await {
                tracing::warn!(file = %self.file.display(), %error, "cannot put back a file of the plugin");
            }
        }
    }

    /// Removes it for good: the published version replaced it.
    async fn forget(&self) {
        for (_, hidden) in &self.moved {
            let _ = tokio::fs::remove_file(hidden).await;
        }
    }
}

impl Previous<'_> {
    /// Puts them back.
    async fn put_back(&self) {
        for sibling in self.aside {
            sibling.put_back().await;
        }
        let record_back = match (self.record, self.record_file.parent()) {
            (Some(bytes), Some(folder)) => {
                write_atomically(folder, &file_name(self.record_file), bytes).await
            }
            _ => remove_if_there(self.record_file).await,
        };
        let file_back = match self.kept {
            Some(kept) => tokio::fs::rename(kept, self.file).await,
            None => remove_if_there(self.file).await,
        };
        for error in [record_back.err(), file_back.err()].into_iter().flatten() {
            tracing::warn!(file = %self.file.display(), %error, "cannot put back the version that served");
        }
    }
}

async fn remove_if_there(file: &Path) -> std::io::Result<()> {
    layout::gone_is_fine(tokio::fs::remove_file(file).await)
}

/// Writes `bytes` beside `folder/name` under a hidden name, then renames it
/// over: readers see the old file or the new one, never half of one.
async fn write_atomically(folder: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let (file, bytes) = (folder.join(name), bytes.to_vec());
    tokio::task::spawn_blocking(move || layout::write_by_rename(&file, &bytes))
        .await
        .map_err(std::io::Error::other)?
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

    #[test]
    fn leftovers_are_told_from_plugins() {
        assert!(layout::is_publish_leftover(".echo.wasm.upload-12-3"));
        assert!(layout::is_publish_leftover(".echo.wasm.previous-12-3"));
        assert!(!layout::is_publish_leftover("echo.wasm"));
        assert!(!layout::is_publish_leftover(".echo.wasm.published"));
    }
}
