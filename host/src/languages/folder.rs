//! A tool that is a folder: `app.py` beside its own modules and read-only
//! data files, which reaches the server as a zip (`PUT` of
//! `application/zip`, `toolhost push DIR`, `toolhost dev DIR`, or a
//! `NAME.zip` dropped into the plugin folder).
//!
//! A zip is read whole and checked before anything is written: at most
//! [`MAX_ENTRIES`] regular files (no link, no device), each a relative path
//! without `..`, [`MAX_UNPACKED`] bytes unpacked in all, and `app.py` at
//! its top (or at the top of its one folder, as zipping a folder makes it).
//! It is unpacked once per content into the cache, under another name then
//! renamed, and handed to the runtime read-only: the source's own modules
//! import, and its data files open, from there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::language::Language;

/// Files a tool folder may hold.
pub const MAX_ENTRIES: usize = 256;
/// What they may take, unpacked.
pub const MAX_UNPACKED: u64 = 16 << 20;
/// The largest zip taken (its files, stored, and their headers).
pub const MAX_ZIP: u64 = LIMITS.max_zip();
/// Where the runtime sees the folder.
pub const GUEST_DIR: &str = "/toolhost/app";

/// A checked tool folder: its language, its entry file's text, and every
/// file by its path in the folder.
#[derive(Debug)]
pub struct ToolFolder {
    pub language: Language,
    pub text: String,
    files: Vec<(String, Vec<u8>)>,
}

/// Why a zip is not a tool folder: the sentence its publisher reads.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error(transparent)]
    Zip(#[from] crate::zipped::ZipError),
    #[error("{0:?} is not UTF-8 text")]
    NotText(String),
    #[error(
        "it has no app.py at its top (a JavaScript or TypeScript tool is one file for now: \
         publish app.js or app.ts itself)"
    )]
    NoApp,
}

/// What a tool folder may hold.
const LIMITS: crate::zipped::Limits = crate::zipped::Limits {
    entries: MAX_ENTRIES,
    unpacked: MAX_UNPACKED,
};

impl ToolFolder {
    /// Reads and checks a zip.
    pub fn read(bytes: &[u8]) -> Result<ToolFolder, FolderError> {
        let files = crate::zipped::read(bytes, LIMITS, "app.py")?;
        let app = files
            .iter()
            .find(|(name, _)| name == "app.py")
            .ok_or(FolderError::NoApp)?;
        let text =
            String::from_utf8(app.1.clone()).map_err(|_| FolderError::NotText("app.py".into()))?;
        Ok(ToolFolder {
            language: Language::Python,
            text,
            files,
        })
    }

    /// The modules the folder gives its source (`helpers` for
    /// `helpers.py` or `helpers/…`), which it may import as its own.
    pub fn modules(&self) -> BTreeSet<String> {
        self.files
            .iter()
            .filter_map(|(name, _)| {
                let top = name.split('/').next()?;
                let module = if name.contains('/') {
                    top
                } else {
                    top.strip_suffix(".py")?
                };
                (module != "app").then(|| module.to_string())
            })
            .collect()
    }

    /// The folder on this machine, unpacked once for this content under
    /// `root`, in a folder of this process's own (`tools-<pid>/tool-<sha256
    /// of the zip>`): written under another name, then renamed, so a folder
    /// of that name is whole. It lives while a loaded plugin holds the
    /// answer: the last one dropped (a plugin replaced, removed or refused)
    /// removes it, and a start removes those of processes that are gone.
    pub fn unpack(&self, root: &Path, digest: &str) -> std::io::Result<Arc<Unpacked>> {
        static LIVE: Mutex<BTreeMap<String, Weak<Unpacked>>> = Mutex::new(BTreeMap::new());
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep(root));
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|_, unpacked| unpacked.strong_count() > 0);
        if let Some(unpacked) = live.get(digest).and_then(Weak::upgrade) {
            return Ok(unpacked);
        }
        let mine = root.join(format!("tools-{}", std::process::id()));
        let dir = mine.join(format!("tool-{digest}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&mine)?;
        let making = mine.join(format!(".tool-making-{digest}"));
        let written = (|| {
            let _ = std::fs::remove_dir_all(&making);
            std::fs::create_dir_all(&making)?;
            for (name, data) in &self.files {
                let path = making.join(name);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, data)?;
            }
            std::fs::rename(&making, &dir)
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_dir_all(&making);
            return Err(error);
        }
        let unpacked = Arc::new(Unpacked { dir });
        live.insert(digest.to_string(), Arc::downgrade(&unpacked));
        Ok(unpacked)
    }
}

/// A tool folder on this machine, removed when the last plugin holding it
/// is dropped.
#[derive(Debug)]
pub struct Unpacked {
    pub dir: PathBuf,
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the tool folders of processes that are gone (a server killed
/// keeps its own until the next start sweeps them).
fn sweep(root: &Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tools-")
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zipped::{ZipError, zip_of};

    #[test]
    fn a_folder_is_read_with_its_modules_and_its_one_top_folder_dropped() {
        let folder = ToolFolder::read(&zip_of(&[
            ("weather/app.py", b"import helpers\n"),
            ("weather/helpers.py", b"X = 1\n"),
            ("weather/data/cities.csv", b"paris\n"),
            ("weather/pkg/__init__.py", b""),
        ]))
        .unwrap();
        assert_eq!(folder.text, "import helpers\n");
        assert_eq!(
            folder.modules(),
            BTreeSet::from(["helpers".to_string(), "pkg".into(), "data".into()])
        );
        let root = tempfile::tempdir().unwrap();
        let unpacked = folder.unpack(root.path(), "abc").unwrap();
        assert_eq!(
            std::fs::read(unpacked.dir.join("data/cities.csv")).unwrap(),
            b"paris\n"
        );
        assert!(Arc::ptr_eq(
            &folder.unpack(root.path(), "abc").unwrap(),
            &unpacked
        ));
        let dir = unpacked.dir.clone();
        drop(unpacked);
        assert!(!dir.exists(), "the last holder gone, the folder goes");
    }

    #[test]
    fn what_could_reach_outside_or_is_not_a_tool_is_refused() {
        for bad in ["../x.py", "/etc/x", "a/../../x", "a\\b"] {
            let zip = zip_of(&[("app.py", b""), (bad, b"")]);
            assert!(
                matches!(
                    ToolFolder::read(&zip),
                    Err(FolderError::Zip(ZipError::BadPath(_)))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            ToolFolder::read(&zip_of(&[("helpers.py", b"")])),
            Err(FolderError::NoApp)
        ));
        assert!(matches!(
            ToolFolder::read(b"not a zip"),
            Err(FolderError::Zip(ZipError::NotZip(_)))
        ));
        // The same name twice: the second file's name written over.
        let mut twice = zip_of(&[("app.py", b"x = 1\n"), ("a.py", b""), ("b.py", b"")]);
        let mut index = 0;
        while let Some(at) = twice[index..].windows(4).position(|w| w == b"b.py") {
            twice[index + at..index + at + 4].copy_from_slice(b"a.py");
            index += at + 4;
        }
        assert!(
            matches!(
                ToolFolder::read(&twice),
                Err(FolderError::Zip(ZipError::Duplicate(_)))
            ),
            "{:?}",
            ToolFolder::read(&twice).map(|folder| folder.modules())
        );
        let many: Vec<(String, Vec<u8>)> = (0..300)
            .map(|i| (format!("f{i}.txt"), Vec::new()))
            .collect();
        let many: Vec<(&str, &[u8])> = many
            .iter()
            .map(|(name, data)| (name.as_str(), data.as_slice()))
            .collect();
        assert!(matches!(
            ToolFolder::read(&zip_of(&many)),
            Err(FolderError::Zip(ZipError::TooMany(_)))
        ));
    }
}
