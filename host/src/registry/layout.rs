//! Which files in the plugin folder are plugins, and their ids: the top
//! level and one level of namespace folders; a namespace's name rules; the
//! namespace policy's reserved name. The scan, the watcher and publishing
//! all ask this one place.
//!
//! A plugin is a component (`x.wasm`) or a source file its language's
//! runtime runs (`x.py`, `x.js`). One id is one plugin: where two of its
//! files are there at once, the first of [`PLUGIN_EXTENSIONS`] is the
//! plugin ([`Layout::plugin_file_for`]), and the others wait behind it
//! (publishing takes them away). A folder that is a project (a tool's
//! sources, such as the repository's `plugins/textpy/`) serves no source
//! file: its `app.py` is what a build reads, not a plugin.

use std::path::{Path, PathBuf};

use crate::registry::policy;

/// A plugin file's extensions, the one that counts first when an id has
/// two files.
pub(crate) const PLUGIN_EXTENSIONS: [&str; 5] = ["wasm", "py", "js", "ts", "zip"];

/// Where plugin files live: the folder's top level (plugins served under
/// their own tool names) and one level of namespace folders below it
/// (`ada/word_count.wasm`, plugin id `ada/word_count`, tools served as
/// `ada__<tool>`). Anything deeper, hidden, or in a folder whose name is
/// not a valid namespace is not a plugin file.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of the folder `root`, as paths into it are written (the
    /// watcher and the scan build their paths from the same `root`).
    pub(crate) fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
        }
    }

    /// The folder's top level.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The plugin id of a file in the folder: its stem at the top level,
    /// `namespace/stem` in a namespace folder; `None` for anything else.
    pub(crate) fn plugin_id(&self, path: &Path) -> Option<String> {
        let stem = plugin_stem(path)?;
        let relative = path.strip_prefix(&self.root).ok()?;
        let mut parts = relative.components();
        let first = parts.next()?.as_os_str().to_str()?;
        match (parts.next(), parts.next()) {
            (None, _) => Some(stem),
            // `_namespace` is the namespace's policy, never a plugin.
            (Some(_), None)
                if is_valid_namespace(first)
                    && Some(stem.as_str()) != namespace_policy_stem()
                    && !(is_source(path) && self.is_project_dir(first)) =>
            {
                Some(format!("{first}/{stem}"))
            }
            _ => None,
        }
    }

    /// Whether the folder `name` of the plugin folder is a project (a
    /// tool's sources, as `plugins/textpy/` is the example `textpy.wasm`'s)
    /// rather than a person's namespace: it holds a `Cargo.toml`,
    /// `package.json` or `pyproject.toml`, or a plugin of the top level is
    /// named as it is. Its `.py` and `.js` files are sources to build, not
    /// plugins to serve.
    fn is_project_dir(&self, name: &str) -> bool {
        let dir = self.root.join(name);
        ["Cargo.toml", "package.json", "pyproject.toml"]
            .iter()
            .any(|marker| dir.join(marker).exists())
            || PLUGIN_EXTENSIONS
                .iter()
                .any(|extension| self.root.join(format!("{name}.{extension}")).is_file())
    }

    /// The plugin files a changed file affects: itself for `x.wasm`,
    /// `x.wasm` for its policy `x.toml`, every plugin of a namespace for
    /// that namespace's `_namespace.toml`, every plugin of the folder for
    /// the room's `_room.toml`, and every source for the package store's
    /// lock.
    pub(crate) fn plugin_files_for(&self, path: &Path) -> Vec<PathBuf> {
        if path.parent() == Some(self.root.as_path()) {
            match path.file_name().and_then(|n| n.to_str()) {
                Some(policy::ROOM_POLICY) => return self.every_plugin_file(),
                // The package store changed: every source loads again.
                Some(crate::languages::packages::LOCK_FILE) => {
                    let mut sources = self.every_plugin_file();
                    sources.retain(|file| crate::languages::Language::of_path(file).is_some());
                    return sources;
                }
                _ => {}
            }
        }
        let is_namespace_policy = path.file_name().and_then(|n| n.to_str())
            == Some(policy::NAMESPACE_POLICY)
            && path.parent().is_some_and(|dir| self.is_namespace_dir(dir));
        if !is_namespace_policy {
            return self.plugin_file_for(path).into_iter().collect();
        }
        let Ok(entries) = std::fs::read_dir(path.parent().unwrap_or(&self.root)) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|file| self.plugin_id(file).is_some())
            .collect()
    }

    /// Every plugin file of the folder, at the top and in each namespace.
    fn every_plugin_file(&self) -> Vec<PathBuf> {
        std::iter::once(self.root.clone())
            .chain(self.namespace_dirs())
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flat_map(|entries| entries.filter_map(Result::ok).map(|entry| entry.path()))
            .filter(|file| self.plugin_id(file).is_some())
            .collect()
    }

    /// The plugin file a changed file belongs to: the plugin's file now
    /// (the first of `x.wasm`, `x.py`, `x.js` there is) for any of them or
    /// its policy `x.toml`; when none is there, the changed file itself
    /// (`x.wasm` for a policy); `None` for anything else.
    pub(crate) fn plugin_file_for(&self, path: &Path) -> Option<PathBuf> {
        let extension = path.extension()?.to_str()?;
        let candidate = match extension {
            "toml" => path.with_extension("wasm"),
            _ if PLUGIN_EXTENSIONS.contains(&extension) => path.to_path_buf(),
            _ => return None,
        };
        self.plugin_id(&candidate)?;
        Some(current_file(&candidate).unwrap_or(candidate))
    }

    /// Whether `path` names a namespace folder (it need not exist).
    pub(crate) fn is_namespace_dir(&self, path: &Path) -> bool {
        path.parent() == Some(self.root.as_path())
            && path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(is_valid_namespace)
    }

    /// The namespace folders there are now.
    pub(crate) fn namespace_dirs(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_dir() && self.is_namespace_dir(path))
            .collect()
    }

    /// Every plugin file in the folder now: the top level's and each
    /// namespace folder's.
    pub(crate) async fn files(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        let mut entries = tokio::fs::read_dir(&self.root).await?;
        while let Some(entry) = entries.next_entry().await? {
            let path = entry.path();
            let is_namespace = entry.file_type().await.is_ok_and(|kind| kind.is_dir())
                && path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(is_valid_namespace);
            if is_namespace {
                // A namespace folder that cannot be read is skipped, not fatal.
                if let Ok(mut inner) = tokio::fs::read_dir(&path).await {
                    while let Ok(Some(entry)) = inner.next_entry().await {
                        if let Some(file) = self.plugin_file_of(&entry.path()).await {
                            files.push(file);
                        }
                    }
                }
            } else if let Some(file) = self.plugin_file_of(&path).await {
                files.push(file);
            }
        }
        // One file per plugin: the one that counts of each id's.
        let mut files: Vec<PathBuf> = files
            .into_iter()
            .map(|file| current_file(&file).unwrap_or(file))
            .collect();
        files.sort();
        files.dedup();
        Ok(files)
    }

    /// The plugin file an entry of the folder stands for: a plugin file
    /// itself, or `x.wasm` for a policy `x.toml` that names an OCI source
    /// (such a plugin has no file of its own; see `sources.rs`).
    async fn plugin_file_of(&self, path: &Path) -> Option<PathBuf> {
        if self.plugin_id(path).is_some() {
            return Some(path.to_path_buf());
        }
        if path.extension()? != "toml" {
            return None;
        }
        let file = path.with_extension("wasm");
        self.plugin_id(&file)?;
        let text = tokio::fs::read_to_string(path).await.ok()?;
        names_source(&text).then_some(file)
    }
}

/// Whether `name` is a hidden file a publish leaves while it runs (an
/// upload in progress, a version kept aside): one found at start-up was
/// Numbers the hidden files of writes in progress (uploads, versions kept
/// aside, files written by rename), unique within the process: one
/// counter, so that no two writers ever share a name.
static NEXT_TEMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The next number for a hidden file's name (see [`NEXT_TEMP`]).
pub(crate) fn next_temp() -> u64 {
    NEXT_TEMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A hidden name beside `file` for a write in progress
/// (`.{name}.upload-{pid}-{n}`): never taken for a plugin, and removed at
/// start if a stopped process left it ([`is_publish_leftover`]).
pub(crate) fn temporary_beside(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.with_file_name(format!(
        ".{name}.upload-{}-{}",
        std::process::id(),
        next_temp()
    ))
}

/// A removal's result, a file already gone being no error.
pub(crate) fn gone_is_fine(removed: std::io::Result<()>) -> std::io::Result<()> {
    match removed {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Writes `bytes` as `file` through [`temporary_beside`], synced, then a
/// rename: a reader (another server on the folder too) sees the old file
/// or the new one, never half of one.
pub(crate) fn write_by_rename(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(file, bytes, true)
}

/// [`write_by_rename`] without the sync: readers still see the old file or
/// the new one, but a crash may lose the new one. For copies kept
/// elsewhere too (a replica's copy of the shared store, which it compares
/// and writes again as it starts).
pub(crate) fn write_by_rename_unsynced(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(file, bytes, false)
}

fn replace(file: &Path, bytes: &[u8], synced: bool) -> std::io::Result<()> {
    let temporary = temporary_beside(file);
    let written = std::fs::write(&temporary, bytes)
        .and_then(|()| {
            if synced {
                std::fs::File::open(&temporary)?.sync_all()
            } else {
                Ok(())
            }
        })
        .and_then(|()| std::fs::rename(&temporary, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// left by a process that stopped midway, and is removed.
pub(crate) fn is_publish_leftover(name: &str) -> bool {
    name.starts_with('.') && (name.contains(".upload-") || name.contains(".previous-"))
}

/// Removes what a publish cut short by a stop left behind (an upload in
/// progress, a version kept aside): hidden files, never plugins.
pub(crate) fn remove_publish_leftovers(layout: &Layout) {
    let folders = std::iter::once(layout.root().to_path_buf()).chain(layout.namespace_dirs());
    for folder in folders {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if is_publish_leftover(&name.to_string_lossy()) {
                tracing::info!(file = %entry.path().display(), "removing what a stopped publish left");
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Whether a plugin file is a tool folder (a zip of `app.py` and its own
/// files; `languages/folder.rs`).
pub(crate) fn is_tool_folder(file: &Path) -> bool {
    file.extension().is_some_and(|extension| extension == "zip")
}

/// Whether policy text has a `[source]` table (valid or not: the load
/// says what is wrong with it).
pub(crate) fn names_source(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|table| table.contains_key("source"))
}

fn namespace_policy_stem() -> Option<&'static str> {
    policy::NAMESPACE_POLICY.strip_suffix(".toml")
}

/// The namespace of a plugin id, if it has one.
pub(crate) fn namespace_of(id: &str) -> Option<&str> {
    id.split_once('/').map(|(namespace, _)| namespace)
}

/// The name of a plugin id, its namespace left out: its files' stem.
pub(crate) fn name_of(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// A plugin's name: its file's stem. 1 to 64 letters, digits, `_` or `-`,
/// starting with a letter: no `..`, separators, NUL, control or bidi
/// characters, leading dot or temporary-file suffix can pass.
pub(crate) fn is_valid_plugin_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// A path's file name as text (empty when it has none).
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A namespace folder's name (a person's name, as the tokens file gives
/// it): 1 to 24 letters, digits, `_` or `-`, starting with a letter, and
/// never `__` (which separates a namespace from a tool name) nor a trailing
/// `_`, nor ending in [`DATA_FOLDER_SUFFIX`], nor `skills` (the room's skills
/// folder, beside the namespaces).
pub(crate) fn is_valid_namespace(name: &str) -> bool {
    (1..=24).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        && !name.contains("__")
        && !name.ends_with('_')
        && !name.ends_with(DATA_FOLDER_SUFFIX)
        && name != SKILLS_DIR
}

/// The folder of skills, at the top of the plugin folder (the room's) and
/// in each namespace folder (`registry/skills/`).
pub(crate) const SKILLS_DIR: &str = "skills";

/// The suffix kept for plugins' data folders beside them (`users-data`
/// for `users.wasm`, as docs/plugins.md shows): never a namespace, so no
/// person can publish into one.
pub(crate) const DATA_FOLDER_SUFFIX: &str = "-data";

/// The file plugin `file`'s id serves from now: the first of its
/// `.wasm`, `.py` and `.js` files that is there, if one is.
pub(crate) fn current_file(file: &Path) -> Option<PathBuf> {
    PLUGIN_EXTENSIONS
        .iter()
        .map(|extension| file.with_extension(extension))
        .find(|candidate| candidate.is_file())
}

/// The other files of plugin `file`'s id (`x.py` and `x.js` beside
/// `x.wasm`, say) that are there now.
pub(crate) fn siblings(file: &Path) -> Vec<PathBuf> {
    PLUGIN_EXTENSIONS
        .iter()
        .map(|extension| file.with_extension(extension))
        .filter(|candidate| candidate != file && candidate.is_file())
        .collect()
}

/// The stem of a plugin file: `*.wasm`, `*.py` and `*.js` files that are
/// not hidden (editors and copy tools park hidden temporary files beside
/// the real one).
fn plugin_stem(path: &Path) -> Option<String> {
    if !PLUGIN_EXTENSIONS.contains(&path.extension()?.to_str()?) {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    (!stem.is_empty() && !stem.starts_with('.')).then(|| stem.to_string())
}

/// The plugin id of a file outside any folder (`toolhost check FILE`): its
/// stem.
pub(crate) fn plugin_id(path: &Path) -> Option<String> {
    plugin_stem(path)
}

/// Whether `path` is a source file (`.py`, `.js`) rather than a component.
fn is_source(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| extension != "wasm")
}
