//! Hot reload: turns file-system events in the plugin folder into registry
//! syncs. Event driven (inotify on Linux, through `notify`), never a polling
//! loop.
//!
//! Events are debounced per file: a file is looked at once it has been quiet
//! for the debounce window, so a `cp` that writes in several chunks is read
//! whole, once. Write-to-temp-then-rename shows up as an event on the final
//! name (the temporary name is not a `*.wasm` plugin, or is hidden, and is
//! ignored). A change to a policy file (`x.toml`) reloads its plugin
//! (`x.wasm`). Batches that arrive while a sync runs are merged into the next.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_mini::{DebouncedEventKind, Debouncer, new_debouncer};

use crate::loader;
use crate::registry::Registry;

/// Keeps the watch alive; dropping it stops watching.
pub struct FolderWatch {
    _debouncer: Debouncer<notify::RecommendedWatcher>,
}

/// Watches `dir` (not its subfolders) and syncs the registry on every
/// settled change to a plugin file.
pub fn watch(
    registry: Arc<Registry>,
    dir: &Path,
    debounce: Duration,
) -> anyhow::Result<FolderWatch> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
    let mut debouncer = new_debouncer(
        debounce,
        move |result: notify_debouncer_mini::DebounceEventResult| match result {
            Ok(events) => {
                let paths: Vec<PathBuf> = events
                    .into_iter()
                    .filter(|event| event.kind == DebouncedEventKind::Any)
                    .filter_map(|event| loader::plugin_file_for(&event.path))
                    .collect();
                if !paths.is_empty() {
                    let _ = sender.send(paths);
                }
            }
            Err(error) => tracing::error!(%error, "watching the plugin folder failed"),
        },
    )?;
    debouncer
        .watcher()
        .watch(dir, RecursiveMode::NonRecursive)?;

    tokio::spawn(async move {
        while let Some(mut paths) = receiver.recv().await {
            while let Ok(more) = receiver.try_recv() {
                paths.extend(more);
            }
            registry.sync(paths).await;
        }
    });
    Ok(FolderWatch {
        _debouncer: debouncer,
    })
}
