//! A folder that reaches the server as a zip (a tool folder, a skill),
//! read whole in memory and checked before anything of it is used or
//! written: a bounded count of regular files (no link, no device, no
//! zip64), each a plain relative path, a bounded size unpacked in all,
//! and one name per entry. Zipping a folder puts everything under its
//! name; that one top folder is dropped when the entry file the caller
//! looks for is not at the top already. A leaf: it asks no other room.

use std::collections::BTreeSet;
use std::io::Read;

/// What one kind of zipped folder may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Regular files, at most.
    pub(crate) entries: usize,
    /// Their bytes unpacked, at most, in all.
    pub(crate) unpacked: u64,
}

impl Limits {
    /// The largest zip taken for these limits: its files stored, and
    /// room for their headers.
    pub(crate) const fn max_zip(self) -> u64 {
        self.unpacked + (1 << 20)
    }
}

/// Why a zip is not a folder that may be used: the sentence its
/// publisher reads.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("it is not a zip: {0}")]
    NotZip(String),
    #[error("it holds more than {0} files")]
    TooMany(usize),
    #[error("it is a zip64 archive: zip the folder plainly")]
    Zip64,
    #[error("two of its entries have one name ({0:?})")]
    Duplicate(String),
    #[error("it is more than {0} bytes unpacked")]
    TooLarge(u64),
    #[error("{0:?} is not a plain relative path (no `..`, no absolute path, no backslash)")]
    BadPath(String),
    #[error("{0:?} is a link or a special file: a zipped folder holds regular files only")]
    NotAFile(String),
}

/// The files of the zip `bytes`, by their paths in the folder, checked
/// against `limits`; the one top folder dropped when `entry` is not at the
/// top.
pub(crate) fn read(
    bytes: &[u8],
    limits: Limits,
    entry: &str,
) -> Result<Vec<(String, Vec<u8>)>, ZipError> {
    if bytes.len() as u64 > limits.max_zip() {
        return Err(ZipError::TooLarge(limits.unpacked));
    }
    // The count the archive declares, read before its directory is:
    // a zip of a million entries is refused for what it says it holds.
    let declared = declared_entries(bytes)?;
    if declared > limits.entries {
        return Err(ZipError::TooMany(limits.entries));
    }
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|error| ZipError::NotZip(error.to_string()))?;
    if archive.len() > limits.entries {
        return Err(ZipError::TooMany(limits.entries));
    }
    let mut names = BTreeSet::new();
    for name in archive.file_names() {
        if !names.insert(name.to_string()) {
            return Err(ZipError::Duplicate(name.to_string()));
        }
    }
    if archive.len() != declared {
        // The reader keeps one entry of a name given twice.
        return Err(ZipError::Duplicate(String::new()));
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    for index in 0..archive.len() {
        let mut file = archive
            .by_index(index)
            .map_err(|error| ZipError::NotZip(error.to_string()))?;
        let name = file.name().to_string();
        if file.is_dir() {
            continue;
        }
        if !is_plain_relative(&name) {
            return Err(ZipError::BadPath(name));
        }
        // A Unix mode, when the zip has one, must be a regular file's.
        if file
            .unix_mode()
            .is_some_and(|mode| mode & 0o170000 != 0o100000 && mode & 0o170000 != 0)
        {
            return Err(ZipError::NotAFile(name));
        }
        let mut data = Vec::new();
        (&mut file)
            .take(limits.unpacked - total + 1)
            .read_to_end(&mut data)
            .map_err(|error| ZipError::NotZip(error.to_string()))?;
        total += data.len() as u64;
        if total > limits.unpacked {
            return Err(ZipError::TooLarge(limits.unpacked));
        }
        files.push((name, data));
    }
    // Zipping a folder puts everything under its name: that folder is the
    // one given.
    let tops: BTreeSet<String> = files
        .iter()
        .map(|(name, _)| name.split('/').next().unwrap_or_default().to_string())
        .collect();
    if tops.len() == 1
        && !files.iter().any(|(name, _)| name == entry)
        && let Some(top) = tops.into_iter().next()
    {
        let prefix = format!("{top}/");
        if files.iter().all(|(name, _)| name.starts_with(&prefix)) {
            for (name, _) in &mut files {
                *name = name[prefix.len()..].to_string();
            }
        }
    }
    Ok(files)
}

/// Whether `name` is a path inside a folder: relative, no empty, `.` or
/// `..` part, no backslash or NUL.
pub(crate) fn is_plain_relative(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains('\\')
        && !name.contains('\0')
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The number of entries a zip's end record declares (zip64 refused).
fn declared_entries(bytes: &[u8]) -> Result<usize, ZipError> {
    const END: &[u8] = b"PK\x05\x06";
    let tail = bytes.len().saturating_sub(22 + u16::MAX as usize);
    let at = bytes[tail..]
        .windows(4)
        .rposition(|window| window == END)
        .map(|at| tail + at)
        .ok_or_else(|| ZipError::NotZip("no end of central directory".into()))?;
    let record = bytes
        .get(at..at + 22)
        .ok_or_else(|| ZipError::NotZip("a cut end record".into()))?;
    let entries = u16::from_le_bytes([record[10], record[11]]);
    let zip64_locator = at >= 20 && &bytes[at - 20..at - 16] == b"PK\x06\x07";
    if entries == u16::MAX || zip64_locator {
        return Err(ZipError::Zip64);
    }
    Ok(entries as usize)
}

/// A zip of `files`, stored: what tests publish.
#[cfg(test)]
pub(crate) fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
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
