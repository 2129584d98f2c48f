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
//! There is one load path (`load.rs`, [`Registry::load`]), for the start-up scan and
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

pub(crate) mod catalog;
pub mod events;
mod jobs;
pub mod layout;
mod load;
pub(crate) mod load_counts;
pub mod plugin;
pub(crate) mod policy;
pub(crate) mod portability;
pub(crate) mod publish;
pub mod report;
pub mod shares;
mod snapshot;
pub(crate) mod sources;
pub mod tools;
pub(crate) mod watcher;

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::registry::events::{LoadEvent, LoadEventKind};
use crate::registry::report::{PluginReport, PluginsReport};
pub use crate::registry::snapshot::{ServedTool, Snapshot};
use crate::registry::tools::ToolListLimits;
use crate::runtime::Runtime;

/// How many files are compiled at once, over all loads.
const PARALLEL_LOADS: usize = 4;

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
    /// Every load outcome told, counted (see [`loads`]).
    loads: load_counts::Loads,
    /// Plugins whose policies name an OCI source (see [`sources`]).
    sources: Arc<sources::Sources>,
    /// Set once the first scan of the folder is done: every plugin, from a
    /// file or from a registry, has loaded or failed (`/ready`).
    scanned: std::sync::atomic::AtomicBool,
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
        })
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Where plugin `id`'s file lives in the folder, once one is scanned.
    pub(crate) fn plugin_file(&self, id: &str) -> Option<PathBuf> {
        Some(self.layout.get()?.root().join(format!("{id}.wasm")))
    }

    /// The count of load outcomes, which metrics read.
    pub(crate) fn loads(&self) -> &load_counts::Loads {
        &self.loads
    }

    /// How much one plugin may list.
    pub(crate) fn list_limits(&self) -> &ToolListLimits {
        &self.list_limits
    }

    /// Whether the first scan is done: every plugin has loaded or failed.
    pub(crate) fn is_ready(&self) -> bool {
        self.scanned.load(std::sync::atomic::Ordering::Acquire)
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
