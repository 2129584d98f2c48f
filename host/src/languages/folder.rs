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
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::language::Language;

/// Files a tool folder may hold.
pub const MAX_ENTRIES: usize = 256;
/// What they may take, unpacked.
pub const MAX_UNPACKED: u64 = 16 << 20;
/// The largest zip taken (its files, stored, and their headers).
pub const MAX_ZIP: u64 = MAX_UNPACKED + (1 << 20);
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
    #[error("it is not a zip: {0}")]
    NotZip(String),
    #[error("it holds more than {MAX_ENTRIES} files")]
    TooMany,
    #[error("it is a zip64 archive: a tool folder is small, zip it plainly")]
    Zip64,
    #[error("two of its entries have one name ({0:?})")]
    Duplicate(String),
    #[error("it is more than {} MiB unpacked", MAX_UNPACKED >> 20)]
    TooLarge,
    #[error("{0:?} is not a plain relative path (no `..`, no absolute path, no backslash)")]
    BadPath(String),
    #[error("{0:?} is a link or a special file: a tool folder holds regular files only")]
    NotAFile(String),
    #[error("{0:?} is not UTF-8 text")]
    NotText(String),
    #[error(
        "it has no app.py at its top (a JavaScript or TypeScript tool is one file for now: \
         publish app.js or app.ts itself)"
    )]
    NoApp,
}

impl ToolFolder {
    /// Reads and checks a zip.
    pub fn read(bytes: &[u8]) -> Result<ToolFolder, FolderError> {
        if bytes.len() as u64 > MAX_ZIP {
            return Err(FolderError::TooLarge);
        }
        // The count the archive declares, read before its directory is:
        // a zip of a million entries is refused for what it says it holds.
        let declared = declared_entries(bytes)?;
        if declared > MAX_ENTRIES {
            return Err(FolderError::TooMany);
        }
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
            .map_err(|error| FolderError::NotZip(error.to_string()))?;
        if archive.len() > MAX_ENTRIES {
            return Err(FolderError::TooMany);
        }
        let mut names = BTreeSet::new();
        for name in archive.file_names() {
            if !names.insert(name.to_string()) {
                return Err(FolderError::Duplicate(name.to_string()));
            }
        }
        if archive.len() != declared {
            // The reader keeps one entry of a name given twice.
            return Err(FolderError::Duplicate(String::new()));
        }
        let mut files = Vec::new();
        let mut total = 0u64;
        for index in 0..archive.len() {
            let mut entry = archive
                .by_index(index)
                .map_err(|error| FolderError::NotZip(error.to_string()))?;
            let name = entry.name().to_string();
            if entry.is_dir() {
                continue;
            }
            let safe = !name.is_empty()
                && !name.starts_with('/')
                && !name.contains('\\')
                && !name.contains('\0')
                && name
                    .split('/')
                    .all(|part| !part.is_empty() && part != "." && part != "..");
            if !safe {
                return Err(FolderError::BadPath(name));
            }
            // A Unix mode, when the zip has one, must be a regular file's.
            if entry
                .unix_mode()
                .is_some_and(|mode| mode & 0o170000 != 0o100000 && mode & 0o170000 != 0)
            {
                return Err(FolderError::NotAFile(name));
            }
            let mut data = Vec::new();
            (&mut entry)
                .take(MAX_UNPACKED - total + 1)
                .read_to_end(&mut data)
                .map_err(|error| FolderError::NotZip(error.to_string()))?;
            total += data.len() as u64;
            if total > MAX_UNPACKED {
                return Err(FolderError::TooLarge);
            }
            files.push((name, data));
        }
        // Zipping a folder puts everything under its name: that folder is
        // the tool's.
        let tops: BTreeSet<String> = files
            .iter()
            .map(|(name, _)| name.split('/').next().unwrap_or_default().to_string())
            .collect();
        if tops.len() == 1
            && !files.iter().any(|(name, _)| name == "app.py")
            && let Some(top) = tops.into_iter().next()
        {
            let prefix = format!("{top}/");
            if files.iter().all(|(name, _)| name.starts_with(&prefix)) {
                for (name, _) in &mut files {
                    *name = name[prefix.len()..].to_string();
                }
            }
        }
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

/// The number of entries a zip's end record declares (zip64 refused).
fn declared_entries(bytes: &[u8]) -> Result<usize, FolderError> {
    const END: &[u8] = b"PK\x05\x06";
    let tail = bytes.len().saturating_sub(22 + u16::MAX as usize);
    let at = bytes[tail..]
        .windows(4)
        .rposition(|window| window == END)
        .map(|at| tail + at)
        .ok_or_else(|| FolderError::NotZip("no end of central directory".into()))?;
    let record = bytes
        .get(at..at + 22)
        .ok_or_else(|| FolderError::NotZip("a cut end record".into()))?;
    let entries = u16::from_le_bytes([record[10], record[11]]);
    let zip64_locator = at >= 20 && &bytes[at - 20..at - 16] == b"PK\x06\x07";
    if entries == u16::MAX || zip64_locator {
        return Err(FolderError::Zip64);
    }
    Ok(entries as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    pub(crate) fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in files {
            out.start_file(
                *name,
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored),
            )
            .unwrap();
            out.write_all(data).unwrap();
        }
        out.finish().unwrap().into_inner()
    }

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
                matches!(ToolFolder::read(&zip), Err(FolderError::BadPath(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            ToolFolder::read(&zip_of(&[("helpers.py", b"")])),
            Err(FolderError::NoApp)
        ));
        assert!(matches!(
            ToolFolder::read(b"not a zip"),
            Err(FolderError::NotZip(_))
        ));
        // The same name twice: the second file's name written over.
        let mut twice = zip_of(&[("app.py", b"x = 1\n"), ("a.py", b""), ("b.py", b"")]);
        let mut index = 0;
        while let Some(at) = twice[index..].windows(4).position(|w| w == b"b.py") {
            twice[index + at..index + at + 4].copy_from_slice(b"a.py");
            index += at + 4;
        }
        assert!(
            matches!(ToolFolder::read(&twice), Err(FolderError::Duplicate(_))),
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
            Err(FolderError::TooMany)
        ));
    }
}
