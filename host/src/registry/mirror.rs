//! The operator's policies kept in a folder of their own (`serve
//! --policies`, a Kubernetes ConfigMap), mirrored into the plugin folder,
//! which stays writable for publishing: the room's `_room.toml`, each
//! plugin's `<name>.toml` (a policy, or where an OCI plugin comes from) and
//! each namespace's `<namespace>/_namespace.toml`. The plugin folder's
//! watcher then loads them as any edit of a policy there.
//!
//! Rules:
//! - Only `.toml` files with a policy's name are mirrored, at the top and
//!   in namespace folders; anything else there is left alone, and said.
//! - The policies folder is the operator's, so its links are followed (a
//!   ConfigMap's files are links through `..data`); what is written into
//!   the plugin folder is always a regular file, by rename.
//! - A file the policies folder no longer has is removed from the plugin
//!   folder, if it is still what the mirror wrote
//!   (`.toolhost/policies.json`); nothing else of the plugin folder is. One
//!   it has but cannot read now stays as it was mirrored.
//! - A namespace folder of the plugin folder that is a link is never
//!   written through. A file that cannot be written is tried again, with a
//!   growing wait, until it is; the others are mirrored meanwhile.
//! - The mirror is made before the plugin folder is first read, and again
//!   whenever the policies folder changes (event driven, as the watcher:
//!   the kubelet's swap of `..data` is one event in the folder).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use serde::{Deserialize, Serialize};

use crate::registry::layout::{self, is_valid_namespace, is_valid_plugin_name};
use crate::registry::plugin::content_hash;
use crate::registry::policy::{NAMESPACE_POLICY, ROOM_POLICY};

/// The most one policy file may hold.
const MAX_POLICY_BYTES: u64 = 1 << 20;

/// How long the policies folder must be quiet before it is mirrored again.
const QUIET: Duration = Duration::from_millis(200);

/// The longest wait before a failed mirroring is tried again.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// What the mirror wrote into the plugin folder last: each file (as a path
/// relative to the folder) and its SHA-256.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mirrored {
    files: BTreeMap<String, String>,
}

impl Mirrored {
    fn file(folder: &Path) -> PathBuf {
        folder.join(".toolhost").join("policies.json")
    }

    fn read(folder: &Path) -> Mirrored {
        std::fs::read(Self::file(folder))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    fn save(&self, folder: &Path) -> std::io::Result<()> {
        let file = Self::file(folder);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        layout::write_by_rename(&file, &serde_json::to_vec(self).expect("serialises"))
    }
}

/// What one mirroring changed in the plugin folder.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Synced {
    pub(crate) written: Vec<String>,
    pub(crate) removed: Vec<String>,
}

/// Whether `name` is a policy's file name where it is: `_room.toml` or a
/// plugin's at the top, `_namespace.toml` or a plugin's in a namespace.
fn is_policy_name(name: &str, in_namespace: bool) -> bool {
    let Some(stem) = name.strip_suffix(".toml") else {
        return false;
    };
    let reserved = if in_namespace {
        NAMESPACE_POLICY
    } else {
        ROOM_POLICY
    };
    name == reserved || is_valid_plugin_name(stem)
}

/// The policies in `policies`: each file's path relative to the folder,
/// and its bytes; and those there that cannot be read now (kept as they
/// were mirrored: a policy is only taken out when the folder no longer
/// has it).
struct Found {
    files: BTreeMap<String, Vec<u8>>,
    unreadable: BTreeSet<String>,
}

fn policies_in(policies: &Path) -> std::io::Result<Found> {
    let mut found = Found {
        files: BTreeMap::new(),
        unreadable: BTreeSet::new(),
    };
    let mut read = |file: &Path, relative: String| {
        let bytes = std::fs::metadata(file).and_then(|meta| {
            if meta.is_file() && meta.len() <= MAX_POLICY_BYTES {
                std::fs::read(file)
            } else {
                Err(std::io::Error::other("not a regular file of at most 1 MiB"))
            }
        });
        match bytes {
            Ok(bytes) => {
                found.files.insert(relative, bytes);
            }
            Err(error) => {
                tracing::warn!(file = %file.display(), %error, "a policy cannot be read; the plugin folder keeps what was mirrored of it");
                found.unreadable.insert(relative);
            }
        }
    };
    for entry in std::fs::read_dir(policies)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            if !is_valid_namespace(&name) {
                tracing::warn!(folder = %path.display(), "not a namespace's name; its policies are not mirrored");
                continue;
            }
            for inner in std::fs::read_dir(&path)? {
                let inner = inner?;
                let file = inner.file_name().to_string_lossy().into_owned();
                if file.starts_with('.') {
                    continue;
                }
                if is_policy_name(&file, true) {
                    read(&inner.path(), format!("{name}/{file}"));
                } else {
                    tracing::warn!(file = %inner.path().display(), "not a policy's name; not mirrored");
                }
            }
        } else if is_policy_name(&name, false) {
            read(&path, name);
        } else {
            tracing::warn!(file = %path.display(), "not a policy's name; not mirrored");
        }
    }
    Ok(found)
}

/// Whether `relative` (as recorded) names a policy of the plugin folder:
/// at the top, or in a namespace folder.
fn is_policy_path(relative: &str) -> bool {
    match relative.split_once('/') {
        Some((namespace, name)) => {
            is_valid_namespace(namespace) && !name.contains('/') && is_policy_name(name, true)
        }
        None => is_policy_name(relative, false),
    }
}

/// Where `relative` goes in `folder` (its namespace folder made if
/// `create`), unless that folder is not a plain folder (a link is never
/// followed).
fn target_in(folder: &Path, relative: &str, create: bool) -> Option<PathBuf> {
    if let Some((namespace, _)) = relative.split_once('/') {
        let dir = folder.join(namespace);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if !meta.is_dir() => {
                tracing::warn!(folder = %dir.display(), "a namespace folder that is not a plain folder; its policies are not mirrored");
                return None;
            }
            Ok(_) => {}
            Err(_) if create => std::fs::create_dir(&dir).ok()?,
            Err(_) => return None,
        }
    }
    Some(folder.join(relative))
}

/// The SHA-256 of the regular file `path` (never through a link), if it is
/// one.
fn hash_of(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_file()
        .then(|| std::fs::read(path).ok().map(|bytes| content_hash(&bytes)))?
}

/// Makes the plugin folder's policies those of `policies`: writes what
/// differs, removes what the mirror wrote and `policies` no longer has.
/// A file that cannot be written is said and tried again at the next
/// mirroring; the others go on, and the first such error is answered once
/// all were tried.
#[tracing::instrument(skip_all, fields(policies = %policies.display()))]
pub(crate) fn sync(policies: &Path, folder: &Path) -> std::io::Result<Synced> {
    let found = policies_in(policies)?;
    let mut before = Mirrored::read(folder);
    before.files.retain(|relative, _| is_policy_path(relative));
    let mut now = Mirrored::default();
    let mut synced = Synced::default();
    let mut failed = None;
    for (relative, bytes) in &found.files {
        let hash = content_hash(bytes);
        let Some(target) = target_in(folder, relative, true) else {
            continue;
        };
        let there = hash_of(&target);
        if there.as_deref() == Some(hash.as_str()) {
            // Already there: the mirror's only if it wrote it before.
            if before.files.get(relative) == Some(&hash) {
                now.files.insert(relative.clone(), hash);
            }
            continue;
        }
        if there.is_some() && !before.files.contains_key(relative) {
            tracing::warn!(file = %target.display(), "a policy of the plugin folder replaced by the policies folder's");
        }
        match layout::write_by_rename(&target, bytes) {
            Ok(()) => {
                synced.written.push(relative.clone());
                now.files.insert(relative.clone(), hash);
            }
            Err(error) => {
                tracing::warn!(file = %target.display(), %error, "a policy cannot be mirrored now");
                if let Some(hash) = before.files.get(relative) {
                    now.files.insert(relative.clone(), hash.clone());
                }
                failed.get_or_insert(error);
            }
        }
    }
    for (relative, hash) in &before.files {
        if found.files.contains_key(relative) {
            continue;
        }
        if found.unreadable.contains(relative) {
            now.files.insert(relative.clone(), hash.clone());
            continue;
        }
        let Some(target) = target_in(folder, relative, false) else {
            continue;
        };
        if hash_of(&target).as_deref() == Some(hash.as_str()) {
            match layout::gone_is_fine(std::fs::remove_file(&target)) {
                Ok(()) => synced.removed.push(relative.clone()),
                Err(error) => {
                    now.files.insert(relative.clone(), hash.clone());
                    failed.get_or_insert(error);
                }
            }
        }
    }
    if now.files != before.files || !Mirrored::file(folder).exists() {
        now.save(folder)?;
    }
    if synced != Synced::default() {
        tracing::info!(written = ?synced.written, removed = ?synced.removed, "policies mirrored into the plugin folder");
    }
    match failed {
        Some(error) => Err(error),
        None => Ok(synced),
    }
}

/// Whether one of the two folders holds the other (the mirror would
/// watch its own writes).
pub(crate) fn overlap(policies: &Path, folder: &Path) -> bool {
    let real = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let (policies, folder) = (real(policies), real(folder));
    policies.starts_with(&folder) || folder.starts_with(&policies)
}

/// Keeps the watch on the policies folder alive; dropping it stops it.
pub(crate) struct MirrorWatch {
    _watcher: notify::RecommendedWatcher,
}

/// Mirrors `policies` into `folder` again whenever it changes.
pub(crate) fn watch(policies: &Path, folder: &Path) -> anyhow::Result<MirrorWatch> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let changes = event.is_ok_and(|event| {
            !matches!(
                event.kind,
                notify::EventKind::Access(notify::event::AccessKind::Open(_))
                    | notify::EventKind::Access(notify::event::AccessKind::Close(
                        notify::event::AccessMode::Read
                    ))
            )
        });
        if changes {
            let _ = sender.send(());
        }
    })?;
    watcher.watch(policies, RecursiveMode::Recursive)?;
    let (policies, folder) = (policies.to_path_buf(), folder.to_path_buf());
    tokio::spawn(async move {
        // Waits for a change; after a failed mirroring, for a change or
        // the next retry, whichever comes first.
        let mut retry: Option<Duration> = None;
        loop {
            let woke = match retry {
                Some(after) => tokio::time::timeout(after, receiver.recv())
                    .await
                    .unwrap_or(Some(())),
                None => receiver.recv().await,
            };
            if woke.is_none() {
                return;
            }
            // Quiet first: a ConfigMap's update is several events.
            loop {
                match tokio::time::timeout(QUIET, receiver.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let (policies, folder) = (policies.clone(), folder.clone());
            let synced = tokio::task::spawn_blocking(move || sync(&policies, &folder)).await;
            retry = match synced {
                Ok(Ok(_)) => None,
                _ => {
                    let next =
                        retry.map_or(Duration::from_secs(1), |after| (after * 2).min(RETRY_MAX));
                    tracing::error!(retry_in = ?next, "the policies folder is not wholly mirrored; the plugin folder keeps the policies it has");
                    Some(next)
                }
            };
        }
    });
    Ok(MirrorWatch { _watcher: watcher })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn policies_are_mirrored_and_only_those_the_mirror_wrote_go() {
        let policies = tempfile::tempdir().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let (p, f) = (policies.path(), folder.path());
        write(&p.join("_room.toml"), "[http]\nallow = []\n");
        write(&p.join("weather.toml"), "[limits]\ntimeout_ms = 5000\n");
        write(&p.join("ada/_namespace.toml"), "");
        write(&p.join("ada/notes.txt"), "not a policy");
        write(&p.join("bad__name/_namespace.toml"), "");
        write(&p.join("echo.wasm"), "not a policy");
        write(&f.join("mine.toml"), "the operator's own, beside");

        let synced = sync(p, f).unwrap();
        assert_eq!(
            synced.written,
            ["_room.toml", "ada/_namespace.toml", "weather.toml"]
        );
        assert!(!f.join("ada/notes.txt").exists());
        assert!(!f.join("echo.wasm").exists());
        assert!(!f.join("bad__name").exists());
        assert_eq!(sync(p, f).unwrap(), Synced::default(), "nothing differs");

        std::fs::remove_file(p.join("weather.toml")).unwrap();
        write(&p.join("_room.toml"), "");
        let synced = sync(p, f).unwrap();
        assert_eq!(synced.written, ["_room.toml"]);
        assert_eq!(synced.removed, ["weather.toml"]);
        assert!(f.join("mine.toml").exists(), "not the mirror's, kept");

        // One changed in the plugin folder since is no longer the
        // mirror's to remove.
        write(&f.join("ada/_namespace.toml"), "edited here");
        std::fs::remove_dir_all(p.join("ada")).unwrap();
        assert_eq!(sync(p, f).unwrap().removed, Vec::<String>::new());
        assert!(f.join("ada/_namespace.toml").exists());
    }

    #[test]
    fn an_unreadable_policy_stays_and_a_file_already_there_is_not_the_mirrors() {
        let policies = tempfile::tempdir().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let (p, f) = (policies.path(), folder.path());
        write(&p.join("echo.toml"), "[limits]\n");
        write(&p.join("same.toml"), "same");
        write(&f.join("same.toml"), "same");
        assert_eq!(sync(p, f).unwrap().written, ["echo.toml"]);
        // Past the bound (as unreadable as a permission error): kept.
        std::fs::write(
            p.join("echo.toml"),
            vec![b'#'; (MAX_POLICY_BYTES + 1) as usize],
        )
        .unwrap();
        assert_eq!(sync(p, f).unwrap(), Synced::default());
        assert_eq!(
            std::fs::read_to_string(f.join("echo.toml")).unwrap(),
            "[limits]\n"
        );
        // Taken out: the mirror's goes, the one that was there stays.
        std::fs::remove_file(p.join("echo.toml")).unwrap();
        std::fs::remove_file(p.join("same.toml")).unwrap();
        assert_eq!(sync(p, f).unwrap().removed, ["echo.toml"]);
        assert!(f.join("same.toml").exists());
    }

    #[test]
    fn a_namespace_folder_that_is_a_link_is_not_written_through() {
        use std::os::unix::fs::symlink;
        let policies = tempfile::tempdir().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        write(&policies.path().join("ada/_namespace.toml"), "");
        symlink(elsewhere.path(), folder.path().join("ada")).unwrap();
        assert_eq!(
            sync(policies.path(), folder.path()).unwrap(),
            Synced::default()
        );
        assert!(!elsewhere.path().join("_namespace.toml").exists());
        assert!(overlap(policies.path(), policies.path()));
        assert!(!overlap(policies.path(), folder.path()));
    }

    #[test]
    fn a_link_in_the_plugin_folder_is_replaced_never_written_through() {
        use std::os::unix::fs::symlink;
        let policies = tempfile::tempdir().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let outside = elsewhere.path().join("outside.toml");
        write(&outside, "kept");
        write(&policies.path().join("echo.toml"), "[limits]\n");
        symlink(&outside, folder.path().join("echo.toml")).unwrap();
        sync(policies.path(), folder.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "kept");
        let meta = std::fs::symlink_metadata(folder.path().join("echo.toml")).unwrap();
        assert!(meta.is_file());
    }
}
