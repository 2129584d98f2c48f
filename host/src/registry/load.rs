//! The one load path, for the start-up scan and every file event alike:
//! a generation per file, verdicts judged up to `PARALLEL_LOADS` at
//! once and applied in name order, each only if no newer load of the same
//! plugin began meanwhile (see the registry's rules in `mod.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::registry::events::LoadEventKind;
use crate::registry::plugin::{self, LoadError, LoadedPlugin, Version};
use crate::registry::report::{PluginReport, PluginState};
use crate::registry::tools::ToolListLimits;
use crate::registry::{Registry, Snapshot, jobs};
use crate::registry::{layout, policy, sources};
use crate::runtime::Runtime;

/// How long a load job waits before retrying a transient read failure.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// What reading a file yielded: a version to admit, or a refusal.
enum Verdict {
    Unchanged,
    Gone,
    Loaded(Box<LoadedPlugin>),
    Refused {
        version: Version,
        reason: LoadError,
    },
    /// The file could not be read for a reason that may pass (EMFILE):
    /// keep what serves, try again later.
    Retry(String),
}

impl Registry {
    /// Swaps in `next`, tells listeners if the tool list changed, and sends
    /// one event per outcome with the plugin's report as it now stands.
    fn swap_in(&self, before: &Snapshot, mut next: Snapshot, mut outcomes: Vec<(String, Outcome)>) {
        // A version that waited for a name or URI now free is admitted
        // too (taking it from any plugin that goes after it).
        let (admitted, displaced) = next.admit_waiting();
        for (ids, outcome) in [(admitted, Outcome::Admitted), (displaced, Outcome::Refused)] {
            for id in ids {
                match outcomes.iter_mut().find(|(known, _)| *known == id) {
                    Some((_, known)) => *known = outcome,
                    None => outcomes.push((id, outcome)),
                }
            }
        }
        for (id, record) in next.plugins() {
            if let Some(rejection) = &record.rejected
                && rejection.waiting.is_some()
            {
                tracing::warn!(plugin = %id, reason = %rejection.reason, "plugin waits for a tool name");
            }
        }
        let tool_list_changed = before.tool_list_fingerprint() != next.tool_list_fingerprint();
        let [resources_before, prompts_before] = before.catalog_fingerprint();
        let [resources_after, prompts_after] = next.catalog_fingerprint();
        let (resources_changed, prompts_changed) = (
            resources_before != resources_after,
            prompts_before != prompts_after,
        );
        // A new version of a plugin that serves resources: what they read
        // may have changed (subscribers are told).
        let replaced: Vec<String> = outcomes
            .iter()
            .filter(|(id, outcome)| {
                matches!(outcome, Outcome::Admitted)
                    && before.is_serving(id)
                    && next
                        .serving()
                        .any(|p| p.id == *id && p.catalog.serves_resources())
            })
            .map(|(id, _)| id.clone())
            .collect();
        let next = Arc::new(next);
        self.current.store(next.clone());
        if tool_list_changed {
            self.tool_list_version.send_modify(|version| *version += 1);
        }
        if resources_changed || prompts_changed || !replaced.is_empty() {
            self.catalog_changes.send_modify(|change| {
                change.resources += u64::from(resources_changed);
                change.prompts += u64::from(prompts_changed);
                if !replaced.is_empty() {
                    change.updates += 1;
                    change.replaced = Arc::new(replaced);
                }
            });
        }
        for (id, outcome) in outcomes {
            let (kind, report) = match outcome {
                Outcome::Removed => match before.plugin_report(&id) {
                    Some(report) => (LoadEventKind::Removed, report),
                    None => continue,
                },
                Outcome::Admitted | Outcome::Refused => match next.plugin_report(&id) {
                    // Admitted, unless it waits for a tool name.
                    Some(report) if report.state == PluginState::Rejected => {
                        (LoadEventKind::Rejected, report)
                    }
                    Some(report) if before.is_serving(&id) => (LoadEventKind::Replaced, report),
                    Some(report) => (LoadEventKind::Loaded, report),
                    None => continue,
                },
            };
            self.tell(kind, &id, report);
        }
        crate::runtime::release_free_memory();
    }

    /// Loads every plugin file in `dir` and drops plugins whose files are
    /// gone, then returns. The files go through the one load path
    /// ([`Registry::load`]) as one batch; who goes first in a name or URI
    /// conflict is decided by the claim order (`snapshot.rs`), never by
    /// load order.
    pub(crate) async fn scan(self: &Arc<Self>, dir: &Path) -> std::io::Result<()> {
        let _ = self
            .folder
            .set(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()));
        let layout = self.layout.get_or_init(|| layout::Layout::new(dir));
        remove_publish_leftovers(layout);
        let mut paths = layout.files().await?;
        let known: Vec<PathBuf> = self
            .snapshot()
            .plugins()
            .map(|(_, r)| r.file.clone())
            .collect();
        paths.extend(known.into_iter().filter(|path| !path.exists()));
        tracing::info!(folder = %dir.display(), files = paths.len(), "loading the plugin folder");
        self.load(paths).await;
        self.scanned.store(true, Ordering::Release);
        Ok(())
    }

    /// Starts loading the file at `path` (changed, new or deleted) and
    /// returns at once; the registry changes when the load is done. The
    /// watcher's entry into [`Registry::load`].
    pub(crate) fn reload(self: &Arc<Self>, path: PathBuf) {
        let registry = self.clone();
        tokio::spawn(async move { registry.load(vec![path]).await });
    }

    /// The one load path, for the start-up scan and every file event alike.
    ///
    /// Each file gets a new generation first, which supersedes any load of
    /// the same plugin still in progress. The files are then read, compiled
    /// and listed, up to [`PARALLEL_LOADS`] at once over all loads, and their
    /// verdicts applied together in name order, each only if its generation
    /// is still the newest for its plugin: a verdict overtaken by a newer
    /// event (a file replaced while a long scan compiled something else) is
    /// dropped, never applied over the newer version. A read that fails for
    /// a transient reason is tried again later, under a new generation.
    pub(crate) async fn load(self: &Arc<Self>, mut paths: Vec<PathBuf>) {
        paths.sort();
        paths.dedup();
        let jobs: Vec<(String, PathBuf, u64)> = paths
            .into_iter()
            .filter_map(|path| {
                let id = self.plugin_id(&path)?;
                let generation = self.begin(&id, &path, Vec::new());
                Some((id, path, generation))
            })
            .collect();
        self.run(jobs).await;
    }

    /// Loads the file at `path` through the one load path and answers with
    /// its plugin's report once that load (or a newer one of the same
    /// plugin, which takes it over) has settled: `None` when there is no
    /// such plugin (the file is gone, or is no plugin of the folder). The
    /// one "wait for my outcome": publishing, `dev` and source polls ask
    /// it; no deadline, no events to filter. The load runs in a task of its
    /// own, so a caller that stops waiting never cuts it short.
    pub(crate) async fn load_settled(self: &Arc<Self>, path: PathBuf) -> Option<PluginReport> {
        let id = self.plugin_id(&path)?;
        let (waiter, outcome) = tokio::sync::oneshot::channel();
        let generation = self.begin(&id, &path, vec![waiter]);
        let registry = self.clone();
        tokio::spawn(async move { registry.run(vec![(id, path, generation)]).await });
        outcome.await.ok().flatten()
    }

    /// Judges the begun `jobs` and applies their verdicts (see
    /// [`Registry::load`]); whoever waits for a job that settled is told.
    async fn run(self: &Arc<Self>, jobs: Vec<(String, PathBuf, u64)>) {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, (id, path, generation)) in jobs.iter().cloned().enumerate() {
            let registry = self.clone();
            tasks.spawn(async move {
                let Ok(_slot) = registry.load_slots.clone().acquire_owned().await else {
                    return (index, None);
                };
                // Superseded while it queued for a slot: not worth a compile.
                if !registry.jobs.is_newest(&id, generation) {
                    return (index, None);
                }
                let verdict = judge(
                    &registry,
                    &registry.runtime,
                    &registry.list_limits,
                    &registry.snapshot(),
                    &id,
                    &path,
                )
                .await;
                (index, Some(verdict))
            });
        }
        let mut verdicts: Vec<Option<Verdict>> = jobs.iter().map(|_| None).collect();
        for (index, verdict) in tasks.join_all().await {
            verdicts[index] = verdict;
        }

        let _writer = self.writer.lock().await;
        let before = self.snapshot();
        let mut next = (*before).clone();
        let mut outcomes = Vec::new();
        // Plugins that go first for a name or URI are applied first, so a
        // start-up scan admits them without taking another out of service.
        let mut batch: Vec<_> = jobs.into_iter().zip(verdicts).collect();
        batch.sort_by_key(|(_, verdict)| match verdict {
            Some(Verdict::Loaded(plugin)) => (0, plugin.claim_order()),
            _ => (1, (true, std::time::SystemTime::UNIX_EPOCH, String::new())),
        });
        let mut settled = Vec::new();
        for ((id, path, generation), verdict) in batch {
            let Some(verdict) = verdict else { continue };
            let Some(finished) = self.jobs.finish(&id, generation) else {
                tracing::info!(plugin = %id, "a newer version arrived while loading; this one is dropped");
                continue;
            };
            self.loads.job_finished(&id, finished.took);
            if let Verdict::Retry(reason) = verdict {
                tracing::warn!(plugin = %id, %reason, "cannot read the plugin now; retrying");
                self.retry_later(id, path, finished.waiters);
                continue;
            }
            apply(&mut next, &id, &path, verdict, &mut outcomes);
            settled.push((id, finished.waiters));
        }
        self.swap_in(&before, next, outcomes);
        let now = self.snapshot();
        for (id, waiters) in settled {
            jobs::answer(waiters, now.plugin_report(&id));
        }
    }

    /// The plugin id of a file of the folder (its stem outside one).
    pub(super) fn plugin_id(&self, path: &Path) -> Option<String> {
        match self.layout.get() {
            Some(layout) => layout.plugin_id(path),
            None => layout::plugin_id(path),
        }
    }

    /// Loads plugin `id` again after [`RETRY_AFTER`], under a new
    /// generation, for the same `waiters`.
    fn retry_later(self: &Arc<Self>, id: String, path: PathBuf, waiters: Vec<jobs::Waiter>) {
        let registry = self.clone();
        // Boxed: `run` starts this task, and a future cannot hold itself.
        let retry: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            tokio::time::sleep(RETRY_AFTER).await;
            let generation = registry.begin(&id, &path, waiters);
            registry.run(vec![(id, path, generation)]).await;
        });
        tokio::spawn(retry);
    }

    /// Registers a new load of plugin `id` (with `waiters` for its
    /// outcome) and returns its generation; an older load of the same
    /// plugin is superseded from now on, its waiters taken over.
    fn begin(&self, id: &str, path: &Path, waiters: Vec<jobs::Waiter>) -> u64 {
        let generation = self.jobs.begin(id, path, waiters);
        let mut report = match self.snapshot().plugin_report(id) {
            Some(report) => report,
            None => PluginReport::compiling(id, &path.display().to_string()),
        };
        report.set_compiling(0);
        self.tell(LoadEventKind::Compiling, id, report);
        generation
    }
}

/// What applying a verdict did to a plugin.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Admitted,
    Refused,
    Removed,
}

/// Applies one file's verdict to a snapshot being built, and adds what it
/// did to `outcomes` (nothing, for a file that is unchanged; a plugin
/// taken out of service by the one admitted, too).
fn apply(
    next: &mut Snapshot,
    id: &str,
    path: &Path,
    verdict: Verdict,
    outcomes: &mut Vec<(String, Outcome)>,
) {
    let mut tell =
        |id: &str, outcome: Outcome| match outcomes.iter_mut().find(|(known, _)| known == id) {
            Some((_, known)) => *known = outcome,
            None => outcomes.push((id.to_string(), outcome)),
        };
    match verdict {
        Verdict::Unchanged | Verdict::Retry(_) => {}
        Verdict::Gone => {
            if next.plugin_report(id).is_none() {
                return;
            }
            tracing::info!(plugin = %id, "plugin removed");
            next.remove(id);
            tell(id, Outcome::Removed);
        }
        Verdict::Loaded(plugin) => {
            let names: Vec<&str> = plugin.tools.iter().map(|t| t.name.as_str()).collect();
            let from_cache = plugin.compiled.from_cache;
            tracing::info!(plugin = %id, hash = %&plugin.version.content_hash[..12], from_cache, tools = ?names, "plugin loaded");
            for displaced in next.admit(Arc::new(*plugin)) {
                tell(&displaced, Outcome::Refused);
            }
            tell(id, Outcome::Admitted);
        }
        Verdict::Refused { version, reason } => {
            tracing::warn!(plugin = %id, %reason, "plugin rejected");
            next.reject(id, path, version, Arc::new(reason));
            tell(id, Outcome::Refused);
        }
    }
}

/// Reads and loads one file, without touching the registry.
async fn judge(
    registry: &Arc<Registry>,
    runtime: &Arc<Runtime>,
    limits: &ToolListLimits,
    before: &Snapshot,
    id: &str,
    path: &Path,
) -> Verdict {
    let namespaced = layout::namespace_of(id).is_some();
    let read = match sources::declared(path).await {
        Err(reason) => {
            return Verdict::Refused {
                version: Version {
                    content_hash: plugin::content_hash(reason.as_bytes()),
                    policy_hash: None,
                },
                reason: LoadError::Policy {
                    file: policy::policy_path(path),
                    reason,
                },
            };
        }
        Ok(Some(spec)) => {
            let fetched = if tokio::fs::try_exists(path).await.unwrap_or(false) {
                Err(format!(
                    "{} names an OCI source and {} exists too: remove one",
                    policy::policy_path(path).display(),
                    path.display()
                ))
            } else {
                registry.sources.fetch(id, path, spec).await
            };
            match fetched {
                Ok(wasm) => plugin::with_policy(wasm, path, namespaced).await,
                Err(reason) => {
                    return Verdict::Refused {
                        version: Version {
                            content_hash: plugin::content_hash(reason.as_bytes()),
                            policy_hash: None,
                        },
                        reason: LoadError::Source(reason),
                    };
                }
            }
        }
        Ok(None) => {
            registry.sources.forget(id);
            plugin::read_source(path, namespaced).await
        }
    };
    let source = match read {
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
    if before.already_judged(id, &version) {
        return Verdict::Unchanged;
    }
    match plugin::load(runtime, limits, id, path, source).await {
        Ok(plugin) => Verdict::Loaded(Box::new(plugin)),
        Err(reason) => Verdict::Refused { version, reason },
    }
}

/// Removes what a publish cut short by a stop left behind (an upload in
/// progress, a version kept aside): hidden files, never plugins.
fn remove_publish_leftovers(layout: &layout::Layout) {
    let folders = std::iter::once(layout.root().to_path_buf()).chain(layout.namespace_dirs());
    for folder in folders {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if crate::registry::publish::is_publish_leftover(&name.to_string_lossy()) {
                tracing::info!(file = %entry.path().display(), "removing what a stopped publish left");
                let _ = std::fs::remove_file(entry.path());
            }
        }
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
