//! The live registry: which plugin files exist, which versions serve, and
//! which plugin holds each tool name.
//!
//! Readers (every call) take an immutable [`Snapshot`] without locking
//! (`arc-swap`). A writer builds a new snapshot and swaps it in whole, so a
//! reader sees either the old or the new state, never a mix; a call that
//! already holds a plugin keeps it (it is reference-counted) and finishes on
//! the old version while new calls get the new one. Writers are serialised by
//! one async mutex, so file events are applied one at a time, in order.
//!
//! Rules:
//! - A file whose bytes hash the same as what is serving (or as what was
//!   last rejected) is not loaded again.
//! - A rejected file never takes down the version that was serving.
//! - A tool name belongs to the plugin that registered it first. A plugin
//!   that would take another's name is rejected, naming the holder, and is
//!   admitted by itself once the name is free again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::loader::{self, LoadedPlugin, Version};
use crate::manifest::Tool;
use crate::runtime::Runtime;

/// How many files are compiled at once during a folder scan.
const PARALLEL_LOADS: usize = 4;

/// An immutable view of the registry.
#[derive(Clone, Default)]
pub struct Snapshot {
    plugins: BTreeMap<String, PluginRecord>,
    tools: BTreeMap<String, ToolEntry>,
}

/// A tool together with the plugin version that serves it.
#[derive(Clone)]
pub struct ToolEntry {
    pub plugin: Arc<LoadedPlugin>,
    pub tool: Arc<Tool>,
}

/// One plugin file and what became of it.
#[derive(Clone)]
pub struct PluginRecord {
    pub file: PathBuf,
    /// The version serving calls, if any.
    pub serving: Option<Arc<LoadedPlugin>>,
    /// Set when the newest version of the file was refused.
    pub rejected: Option<Rejection>,
}

#[derive(Clone)]
pub struct Rejection {
    pub version: Version,
    pub reason: String,
    pub at: SystemTime,
    /// A version that is valid but waits for a tool name held by another
    /// plugin; it is admitted when the name frees up.
    waiting: Option<Arc<LoadedPlugin>>,
}

impl Snapshot {
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name)
    }

    /// Every serving tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolEntry> {
        self.tools.values()
    }

    /// The tool list as clients see it, to tell whether a change altered it.
    fn tool_list_fingerprint(&self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        self.tools().map(|entry| entry.tool.descriptor()).collect()
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Every plugin file, by id.
    pub fn plugins(&self) -> impl Iterator<Item = (&String, &PluginRecord)> {
        self.plugins.iter()
    }

    /// Every plugin file and its state, as `GET /plugins` and `toolhost list`
    /// report it.
    pub fn plugins_report(&self) -> serde_json::Value {
        use serde_json::json;
        let time = |at: SystemTime| humantime::format_rfc3339_millis(at).to_string();
        let plugins: Vec<serde_json::Value> = self
            .plugins
            .iter()
            .map(|(id, record)| {
                let tools: Vec<&str> = record
                    .serving
                    .iter()
                    .flat_map(|plugin| plugin.tools.iter().map(|tool| tool.name.as_str()))
                    .collect();
                let mut report = json!({
                    "id": id,
                    "file": record.file.display().to_string(),
                    "tools": tools,
                });
                match (&record.rejected, &record.serving) {
                    (Some(rejection), serving) => {
                        report["state"] = json!("rejected");
                        report["reason"] = json!(rejection.reason);
                        report["contentHash"] = json!(rejection.version.content_hash);
                        report["rejectedAt"] = json!(time(rejection.at));
                        if let Some(serving) = serving {
                            report["serving"] = json!({
                                "contentHash": serving.version.content_hash,
                                "loadedAt": time(serving.loaded_at),
                            });
                        }
                    }
                    (None, Some(serving)) => {
                        report["state"] = json!("loaded");
                        report["contentHash"] = json!(serving.version.content_hash);
                        report["loadedAt"] = json!(time(serving.loaded_at));
                        report["fromCache"] = json!(serving.compiled.from_cache);
                    }
                    (None, None) => {}
                }
                if let Some(serving) = &record.serving {
                    report["granted"] = crate::policy::describe(&serving.grants);
                }
                report
            })
            .collect();
        json!({ "plugins": plugins })
    }

    /// Puts a valid version in service, unless one of its tool names is held
    /// by another plugin.
    fn admit(&mut self, candidate: Arc<LoadedPlugin>) {
        let id = candidate.id.clone();
        let conflict = candidate.tools.iter().find_map(|tool| {
            let holder = self.tools.get(&tool.name)?;
            (holder.plugin.id != id).then(|| (tool.name.clone(), holder.plugin.id.clone()))
        });
        let record = self
            .plugins
            .entry(id.clone())
            .or_insert_with(|| PluginRecord {
                file: candidate.file.clone(),
                serving: None,
                rejected: None,
            });
        if let Some((tool, holder)) = conflict {
            record.rejected = Some(Rejection {
                version: candidate.version.clone(),
                reason: format!("tool {tool:?} is already provided by plugin {holder:?}"),
                at: SystemTime::now(),
                waiting: Some(candidate),
            });
            return;
        }
        record.serving = Some(candidate.clone());
        record.rejected = None;
        self.tools.retain(|_, entry| entry.plugin.id != id);
        for tool in &candidate.tools {
            let entry = ToolEntry {
                plugin: candidate.clone(),
                tool: tool.clone(),
            };
            self.tools.insert(tool.name.clone(), entry);
        }
    }

    fn reject(&mut self, id: &str, file: &Path, version: Version, reason: String) {
        let record = self
            .plugins
            .entry(id.to_string())
            .or_insert_with(|| PluginRecord {
                file: file.to_path_buf(),
                serving: None,
                rejected: None,
            });
        record.rejected = Some(Rejection {
            version,
            reason,
            at: SystemTime::now(),
            waiting: None,
        });
    }

    fn remove(&mut self, id: &str) {
        self.plugins.remove(id);
        self.tools.retain(|_, entry| entry.plugin.id != id);
    }

    /// Retries versions that waited for a tool name, oldest first, until
    /// none more can be admitted.
    fn admit_waiting(&mut self) {
        loop {
            let mut waiting: Vec<(SystemTime, Arc<LoadedPlugin>)> = self
                .plugins
                .values()
                .filter_map(|record| {
                    let rejection = record.rejected.as_ref()?;
                    Some((rejection.at, rejection.waiting.clone()?))
                })
                .collect();
            waiting.sort_by_key(|(at, _)| *at);
            let admitted = waiting.into_iter().find(|(_, candidate)| {
                candidate.tools.iter().all(|tool| {
                    self.tools
                        .get(&tool.name)
                        .is_none_or(|holder| holder.plugin.id == candidate.id)
                })
            });
            match admitted {
                Some((_, candidate)) => self.admit(candidate),
                None => return,
            }
        }
    }

    /// Whether this version (plugin and policy bytes) is what the plugin
    /// already serves or already refused, so loading it again would change
    /// nothing.
    fn already_judged(&self, id: &str, version: &Version) -> bool {
        let Some(record) = self.plugins.get(id) else {
            return false;
        };
        match &record.rejected {
            Some(rejection) => rejection.version == *version,
            None => record
                .serving
                .as_ref()
                .is_some_and(|serving| serving.version == *version),
        }
    }
}

/// What reading a file yielded: a version to admit, or a refusal.
enum Verdict {
    Unchanged,
    Gone,
    Loaded(LoadedPlugin),
    Refused { version: Version, reason: String },
}

pub struct Registry {
    current: ArcSwap<Snapshot>,
    writer: tokio::sync::Mutex<()>,
    runtime: Arc<Runtime>,
    /// Bumped each time the tool list a client would see changes. A watch
    /// channel keeps only the newest value, so a burst of changes reaches a
    /// slow listener as one.
    tool_list_version: tokio::sync::watch::Sender<u64>,
}

impl Registry {
    pub fn new(runtime: Arc<Runtime>) -> Arc<Self> {
        Arc::new(Registry {
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: tokio::sync::Mutex::new(()),
            runtime,
            tool_list_version: tokio::sync::watch::Sender::new(0),
        })
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// A receiver that wakes on every change to the tool list (a plugin added,
    /// removed, or replaced by one with different tools), starting from now.
    pub fn tool_list_changes(&self) -> tokio::sync::watch::Receiver<u64> {
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
    pub async fn scan(&self, dir: &Path) -> std::io::Result<()> {
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
    /// now: loads new and changed files, drops deleted ones.
    pub async fn sync(&self, mut paths: Vec<PathBuf>) {
        paths.sort();
        paths.dedup();
        let _writer = self.writer.lock().await;
        let before = self.snapshot();
        let mut judged = Vec::with_capacity(paths.len());
        for batch in paths.chunks(PARALLEL_LOADS) {
            let mut tasks = tokio::task::JoinSet::new();
            for (index, path) in batch.iter().enumerate() {
                let (before, runtime, path) = (before.clone(), self.runtime.clone(), path.clone());
                tasks.spawn(async move { (index, judge(&runtime, &before, &path).await) });
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
        let mut next = (*before).clone();
        for (path, verdict) in judged {
            let Some(id) = loader::plugin_id(&path) else {
                continue;
            };
            match verdict {
                Verdict::Unchanged => {}
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
                    next.reject(&id, &path, version, reason);
                }
            }
        }
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
    }
}

/// Reads and loads one file, without touching the registry.
async fn judge(runtime: &Arc<Runtime>, before: &Snapshot, path: &Path) -> Verdict {
    let Some(id) = loader::plugin_id(path) else {
        return Verdict::Unchanged;
    };
    let source = match loader::read_source(path).await {
        Ok(source) => source,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Verdict::Gone,
        Err(error) => {
            return Verdict::Refused {
                version: Version::default(),
                reason: format!("cannot read the file: {error}"),
            };
        }
    };
    let version = source.version.clone();
    if before.already_judged(&id, &version) {
        return Verdict::Unchanged;
    }
    match loader::load(runtime, &id, path, source).await {
        Ok(plugin) => Verdict::Loaded(plugin),
        Err(reason) => Verdict::Refused { version, reason },
    }
}
