//! The live registry: which plugin files exist, which versions serve, and
//! which plugin holds each tool name.
//!
//! Readers (every call) take an immutable [`Snapshot`] without locking
//! (`arc-swap`). A writer builds a new snapshot and swaps it in whole, so a
//! reader sees either the old or the new state, never a mix; a call that
//! already holds a plugin keeps it (it is reference-counted) and finishes on
//! the old version while new calls get the new one. Writers are serialised by
//! one async mutex, held only to apply a verdict, never while compiling.
//!
//! Loading is independent per plugin: each changed file gets a load job
//! ([`Registry::reload`]) that reads, compiles and lists the plugin with up
//! to [`PARALLEL_LOADS`] jobs at once, so a 20-second compile of a large
//! Python component does not hold up a one-line change to a small plugin.
//! A newer event for the same file supersedes a job in progress: the older
//! job's compile (which cannot be stopped midway) runs out, and its result
//! is dropped. `/plugins` shows a plugin with a job in progress as
//! `compiling`, with how long it has taken. A read that fails for a
//! transient reason (out of file descriptors, say) keeps what serves and is
//! retried.
//!
//! Rules:
//! - A file whose bytes hash the same as what is serving (or as what was
//!   last rejected) is not loaded again.
//! - A rejected file never takes down the version that was serving.
//! - A tool name belongs to the plugin that registered it first. A plugin
//!   that would take another's name is rejected, naming the holder, and is
//!   admitted by itself once the name is free again.

pub mod loader;
pub(crate) mod policy;
pub(crate) mod portability;
pub(crate) mod report;
mod snapshot;
pub mod tools;
pub(crate) mod watcher;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::registry::loader::{LoadError, LoadedPlugin, Version};
use crate::registry::report::{PluginReport, PluginsReport};
pub use crate::registry::snapshot::{ServedTool, Snapshot};
use crate::registry::tools::ToolListLimits;
use crate::runtime::Runtime;

/// How many files are compiled at once (a scan, or load jobs).
const PARALLEL_LOADS: usize = 4;

/// How long a load job waits before retrying a transient read failure.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// What reading a file yielded: a version to admit, or a refusal.
enum Verdict {
    Unchanged,
    Gone,
    Loaded(LoadedPlugin),
    Refused {
        version: Version,
        reason: LoadError,
    },
    /// The file could not be read for a reason that may pass (EMFILE):
    /// keep what serves, try again later.
    Retry(String),
}

/// A load job in progress for one plugin id.
struct Job {
    generation: u64,
    file: PathBuf,
    started: Instant,
}

pub struct Registry {
    current: ArcSwap<Snapshot>,
    writer: tokio::sync::Mutex<()>,
    runtime: Arc<Runtime>,
    list_limits: ToolListLimits,
    /// Bounds how many plugins are compiled at once.
    load_slots: Arc<tokio::sync::Semaphore>,
    /// The newest load job of each plugin id; an older one is superseded.
    jobs: std::sync::Mutex<HashMap<String, Job>>,
    generations: AtomicU64,
    /// Bumped each time the tool list a client would see changes. A watch
    /// channel keeps only the newest value, so a burst of changes reaches a
    /// slow listener as one.
    tool_list_version: tokio::sync::watch::Sender<u64>,
    /// Each file rejected, as it happens: MCP sessions that enabled logging
    /// are told (a rejected update is otherwise silent to its callers).
    rejections: tokio::sync::broadcast::Sender<Rejected>,
    /// The folder served, once scanned (`/plugins` names it, so that
    /// `toolhost dev` knows where to drop a component).
    folder: std::sync::OnceLock<PathBuf>,
}

/// A plugin file that was just rejected, and why.
#[derive(Debug, Clone)]
pub(crate) struct Rejected {
    pub(crate) plugin: String,
    pub(crate) reason: Arc<LoadError>,
}

impl Registry {
    pub fn new(runtime: Arc<Runtime>, list_limits: ToolListLimits) -> Arc<Self> {
        Arc::new(Registry {
            list_limits,
            load_slots: Arc::new(tokio::sync::Semaphore::new(PARALLEL_LOADS)),
            jobs: std::sync::Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: tokio::sync::Mutex::new(()),
            runtime,
            tool_list_version: tokio::sync::watch::Sender::new(0),
            rejections: tokio::sync::broadcast::Sender::new(64),
            folder: std::sync::OnceLock::new(),
        })
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// How much one plugin may list.
    pub(crate) fn list_limits(&self) -> &ToolListLimits {
        &self.list_limits
    }

    /// A receiver of every rejection from now on. A slow receiver misses
    /// the oldest ones rather than holding up the registry.
    pub(crate) fn rejections(&self) -> tokio::sync::broadcast::Receiver<Rejected> {
        self.rejections.subscribe()
    }

    /// How many plugin files are rejected now (`/health` reports it).
    pub(crate) fn rejected_count(&self) -> usize {
        self.snapshot()
            .plugins()
            .filter(|(_, record)| record.rejected.is_some())
            .count()
    }

    /// A receiver that wakes on every change to the tool list (a plugin added,
    /// removed, or replaced by one with different tools), starting from now.
    pub(crate) fn tool_list_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tool_list_version.subscribe()
    }

    /// The current state; cheap, lock-free, and stable for as long as it is
    /// held.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Loads every plugin file in `dir`, several at a time, and applies them
    /// in name order (so "first" in a tool-name conflict is deterministic at
    /// startup). Also drops plugins whose files are gone.
    pub async fn scan(self: &Arc<Self>, dir: &Path) -> std::io::Result<()> {
        let _ = self
            .folder
            .set(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()));
        let mut paths = Vec::new();
        let mut entries = tokio::fs::read_dir(dir).await?;
        while let Some(entry) = entries.next_entry().await? {
            if loader::plugin_id(&entry.path()).is_some() {
                paths.push(entry.path());
            }
        }
        let known: Vec<PathBuf> = self
            .snapshot()
            .plugins()
            .map(|(_, r)| r.file.clone())
            .collect();
        paths.extend(known.into_iter().filter(|path| !path.exists()));
        self.sync(paths).await;
        Ok(())
    }

    /// Brings the registry in line with the files at `paths` as they are
    /// now: loads new and changed files, drops deleted ones, and applies
    /// them together in name order. The startup scan uses it; file events
    /// go through [`Registry::reload`].
    pub(crate) async fn sync(self: &Arc<Self>, mut paths: Vec<PathBuf>) {
        paths.sort();
        paths.dedup();
        let before = self.snapshot();
        let mut judged = Vec::with_capacity(paths.len());
        for batch in paths.chunks(PARALLEL_LOADS) {
            let mut tasks = tokio::task::JoinSet::new();
            for (index, path) in batch.iter().enumerate() {
                let (before, runtime, path) = (before.clone(), self.runtime.clone(), path.clone());
                let limits = self.list_limits;
                tasks.spawn(async move { (index, judge(&runtime, &limits, &before, &path).await) });
            }
            let mut results = tasks.join_all().await;
            results.sort_by_key(|(index, _)| *index);
            judged.extend(
                batch
                    .iter()
                    .cloned()
                    .zip(results.into_iter().map(|(_, v)| v)),
            );
        }
        let _writer = self.writer.lock().await;
        let before = self.snapshot();
        let mut next = (*before).clone();
        let mut rejected = Vec::new();
        for (path, verdict) in judged {
            if let Verdict::Retry(reason) = &verdict {
                tracing::warn!(file = %path.display(), %reason, "cannot read the plugin now; retrying");
                self.reload(path.clone());
            }
            rejected.extend(apply(&mut next, &path, verdict));
        }
        self.publish(&before, next);
        self.tell_rejections(rejected);
    }

    /// Starts a load job for the file at `path` (changed, new or deleted),
    /// superseding any job in progress for the same plugin. Returns at
    /// once; the registry changes when the job is done.
    pub(crate) fn reload(self: &Arc<Self>, path: PathBuf) {
        let Some(id) = loader::plugin_id(&path) else {
            return;
        };
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock_jobs().insert(
            id.clone(),
            Job {
                generation,
                file: path.clone(),
                started: Instant::now(),
            },
        );
        let registry = self.clone();
        tokio::spawn(async move { registry.run_job(id, path, generation).await });
    }

    async fn run_job(&self, id: String, path: PathBuf, generation: u64) {
        loop {
            let verdict = {
                let Ok(_slot) = self.load_slots.acquire().await else {
                    return;
                };
                if !self.is_newest(&id, generation) {
                    return;
                }
                judge(&self.runtime, &self.list_limits, &self.snapshot(), &path).await
            };
            let _writer = self.writer.lock().await;
            if !self.is_newest(&id, generation) {
                tracing::info!(plugin = %id, "a newer version arrived while loading; this one is dropped");
                return;
            }
            if let Verdict::Retry(reason) = verdict {
                drop(_writer);
                tracing::warn!(plugin = %id, %reason, "cannot read the plugin now; retrying");
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
            let before = self.snapshot();
            let mut next = (*before).clone();
            let rejected = apply(&mut next, &path, verdict);
            self.publish(&before, next);
            self.lock_jobs().remove(&id);
            self.tell_rejections(rejected);
            return;
        }
    }

    fn lock_jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_newest(&self, id: &str, generation: u64) -> bool {
        self.lock_jobs()
            .get(id)
            .is_some_and(|job| job.generation == generation)
    }

    fn tell_rejections(&self, rejected: impl IntoIterator<Item = Rejected>) {
        for rejection in rejected {
            // No receiver is fine: nobody is listening.
            let _ = self.rejections.send(rejection);
        }
    }

    /// Swaps in `next` and tells listeners if the tool list changed.
    fn publish(&self, before: &Snapshot, mut next: Snapshot) {
        next.admit_waiting();
        for (id, record) in next.plugins() {
            if let Some(rejection) = &record.rejected
                && rejection.waiting.is_some()
            {
                tracing::warn!(plugin = %id, reason = %rejection.reason, "plugin waits for a tool name");
            }
        }
        let tool_list_changed = before.tool_list_fingerprint() != next.tool_list_fingerprint();
        self.current.store(Arc::new(next));
        if tool_list_changed {
            self.tool_list_version.send_modify(|version| *version += 1);
        }
        crate::runtime::release_free_memory();
    }

    /// Every plugin file and its state, as `GET /plugins` and `toolhost
    /// list` report it, with the load jobs in progress.
    pub(crate) fn plugins_report(&self) -> PluginsReport {
        let mut plugins = self.snapshot().plugins_report();
        let jobs = self.lock_jobs();
        for (id, job) in jobs.iter() {
            let elapsed_ms = job.started.elapsed().as_millis() as u64;
            match plugins.iter_mut().find(|plugin| plugin.id == *id) {
                Some(plugin) => plugin.set_compiling(elapsed_ms),
                None => {
                    let mut plugin = PluginReport::compiling(id, &job.file.display().to_string());
                    plugin.set_compiling(elapsed_ms);
                    plugins.push(plugin);
                }
            }
        }
        plugins.sort_by(|a, b| a.id.cmp(&b.id));
        PluginsReport {
            folder: self.folder.get().map(|dir| dir.display().to_string()),
            plugins,
        }
    }
}

/// Applies one file's verdict to a snapshot being built; a rejection is
/// returned to be told to listeners once the snapshot is published.
fn apply(next: &mut Snapshot, path: &Path, verdict: Verdict) -> Option<Rejected> {
    let id = loader::plugin_id(path)?;
    match verdict {
        Verdict::Unchanged | Verdict::Retry(_) => {}
        Verdict::Gone => {
            tracing::info!(plugin = %id, "plugin removed");
            next.remove(&id);
        }
        Verdict::Loaded(plugin) => {
            let names: Vec<&str> = plugin.tools.iter().map(|t| t.name.as_str()).collect();
            let from_cache = plugin.compiled.from_cache;
            tracing::info!(plugin = %id, hash = %&plugin.version.content_hash[..12], from_cache, tools = ?names, "plugin loaded");
            next.admit(Arc::new(plugin));
        }
        Verdict::Refused { version, reason } => {
            tracing::warn!(plugin = %id, %reason, "plugin rejected");
            let reason = Arc::new(reason);
            next.reject(&id, path, version, reason.clone());
            return Some(Rejected { plugin: id, reason });
        }
    }
    None
}

/// Reads and loads one file, without touching the registry.
async fn judge(
    runtime: &Arc<Runtime>,
    limits: &ToolListLimits,
    before: &Snapshot,
    path: &Path,
) -> Verdict {
    let Some(id) = loader::plugin_id(path) else {
        return Verdict::Unchanged;
    };
    let source = match loader::read_source(path).await {
        Ok(source) => source,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Verdict::Gone,
        Err(error) if is_transient(&error) => {
            return Verdict::Retry(format!("cannot read the file: {error}"));
        }
        Err(error) => {
            return Verdict::Refused {
                version: Version::default(),
                reason: LoadError::Unreadable {
                    file: path.to_path_buf(),
                    error,
                },
            };
        }
    };
    let version = source.version.clone();
    if before.already_judged(&id, &version) {
        return Verdict::Unchanged;
    }
    match loader::load(runtime, limits, &id, path, source).await {
        Ok(plugin) => Verdict::Loaded(plugin),
        Err(reason) => Verdict::Refused { version, reason },
    }
}

/// Read failures that say nothing about the file: the process is out of
/// file descriptors or memory for the moment.
fn is_transient(error: &std::io::Error) -> bool {
    const EINTR: i32 = 4;
    const EAGAIN: i32 = 11;
    const ENOMEM: i32 = 12;
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    matches!(
        error.raw_os_error(),
        Some(EINTR | EAGAIN | ENOMEM | ENFILE | EMFILE)
    ) || error.kind() == std::io::ErrorKind::Interrupted
}
