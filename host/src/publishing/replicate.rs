//! This replica's side of the shared store (`shared.rs`): a change another
//! replica shared (or this one, read back) applied to this replica's
//! folder, under the plugin's publish lock, and loaded through the one
//! load path; the room's view (`/publishes`, `/events`) hears of a change
//! made elsewhere as of a publish made here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::following::Applier;
use super::publish::{Noted, PublishOutcome, Publishing};
use super::shared::{APPROVAL_EXTENSIONS, Change};
use crate::registry::layout;
use crate::registry::layout::file_name;
use crate::registry::plugin::{published_file, source_file};
use crate::registry::report::PluginState;

impl Applier for Publishing {
    fn folder_of(&self, id: &str) -> Option<PathBuf> {
        let registry = self.registry();
        let file = registry.plugin_file_as(id, "wasm")?;
        let root = registry.folder()?;
        // `id` must come back from its own path: never a file outside the
        // folder, nor in a project or data folder.
        (layout::Layout::new(root).plugin_id(&file)?.as_str() == id)
            .then(|| file.parent().map(Path::to_path_buf))?
    }

    fn approvals_of(&self, id: &str) -> Option<PathBuf> {
        self.folder_of(id)?;
        Some(self.registry().approvals()?.dir_of(id))
    }

    async fn write(
        &self,
        change: &Change,
        blobs: BTreeMap<String, Vec<u8>>,
        approvals: BTreeMap<String, Vec<u8>>,
    ) -> std::io::Result<Option<PathBuf>> {
        let id = change.plugin.clone();
        let lock = self.publish_lock(&id);
        let _serialised = lock.lock().await;
        let Some(folder) = self.folder_of(&id) else {
            return Ok(None);
        };
        let registry = self.registry().clone();
        let file = match change.plugin_file() {
            Some(name) => folder.join(name),
            None => match registry.plugin_file(&id) {
                Some(file) => file,
                None => return Ok(None),
            },
        };
        // The plugin's file must be a plugin of the folder named `id`:
        // never a source of a project folder.
        let root = registry.folder().map(Path::to_path_buf);
        if root.and_then(|root| layout::Layout::new(&root).plugin_id(&file)) != Some(id.clone()) {
            return Ok(None);
        }
        // The approval first: the plugin's load judges by it.
        let mut changed = match self.approvals_of(&id) {
            Some(dir) => {
                replace_files(&dir, approvals, |name| {
                    !change.approvals.contains_key(name)
                        && APPROVAL_EXTENSIONS.iter().any(|extension| {
                            name == format!("{}.{extension}", layout::name_of(&id))
                        })
                })
                .await?
            }
            None => false,
        };
        // The record and the source first, the plugin's file last: its load
        // reads them.
        let mut ordered: Vec<_> = blobs.into_iter().collect();
        ordered.sort_by_key(|(name, _)| !name.starts_with('.'));
        changed |= replace_files(&folder, ordered, |_| false).await?;
        // Every file of the plugin the change does not name goes.
        let mut others: Vec<PathBuf> = layout::siblings(&file);
        if change.files.is_empty() {
            others.push(file.clone());
        }
        let mut unnamed: Vec<PathBuf> = others
            .iter()
            .flat_map(|other| [other.clone(), published_file(other), source_file(other)])
            .collect();
        unnamed.extend([published_file(&file), source_file(&file)]);
        for path in unnamed {
            if change.files.contains_key(&file_name(&path)) {
                continue;
            }
            match tokio::fs::remove_file(&path).await {
                Ok(()) => changed = true,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        Ok(changed.then_some(file))
    }

    async fn load(&self, written: Vec<(Change, PathBuf)>) {
        if written.is_empty() {
            return;
        }
        // One batch, each file waiting for its own outcome (a load the
        // watcher starts for the same file takes it over): compiled and
        // listed side by side, applied together.
        let registry = self.registry().clone();
        let reports = registry
            .load_all_settled(written.iter().map(|(_, file)| file.clone()).collect())
            .await;
        for ((change, _), report) in written.into_iter().zip(reports) {
            let theirs = self
                .shared()
                .is_some_and(|shared| shared.replica() != change.replica);
            tracing::info!(plugin = %change.plugin, person = %change.by, from = %change.replica, removed = change.files.is_empty(), "a shared change applied");
            let Some(plugin) = report else {
                continue;
            };
            let plugin = &plugin;
            if theirs && !change.files.is_empty() {
                let outcome = if plugin.state == PluginState::Rejected {
                    PublishOutcome::Refused
                } else {
                    PublishOutcome::of_loaded(plugin)
                };
                self.note(Noted::now(&change.plugin, &change.by, outcome));
            }
        }
    }
}

/// Writes each of `files` into `dir` by rename, in their order, then
/// removes the files of `dir` that `gone` names; whether anything changed.
async fn replace_files(
    dir: &Path,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
    gone: impl Fn(&str) -> bool,
) -> std::io::Result<bool> {
    let mut changed = false;
    for (name, bytes) in files {
        tokio::fs::create_dir_all(dir).await?;
        let target = dir.join(name);
        tokio::task::spawn_blocking(move || layout::write_by_rename_unsynced(&target, &bytes))
            .await
            .map_err(std::io::Error::other)??;
        changed = true;
    }
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return Ok(changed);
    };
    while let Some(entry) = entries.next_entry().await? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if gone(&name) {
            layout::gone_is_fine(tokio::fs::remove_file(entry.path()).await)?;
            changed = true;
        }
    }
    Ok(changed)
}
