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
//! There is one load path ([`Registry::load`]; each file's verdict in `verdict.rs`), for the start-up scan and
//! for every file event: each file gets a generation, is read, compiled and
//! listed with up to [`PARALLEL_LOADS`] files at once over all loads (so a
//! 20-second compile of a large Python component does not hold up a
//! one-line change to a small plugin), and its verdict is applied only if
//! no newer load of the same plugin began meanwhile. The older load's
//! compile (which cannot be stopped midway) runs out, and its result is
//! dropped. `/plugins` shows a plugin with a load in progress as
//! `compiling`, with how long it has taken. A read that fails for a
//! transient reason (out of file descriptors, say) keeps what serves and is
//! retried. Every outcome is also sent as a [`LoadEvent`].
//!
//! Rules:
//! - A file whose bytes hash the same as what is serving (or as what was
//!   last rejected) is not loaded again.
//! - A rejected file never takes down the version that was serving.
//! - A tool name belongs to the plugin that registered it first. A plugin
//!   that would take another's name is rejected, naming the holder, and is
//!   admitted by itself once the name is free again.

pub(crate) mod app_views;
pub mod approvals;
pub(crate) mod catalog;
pub mod events;
pub(crate) mod invisible;
mod jobs;
pub mod layout;
pub(crate) mod load_counts;
pub(crate) mod mirror;
pub(crate) mod pinned;
pub mod plugin;
pub(crate) mod policy;
pub(crate) mod portability;
pub mod report;
pub mod shares;
pub mod skills;
mod snapshot;
pub(crate) mod sources;
pub(crate) mod tool_details;
pub mod tools;
pub(crate) mod validators;
mod verdict;
pub mod view;
pub(crate) mod watcher;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use arc_swap::ArcSwap;

use crate::registry::events::{LoadEvent, LoadEventKind};
use crate::registry::report::{PluginReport, PluginState, PluginsReport};
pub use crate::registry::snapshot::{ServedTool, Snapshot};
use crate::registry::tools::ToolListLimits;
use crate::registry::verdict::{Outcome, Verdict, apply, judge};
use crate::runtime::Runtime;

/// How many files are compiled at once, over all loads.
const PARALLEL_LOADS: usize = 4;

/// How long a load job waits before retrying a transient read failure.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

pub struct Registry {
    current: ArcSwap<Snapshot>,
    writer: tokio::sync::Mutex<()>,
    runtime: Arc<Runtime>,
    list_limits: ToolListLimits,
    /// Bounds how many plugins are compiled at once.
    load_slots: Arc<tokio::sync::Semaphore>,
    /// The newest load job of each plugin id, and who waits for it.
    jobs: jobs::Jobs,
    /// Bumped each time the tool list a client would see changes. A watch
    /// channel keeps only the newest value, so a burst of changes reaches a
    /// slow listener as one.
    tool_list_version: tokio::sync::watch::Sender<u64>,
    /// The same for the resource and prompt lists, with the plugins whose
    /// new version replaced an older one (their resources were updated).
    catalog_changes: tokio::sync::watch::Sender<CatalogChange>,
    /// Every load outcome, as it happens (see [`LoadEvent`]): `dev` waits
    /// on them, and MCP sessions that enabled logging hear of rejections.
    events: tokio::sync::broadcast::Sender<LoadEvent>,
    /// The folder served, once scanned (`/plugins` names it, so that
    /// `toolhost dev` knows where to drop a component).
    folder: std::sync::OnceLock<PathBuf>,
    /// Which files in it are plugins, and their ids (set by the scan).
    layout: std::sync::OnceLock<layout::Layout>,
    /// Every load outcome told, counted (see [`load_counts`]).
    loads: load_counts::Loads,
    /// Plugins whose policies name an OCI source (see [`sources`]).
    sources: Arc<sources::Sources>,
    /// Set once the first scan of the folder is done: every plugin, from a
    /// file or from a registry, has loaded or failed (`/ready`).
    scanned: std::sync::atomic::AtomicBool,
    /// Besides the first scan, what must say so before the registry is
    /// ready: the replicas' shared store caught up (`--redis`).
    caught_up: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>>,
    /// With `--require-approval`, the folder's approvals: a version whose
    /// definitions are not approved is held, not served.
    approvals: std::sync::OnceLock<approvals::Approvals>,
    /// The folder's skills (`skills/`, `<namespace>/skills/`).
    skills: skills::Skills,
    /// Bumped each time a skills folder is read again.
    skills_version: tokio::sync::watch::Sender<u64>,
}

impl Registry {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        list_limits: ToolListLimits,
        sources: sources::Sources,
    ) -> Arc<Self> {
        Arc::new(Registry {
            sources: Arc::new(sources),
            scanned: std::sync::atomic::AtomicBool::new(false),
            caught_up: std::sync::OnceLock::new(),
            loads: load_counts::Loads::default(),
            list_limits,
            load_slots: Arc::new(tokio::sync::Semaphore::new(PARALLEL_LOADS)),
            jobs: jobs::Jobs::default(),
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: tokio::sync::Mutex::new(()),
            runtime,
            tool_list_version: tokio::sync::watch::Sender::new(0),
            catalog_changes: tokio::sync::watch::Sender::new(CatalogChange::default()),
            events: tokio::sync::broadcast::Sender::new(events::EVENT_BUFFER),
            folder: std::sync::OnceLock::new(),
            layout: std::sync::OnceLock::new(),
            approvals: std::sync::OnceLock::new(),
            skills: skills::Skills::default(),
            skills_version: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Keeps approvals (`approval`) in `folder`, before it is scanned, so
    /// that no version serves unapproved.
    pub(crate) fn require_approval(&self, folder: &Path, approval: approvals::ApprovalMode) {
        let _ = self
            .approvals
            .set(approvals::Approvals::new(folder, approval));
    }

    /// The folder's approvals, with `--require-approval`.
    pub(crate) fn approvals(&self) -> Option<&approvals::Approvals> {
        self.approvals.get()
    }

    /// The folder's skills.
    pub(crate) fn skills(&self) -> &skills::Skills {
        &self.skills
    }

    /// Reads `owner`'s skills again (their folder changed) and tells the
    /// sessions whose resource list it changed; returns once swapped in.
    pub(crate) async fn reload_skills(self: &Arc<Self>, owner: skills::Owner) {
        let registry = self.clone();
        let changed = tokio::task::spawn_blocking(move || registry.skills.read(&owner))
            .await
            .unwrap_or(false);
        if changed {
            self.catalog_changes
                .send_modify(|change| change.resources += 1);
        }
        self.skills_version.send_modify(|version| *version += 1);
    }

    /// Whether any tool serving now runs as a task.
    pub(crate) fn has_task_tools(&self) -> bool {
        self.peek()
            .serving()
            .any(|plugin| plugin.tools.iter().any(|tool| tool.task_support.is_some()))
    }

    /// A receiver that wakes each time a skills folder was read again.
    pub(crate) fn skills_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.skills_version.subscribe()
    }

    /// The plugin folder, once it was scanned.
    pub(crate) fn folder(&self) -> Option<&Path> {
        self.layout.get().map(layout::Layout::root)
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Where plugin `id`'s file lives in the folder, once one is scanned:
    /// the one it serves from now (`x.wasm`, `x.py`, `x.js`), else where a
    /// component of it would be.
    pub(crate) fn plugin_file(&self, id: &str) -> Option<PathBuf> {
        let component = self.plugin_file_as(id, "wasm")?;
        Some(layout::current_file(&component).unwrap_or(component))
    }

    /// Why plugin `id`'s newest version was refused, if it was.
    pub(crate) fn rejection(&self, id: &str) -> Option<Arc<plugin::LoadError>> {
        let snapshot = self.snapshot();
        let (_, record) = snapshot.plugins().find(|(known, _)| *known == id)?;
        record
            .rejected
            .as_ref()
            .map(|rejected| rejected.reason.clone())
    }

    /// Where plugin `id`'s file with `extension` (`wasm`, `py`, `js`) is
    /// in the folder, once one is scanned.
    pub(crate) fn plugin_file_as(&self, id: &str, extension: &str) -> Option<PathBuf> {
        Some(self.layout.get()?.root().join(format!("{id}.{extension}")))
    }

    /// The count of load outcomes, which metrics read.
    pub(crate) fn loads(&self) -> &load_counts::Loads {
        &self.loads
    }

    /// How much one plugin may list.
    pub(crate) fn list_limits(&self) -> &ToolListLimits {
        &self.list_limits
    }

    /// Whether the first scan is done (every plugin has loaded or failed),
    /// and the shared store caught up with, if one is followed.
    pub(crate) fn is_ready(&self) -> bool {
        self.scanned.load(std::sync::atomic::Ordering::Acquire)
            && self.caught_up.get().is_none_or(|ready| *ready.borrow())
    }

    /// The registry is ready only once `ready` says so as well.
    pub(crate) fn ready_once(&self, ready: tokio::sync::watch::Receiver<bool>) {
        let _ = self.caught_up.set(ready);
    }

    /// How many plugin files are rejected now (`/health` reports it).
    pub(crate) fn rejected_count(&self) -> usize {
        self.snapshot()
            .plugins()
            .filter(|(_, record)| {
                record
                    .rejected
                    .as_ref()
                    .is_some_and(|rejection| rejection.reason.held().is_none())
            })
            .count()
    }

    /// A receiver that wakes on every change to the tool list (a plugin added,
    /// removed, or replaced by one with different tools), starting from now.
    pub(crate) fn tool_list_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tool_list_version.subscribe()
    }

    /// A receiver that wakes when the resource or prompt lists change, or
    /// a plugin with resources is replaced, starting from now.
    pub(crate) fn catalog_changes(&self) -> tokio::sync::watch::Receiver<CatalogChange> {
        self.catalog_changes.subscribe()
    }

    /// The current state; cheap, lock-free, and stable for as long as it is
    /// held.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The current state for one lookup on the call path: no reference
    /// count is taken, so concurrent calls do not all write the one count
    /// that every snapshot holder shares. Dropped before any await.
    pub(crate) fn peek(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Sends one event; nobody listening is fine.
    fn tell(&self, kind: LoadEventKind, id: &str, report: PluginReport) {
        self.loads.record(kind, id, &report);
        let _ = self.events.send(LoadEvent {
            kind,
            plugin: id.to_string(),
            report,
        });
    }

    /// A receiver of every load event from now on (see [`LoadEvent`]).
    pub(crate) fn events(&self) -> tokio::sync::broadcast::Receiver<LoadEvent> {
        self.events.subscribe()
    }

    /// Tells listeners that plugin `name` now runs optimised code, which
    /// took `took` to compile.
    pub(crate) fn tell_optimised(&self, name: &str, took: std::time::Duration) {
        self.loads.optimised(name, took);
        // Every plugin on that code (thirty sources on one runtime) lets go
        // of its spare of the replaced code now, not at its next call: the
        // replaced code's memory goes with the last of them.
        let snapshot = self.snapshot();
        if let Some(optimised) = snapshot.serving().find(|plugin| plugin.id == name) {
            for plugin in snapshot
                .serving()
                .filter(|plugin| plugin.compiled.shares_code_with(&optimised.compiled))
            {
                self.runtime.code_replaced(&plugin.compiled);
            }
        }
        if let Some(report) = self.snapshot().plugin_report(name) {
            self.tell(LoadEventKind::Optimised, name, report);
        }
    }

    /// Every plugin file and its state, as `GET /plugins` and `toolhost
    /// list` report it, with the load jobs in progress.
    pub(crate) fn plugins_report(&self) -> PluginsReport {
        let mut plugins = self.snapshot().plugins_report();
        for (id, file, elapsed) in self.jobs.in_progress() {
            let elapsed_ms = elapsed.as_millis() as u64;
            match plugins.iter_mut().find(|plugin| plugin.id == id) {
                Some(plugin) => plugin.set_compiling(elapsed_ms),
                None => {
                    let mut plugin = PluginReport::compiling(&id, &file.display().to_string());
                    plugin.set_compiling(elapsed_ms);
                    plugins.push(plugin);
                }
            }
        }
        for plugin in plugins.iter_mut() {
            plugin.source = self.sources.report(&plugin.id);
        }
        plugins.sort_by(|a, b| a.id.cmp(&b.id));
        PluginsReport {
            folder: self.folder.get().map(|dir| dir.display().to_string()),
            plugins,
        }
    }

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
        let tool_list_changed = !before.lists_tools_as(&next);
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
        // The compile cache forgets versions this server no longer knows
        // (replaced, removed): they would otherwise stay on disk for good.
        let known = next.content_hashes();
        let gone = before.content_hashes();
        let gone = gone.difference(&known).map(|hash| hash.to_string());
        self.runtime.forget_compiled(gone.collect());
        let next = Arc::new(next);
        self.current.store(next.clone());
        // The versions this swap took out of service (replaced, removed,
        // displaced, waiting for a name) let their ready instances go; and
        // one plugin that now serves a new version, alone (a drop, a
        // publish, a policy edit, each file of a rescan; not the start-up
        // scan), gets its first spare (`Runtime::loaded`). Only the ids
        // this swap changed are looked at.
        for (id, _) in &outcomes {
            let (old, now) = (before.serving_of(id), next.serving_of(id));
            if let Some(old) = old
                && !now.is_some_and(|now| Arc::ptr_eq(now, old))
            {
                self.runtime.unserved(&old.compiled);
            }
        }
        if let [(id, Outcome::Admitted)] = &outcomes[..]
            && let Some(now) = next.serving_of(id)
            && !before
                .serving_of(id)
                .is_some_and(|old| Arc::ptr_eq(old, now))
        {
            self.runtime.loaded(&now.compiled, &now.grants);
        }
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
                    Some(report) if report.state == PluginState::Pending => {
                        (LoadEventKind::Pending, report)
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
        layout::remove_publish_leftovers(layout);
        let mut paths = layout.files().await?;
        let known: Vec<PathBuf> = self
            .snapshot()
            .plugins()
            .map(|(_, r)| r.file.clone())
            .collect();
        paths.extend(known.into_iter().filter(|path| !path.exists()));
        tracing::info!(folder = %dir.display(), files = paths.len(), "loading the plugin folder");
        self.skills
            .open(layout.root(), self.approvals.get().is_some());
        let (registry, namespaces) = (self.clone(), layout.namespace_dirs());
        let skills = tokio::task::spawn_blocking(move || registry.skills.read_all(&namespaces));
        self.load(paths).await;
        let _ = skills.await;
        self.scanned.store(true, Ordering::Release);
        self.runtime.started();
        Ok(())
    }

    /// Starts loading the files at `paths` (changed, new or deleted) as one
    /// batch and returns at once; the registry changes when the load is
    /// done, for all of them together. The watcher's entry into
    /// [`Registry::load`]: the plugins one change governs (every plugin of
    /// the room for `_room.toml`, a namespace's for its `_namespace.toml`)
    /// change in one step, so no call sees a room half revoked.
    pub(crate) fn reload(self: &Arc<Self>, paths: Vec<PathBuf>) {
        if paths.is_empty() {
            return;
        }
        let registry = self.clone();
        tokio::spawn(async move { registry.load(paths).await });
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
    pub(crate) async fn load(self: &Arc<Self>, paths: Vec<PathBuf>) {
        let mut paths: Vec<PathBuf> = paths.into_iter().map(|path| self.current(path)).collect();
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
        self.load_all_settled(vec![path]).await.pop().flatten()
    }

    /// [`Registry::load_settled`] for many files, loaded as one batch (their
    /// verdicts applied together): each file's report, in their order.
    pub(crate) async fn load_all_settled(
        self: &Arc<Self>,
        paths: Vec<PathBuf>,
    ) -> Vec<Option<PluginReport>> {
        let mut jobs = Vec::new();
        let mut outcomes = Vec::new();
        for path in paths {
            let path = self.current(path);
            let Some(id) = self.plugin_id(&path) else {
                outcomes.push(None);
                continue;
            };
            let (waiter, outcome) = tokio::sync::oneshot::channel();
            let generation = self.begin(&id, &path, vec![waiter]);
            jobs.push((id, path, generation));
            outcomes.push(Some(outcome));
        }
        if !jobs.is_empty() {
            let registry = self.clone();
            // The caller's span (a publish's request, `dev`'s save) is the
            // load's parent, so the two read as one trace.
            let run = async move { registry.run(jobs).await };
            tokio::spawn(tracing::Instrument::in_current_span(run));
        }
        let mut reports = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            reports.push(match outcome {
                Some(outcome) => outcome.await.ok().flatten(),
                None => None,
            });
        }
        reports
    }

    /// Judges the begun `jobs` and applies their verdicts (see
    /// [`Registry::load`]); whoever waits for a job that settled is told.
    async fn run(self: &Arc<Self>, jobs: Vec<(String, PathBuf, u64)>) {
        // One span a job, from its wait for a slot to its verdict applied:
        // `verdict` (read, compile, list) and `apply` inside it.
        let spans: Vec<tracing::Span> = jobs
            .iter()
            .map(|(id, _, generation)| {
                tracing::info_span!("load", plugin = %id, generation, verdict = tracing::field::Empty)
            })
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for (index, (id, path, generation)) in jobs.iter().cloned().enumerate() {
            let registry = self.clone();
            let span = spans[index].clone();
            tasks.spawn(tracing::Instrument::instrument(
                async move {
                    let Ok(_slot) = registry.load_slots.clone().acquire_owned().await else {
                        return (index, None);
                    };
                    // Superseded while it queued for a slot: not worth a compile.
                    if !registry.jobs.is_newest(&id, generation) {
                        return (index, None);
                    }
                    let verdict = judge(
                        &registry.sources,
                        &registry.runtime,
                        &registry.list_limits,
                        &registry.snapshot(),
                        &id,
                        &path,
                    )
                    .await;
                    let verdict = match registry.approvals() {
                        Some(approvals) => {
                            verdict::held_for_approval(
                                (&registry.runtime, &registry.list_limits),
                                &registry.snapshot(),
                                approvals,
                                &id,
                                &path,
                                verdict,
                            )
                            .await
                        }
                        None => verdict,
                    };
                    (index, Some(verdict))
                },
                span,
            ));
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
        let mut batch: Vec<_> = jobs.into_iter().zip(verdicts).zip(spans).collect();
        batch.sort_by_key(|((_, verdict), _)| match verdict {
            Some(Verdict::Loaded(plugin)) => (0, plugin.claim_order()),
            _ => (1, (true, std::time::SystemTime::UNIX_EPOCH, String::new())),
        });
        let mut settled = Vec::new();
        let mut unchanged = Vec::new();
        for (((id, path, generation), verdict), span) in batch {
            let Some(verdict) = verdict else { continue };
            span.record("verdict", verdict.name());
            let _apply = tracing::debug_span!(parent: &span, "apply").entered();
            let Some(finished) = self.jobs.finish(&id, generation) else {
                tracing::info!(plugin = %id, "a newer version arrived while loading; this one is dropped");
                continue;
            };
            self.loads.job_finished(&id, finished.took);
            if matches!(verdict, Verdict::Unchanged) {
                unchanged.push(id.clone());
            }
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
        // Its `compiling` event told of a job: this one tells it ended.
        for id in unchanged {
            if let Some(report) = now.plugin_report(&id) {
                self.tell(LoadEventKind::Unchanged, &id, report);
            }
        }
        for (id, waiters) in settled {
            jobs::answer(waiters, now.plugin_report(&id));
        }
    }

    /// The file plugin `path`'s id serves from now (`x.wasm`, `x.py`,
    /// `x.js`: the first there is), or `path` when none is there.
    fn current(&self, path: PathBuf) -> PathBuf {
        match self.layout.get() {
            Some(layout) if layout.plugin_id(&path).is_some() => {
                layout::current_file(&path).unwrap_or(path)
            }
            _ => path,
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

/// What changed in the resources and prompts, as MCP sessions hear it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CatalogChange {
    /// Bumped when the resource or template list changes.
    pub(crate) resources: u64,
    /// Bumped when the prompt list changes.
    pub(crate) prompts: u64,
    /// Bumped with each batch of replaced plugins that serve resources.
    pub(crate) updates: u64,
    /// The ids of those plugins, in the newest batch.
    pub(crate) replaced: Arc<Vec<String>>,
}
