//! Hot reload: turns file-system events in the plugin folder into load jobs
//! ([`Registry::reload`]). Event driven (inotify on Linux, through
//! `notify`), never a polling loop; an idle server reads nothing.
//!
//! Rules:
//! - Only events that can change a file's content or presence count:
//!   create, write, close-after-write, rename, remove. Opens, reads and
//!   closes after reading (the server's own read of a plugin, say) are
//!   ignored, so the watcher never feeds itself.
//! - A file is read only once its writer is done: after a close-after-write
//!   or a rename, once it has been quiet for the debounce window. A writer
//!   that pauses mid-file (a slow copy) has not closed the file, so it is
//!   not read half-written; only if no close ever comes (a backend without
//!   close events) is the file read after [`SLOW_WRITER_QUIET`] of quiet.
//! - Write-to-temp-then-rename shows up as a rename to the final name (a
//!   hidden or non-`.wasm` temporary name is not a plugin and is ignored).
//! - A change to a policy file (`x.toml`) reloads its plugin (`x.wasm`);
//!   one to a namespace's `_namespace.toml` or the room's `_room.toml`,
//!   every plugin it governs. Files that settle together load as one batch,
//!   applied in one step: a revoked grant is gone from all of them at once.
//! - Namespace folders (`ada/x.wasm`, see `layout::Layout`) are followed
//!   too, including ones created later, each watched on its own (never
//!   recursively: a project's `target/` inside the folder must not cost a
//!   watch per subfolder, nor wake the server while it builds); deeper
//!   files are not plugins.
//! - If the kernel's event queue overflowed, the whole folder is looked at
//!   again; so it is when a Kubernetes ConfigMap or Secret mounted as the
//!   folder is updated: the kubelet swaps its `..data` link to a new
//!   folder, and the plugin names, links into it, see no event of their
//!   own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecursiveMode, Watcher as _};
use tokio::time::Instant;

use crate::registry::Registry;
use crate::registry::layout;
use crate::registry::skills;

/// How long a file that is still open for writing must be quiet before it
/// is read anyway.
const SLOW_WRITER_QUIET: Duration = Duration::from_secs(2);

/// Keeps the watch alive; dropping it stops watching.
pub(crate) struct FolderWatch {
    /// Shared (weakly) with the event loop, which adds namespace folders.
    _watcher: Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
}

/// What an event says about a file.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Change {
    /// Being written: wait for the writer to finish.
    Writing,
    /// Complete: written and closed, renamed into place, or removed.
    Settled,
}

fn classify(kind: &EventKind) -> Option<Change> {
    match kind {
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
            Some(Change::Writing)
        }
        EventKind::Access(AccessKind::Close(AccessMode::Write))
        | EventKind::Modify(ModifyKind::Name(_))
        | EventKind::Remove(_) => Some(Change::Settled),
        // Opens, reads, closes after reading, metadata: no new content.
        _ => None,
    }
}

/// A file with events not yet acted on.
struct PendingFile {
    writing: bool,
    last_event: Instant,
}

impl PendingFile {
    fn due(&self, debounce: Duration) -> Instant {
        let quiet = if self.writing {
            SLOW_WRITER_QUIET.max(debounce)
        } else {
            debounce
        };
        self.last_event + quiet
    }
}

/// Watches `dir` and its namespace folders, and starts a load job for
/// each plugin file once its change has settled.
pub(crate) fn watch(
    registry: Arc<Registry>,
    dir: &Path,
    debounce: Duration,
) -> anyhow::Result<FolderWatch> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<notify::Result<Event>>();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = sender.send(event);
    })?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    let layout = layout::Layout::new(dir);
    for namespace in layout.namespace_dirs() {
        watcher.watch(&namespace, RecursiveMode::NonRecursive)?;
        watch_skills(
            &mut watcher,
            &skills::Owner::Namespace(namespace_name(&namespace)).dir(dir),
        );
    }
    watch_skills(&mut watcher, &skills::Owner::Room.dir(dir));
    let watcher = Arc::new(std::sync::Mutex::new(watcher));
    let adder = Arc::downgrade(&watcher);

    tokio::spawn(async move {
        let mut pending: HashMap<PathBuf, PendingFile> = HashMap::new();
        // Skills folders changed, by owner, and when last.
        let mut skills_changed: HashMap<skills::Owner, Instant> = HashMap::new();
        loop {
            let next_due = pending
                .values()
                .map(|p| p.due(debounce))
                .chain(skills_changed.values().map(|at| *at + debounce))
                .min();
            let event = match next_due {
                None => receiver.recv().await,
                Some(due) => tokio::select! {
                    event = receiver.recv() => event,
                    () = tokio::time::sleep_until(due) => {
                        // Every file settled by now loads as one batch:
                        // the plugins one event governs change together.
                        let now = Instant::now();
                        let mut settled = Vec::new();
                        pending.retain(|path, file| {
                            let due = file.due(debounce) <= now;
                            if due {
                                settled.push(path.clone());
                            }
                            !due
                        });
                        registry.reload(settled);
                        skills_changed.retain(|owner, at| {
                            let due = *at + debounce <= now;
                            if due {
                                let (registry, owner) = (registry.clone(), owner.clone());
                                tokio::spawn(async move { registry.reload_skills(owner).await });
                            }
                            !due
                        });
                        continue;
                    }
                },
            };
            let Some(event) = event else {
                return;
            };
            match event {
                Err(error) => {
                    tracing::error!(%error, "watching the plugin folder failed; looking at it again");
                    rescan(&registry, &layout).await;
                }
                Ok(event) if event.need_rescan() => {
                    tracing::warn!("file events were lost; looking at the plugin folder again");
                    rescan(&registry, &layout).await;
                }
                Ok(event) if event.paths.iter().any(|path| is_projected_swap(path)) => {
                    tracing::info!("the mounted folder was updated; looking at it again");
                    rescan(&registry, &layout).await;
                }
                Ok(event) => {
                    let Some(change) = classify(&event.kind) else {
                        continue;
                    };
                    for path in &event.paths {
                        let Some(owner) = skills::Owner::of_path(layout.root(), path) else {
                            continue;
                        };
                        // A skills folder made now is watched from now on.
                        if *path == owner.dir(layout.root())
                            && let Some(watcher) = adder.upgrade()
                        {
                            let mut watcher = watcher.lock().unwrap_or_else(|e| e.into_inner());
                            watch_skills(&mut watcher, path);
                        }
                        skills_changed.insert(owner, Instant::now());
                    }
                    // A namespace folder made (or moved in) while serving:
                    // watch it, and look at what it already holds.
                    for folder in event
                        .paths
                        .iter()
                        .filter(|p| layout.is_namespace_dir(p) && p.is_dir())
                    {
                        if let Some(watcher) = adder.upgrade() {
                            let mut watcher = watcher.lock().unwrap_or_else(|e| e.into_inner());
                            if let Err(error) = watcher.watch(folder, RecursiveMode::NonRecursive) {
                                tracing::warn!(folder = %folder.display(), %error, "cannot watch a namespace folder");
                            }
                            let owner = skills::Owner::Namespace(namespace_name(folder));
                            watch_skills(&mut watcher, &owner.dir(layout.root()));
                            skills_changed.insert(owner, Instant::now());
                        }
                        if let Ok(entries) = std::fs::read_dir(folder) {
                            for entry in entries.filter_map(Result::ok) {
                                if let Some(path) = layout.plugin_file_for(&entry.path()) {
                                    pending.entry(path).or_insert(PendingFile {
                                        writing: false,
                                        last_event: Instant::now(),
                                    });
                                }
                            }
                        }
                    }
                    for path in event.paths.iter().flat_map(|p| layout.plugin_files_for(p)) {
                        let file = pending.entry(path).or_insert(PendingFile {
                            writing: false,
                            last_event: Instant::now(),
                        });
                        file.writing = change == Change::Writing;
                        file.last_event = Instant::now();
                    }
                }
            }
        }
    });
    Ok(FolderWatch { _watcher: watcher })
}

/// Whether `path` is the `..data` link of a Kubernetes projected volume
/// (ConfigMap, Secret), which the kubelet replaces to update every file at
/// once.
fn is_projected_swap(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "..data")
}

/// Starts a load job for every plugin file in the folder and every known
/// one that is gone.
/// Watches a skills folder and everything below it, if it is there.
fn watch_skills(watcher: &mut notify::RecommendedWatcher, folder: &Path) {
    if !folder.is_dir() {
        return;
    }
    if let Err(error) = watcher.watch(folder, RecursiveMode::Recursive) {
        tracing::warn!(folder = %folder.display(), %error, "cannot watch a skills folder");
    }
}

fn namespace_name(folder: &Path) -> String {
    folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

async fn rescan(registry: &Arc<Registry>, layout: &layout::Layout) {
    let mut paths: Vec<PathBuf> = registry
        .snapshot()
        .plugins()
        .map(|(_, record)| record.file.clone())
        .collect();
    paths.extend(layout.files().await.unwrap_or_default());
    paths.retain(|path| layout.plugin_id(path).is_some());
    registry.reload(paths);
    let mut owners = vec![skills::Owner::Room];
    owners.extend(
        layout
            .namespace_dirs()
            .iter()
            .map(|dir| skills::Owner::Namespace(namespace_name(dir))),
    );
    for owner in owners {
        registry.reload_skills(owner).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, RemoveKind, RenameMode};

    #[test]
    fn only_changes_to_content_or_presence_count() {
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        let read_closed = EventKind::Access(AccessKind::Close(AccessMode::Read));
        let metadata = EventKind::Modify(ModifyKind::Metadata(notify::event::MetadataKind::Any));
        for ignored in [open, read_closed, metadata] {
            assert_eq!(classify(&ignored), None, "{ignored:?}");
        }
        let writing = [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
        ];
        for kind in writing {
            assert_eq!(classify(&kind), Some(Change::Writing), "{kind:?}");
        }
        let settled = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
        ];
        for kind in settled {
            assert_eq!(classify(&kind), Some(Change::Settled), "{kind:?}");
        }
    }
}
