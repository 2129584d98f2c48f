//! One skill as it is served: its `SKILL.md` (frontmatter checked) and the
//! files beside it, read from a folder or a zip and checked whole before
//! anything of it is served; its entry for `skills/list` and `skills/get`
//! (each file's URI, SHA-256 digest and size, as SEP-2640 gives them); its
//! digest, which an approval pins.

use std::path::Path;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::frontmatter::{self, FrontmatterError};
use super::owner::Owner;
use crate::zipped::{self, ZipError};

/// The file every skill has at its root.
pub(crate) const SKILL_MD: &str = "SKILL.md";
/// The MIME type `SKILL.md` is served with.
pub(crate) const MARKDOWN: &str = "text/markdown";
/// What `resources/directory/read` gives a folder as its MIME type.
const DIRECTORY: &str = "inode/directory";

/// What a skill may hold (the extension's limits: 512 files, 16 MiB).
pub(crate) const LIMITS: zipped::Limits = zipped::Limits {
    entries: 512,
    unpacked: 16 << 20,
};

/// The most a `SKILL.md` may take (an agent reads it whole).
const MAX_SKILL_MD: usize = 512 * 1024;

/// Why a skill is not served: the sentence its author reads.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{0:?} is not a skill name: 1 to 64 lowercase letters, digits and hyphens")]
    BadName(String),
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterError),
    #[error("the skill has no SKILL.md at its root")]
    NoSkillMd,
    #[error("SKILL.md is not UTF-8 text")]
    NotText,
    #[error("SKILL.md is over {MAX_SKILL_MD} bytes")]
    SkillMdTooLarge,
    #[error("the zip: {0}")]
    Zip(#[from] ZipError),
    #[error("{0:?} is a link or a special file: a skill holds regular files only")]
    NotAFile(String),
    #[error("{0:?} is not a plain relative path of letters, digits, `.`, `_` and `-`")]
    BadPath(String),
    #[error("it holds more than {} files", LIMITS.entries)]
    TooMany,
    #[error("it is more than {} MiB", LIMITS.unpacked >> 20)]
    TooLarge,
    #[error("reading it: {0}")]
    Io(String),
}

/// One file of a skill.
#[derive(Debug)]
pub(crate) struct SkillFile {
    /// Its path in the skill's folder (`SKILL.md`, `references/FORMS.md`).
    pub(crate) path: String,
    pub(crate) uri: String,
    pub(crate) bytes: Vec<u8>,
    /// `sha256:` and 64 lowercase hex digits.
    pub(crate) digest: String,
}

impl SkillFile {
    /// Its MIME type, by its name's extension.
    pub(crate) fn mime_type(&self) -> &'static str {
        let extension = self
            .path
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase());
        match extension.as_deref() {
            Some("md" | "markdown") => MARKDOWN,
            Some("txt") => "text/plain",
            Some("json") => "application/json",
            Some("yaml" | "yml") => "application/yaml",
            Some("py") => "text/x-python",
            Some("js" | "mjs") => "text/javascript",
            Some("sh") => "text/x-shellscript",
            Some("csv") => "text/csv",
            Some("html" | "htm") => "text/plain",
            Some("png") => "image/png",
            Some("jpg" | "jpeg") => "image/jpeg",
            Some("svg") => "image/svg+xml",
            Some("pdf") => "application/pdf",
            _ if std::str::from_utf8(&self.bytes).is_ok() => "text/plain",
            _ => "application/octet-stream",
        }
    }

    /// What `resources/read` answers for it: text when it is UTF-8 (and
    /// not an image or a PDF), else base64.
    pub(crate) fn contents(&self) -> Value {
        use base64::Engine as _;
        let mime = self.mime_type();
        let binary = mime.starts_with("image/")
            || mime == "application/pdf"
            || mime == "application/octet-stream";
        match std::str::from_utf8(&self.bytes) {
            Ok(text) if !binary => json!({ "uri": self.uri, "mimeType": mime, "text": text }),
            _ => json!({
                "uri": self.uri,
                "mimeType": mime,
                "blob": base64::engine::general_purpose::STANDARD.encode(&self.bytes),
            }),
        }
    }
}

/// A skill, checked and ready to serve.
#[derive(Debug)]
pub(crate) struct Skill {
    pub(crate) owner: Owner,
    pub(crate) name: String,
    /// `skill://<namespace>/<name>/SKILL.md`, or `skill://<name>/SKILL.md`
    /// for the room's own.
    pub(crate) uri: String,
    pub(crate) frontmatter: Map<String, Value>,
    /// `SKILL.md` first, then the others by path.
    pub(crate) files: Vec<SkillFile>,
    /// SHA-256 over its entry: what an approval pins.
    pub(crate) digest: String,
}

impl Skill {
    /// A skill of `owner` named `name` from its files (paths relative to
    /// its folder), checked.
    pub(crate) fn new(
        owner: Owner,
        name: &str,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<Skill, SkillError> {
        if !frontmatter::is_skill_name(name) {
            return Err(SkillError::BadName(name.to_string()));
        }
        if files.len() > LIMITS.entries {
            return Err(SkillError::TooMany);
        }
        let total: u64 = files.iter().map(|(_, bytes)| bytes.len() as u64).sum();
        if total > LIMITS.unpacked {
            return Err(SkillError::TooLarge);
        }
        let root = owner.skill_root(name);
        let mut skill_md = None;
        let mut others = Vec::new();
        for (path, bytes) in files {
            if !is_plain_path(&path) {
                return Err(SkillError::BadPath(path));
            }
            let file = SkillFile {
                uri: format!("{root}{path}"),
                digest: sha256(&bytes),
                path,
                bytes,
            };
            if file.path == SKILL_MD {
                skill_md = Some(file);
            } else {
                others.push(file);
            }
        }
        let skill_md = skill_md.ok_or(SkillError::NoSkillMd)?;
        if skill_md.bytes.len() > MAX_SKILL_MD {
            return Err(SkillError::SkillMdTooLarge);
        }
        let text = std::str::from_utf8(&skill_md.bytes).map_err(|_| SkillError::NotText)?;
        let frontmatter = frontmatter::read(text, name)?;
        others.sort_by(|a, b| a.path.cmp(&b.path));
        let mut files = vec![skill_md];
        files.extend(others);
        let mut skill = Skill {
            uri: format!("{root}{SKILL_MD}"),
            owner,
            name: name.to_string(),
            frontmatter,
            files,
            digest: String::new(),
        };
        skill.digest = sha256(skill.entry().to_string().as_bytes());
        Ok(skill)
    }

    /// A skill from a zip of its folder (its files at the top, or in the
    /// one folder zipping it made).
    pub(crate) fn from_zip(owner: Owner, name: &str, zip: &[u8]) -> Result<Skill, SkillError> {
        Skill::new(owner, name, zipped::read(zip, LIMITS, SKILL_MD)?)
    }

    /// A skill from its folder on disk: regular files only (a link, a FIFO
    /// or a device anywhere in it refuses the skill: none is followed or
    /// opened), hidden files left out, bounded as a zip is.
    pub(crate) fn from_dir(owner: Owner, name: &str, dir: &Path) -> Result<Skill, SkillError> {
        let mut files = Vec::new();
        let mut total = 0u64;
        read_dir_into(dir, "", &mut files, &mut total)?;
        Skill::new(owner, name, files)
    }

    /// The description its frontmatter gives.
    pub(crate) fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Its entry in `skills/list` and `skills/get`.
    pub(crate) fn entry(&self) -> Value {
        let resources: Vec<Value> = self
            .files
            .iter()
            .map(|file| json!({ "uri": file.uri, "digest": file.digest, "size": file.bytes.len() }))
            .collect();
        json!({ "uri": self.uri, "frontmatter": self.frontmatter, "resources": resources })
    }

    /// Its `SKILL.md` as `resources/list` lists it.
    pub(crate) fn listing(&self) -> Value {
        json!({
            "uri": self.uri,
            "name": self.name,
            "description": self.description(),
            "mimeType": MARKDOWN,
            "size": self.files[0].bytes.len(),
        })
    }

    /// The file at `uri`, if it is one of this skill's.
    pub(crate) fn file(&self, uri: &str) -> Option<&SkillFile> {
        self.files.iter().find(|file| file.uri == uri)
    }

    /// Its folder's URI (`skill://<namespace>/<name>`, no trailing slash).
    pub(crate) fn root(&self) -> &str {
        self.uri.strip_suffix("/SKILL.md").unwrap_or(&self.uri)
    }

    /// The direct children of its folder, or of a folder in it, at `uri`
    /// (no trailing slash), as `resources/directory/read` lists them, by
    /// URI: its files with their MIME types and sizes, its folders as
    /// `inode/directory`. `None` if `uri` names no folder of this skill.
    pub(crate) fn directory(&self, uri: &str) -> Option<Vec<Value>> {
        let inside = if uri == self.root() {
            ""
        } else {
            let inside = uri.strip_prefix(self.root())?.strip_prefix('/')?;
            if !is_plain_path(inside) || inside.split('/').any(|part| part.starts_with('.')) {
                return None;
            }
            inside
        };
        let mut children: std::collections::BTreeMap<String, Value> = Default::default();
        for file in &self.files {
            let rest = if inside.is_empty() {
                file.path.as_str()
            } else {
                match file
                    .path
                    .strip_prefix(inside)
                    .and_then(|rest| rest.strip_prefix('/'))
                {
                    Some(rest) => rest,
                    None => continue,
                }
            };
            let child = match rest.split_once('/') {
                Some((folder, _)) => {
                    let child = format!("{uri}/{folder}");
                    json!({ "uri": child, "name": folder, "mimeType": DIRECTORY })
                }
                None => json!({
                    "uri": file.uri,
                    "name": rest,
                    "mimeType": file.mime_type(),
                    "size": file.bytes.len(),
                }),
            };
            let key = child["uri"].as_str().unwrap_or_default().to_string();
            children.insert(key, child);
        }
        (!children.is_empty()).then(|| children.into_values().collect())
    }

    /// All its files' bytes, together.
    pub(crate) fn size(&self) -> u64 {
        self.files.iter().map(|file| file.bytes.len() as u64).sum()
    }
}

/// Whether `path` is a file's path a skill may hold: plain, relative, and
/// made of letters, digits, `.`, `_`, `-` and `/` (a URI needs no escape).
fn is_plain_path(path: &str) -> bool {
    zipped::is_plain_relative(path)
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
}

fn read_dir_into(
    dir: &Path,
    prefix: &str,
    files: &mut Vec<(String, Vec<u8>)>,
    total: &mut u64,
) -> Result<(), SkillError> {
    let shown = if prefix.is_empty() {
        "the skill's folder"
    } else {
        prefix
    };
    let io = |error: std::io::Error| SkillError::Io(format!("{shown}: {}", error.kind()));
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = format!("{prefix}{name}");
        // The entry itself, never what a link points at.
        let kind = entry.file_type().map_err(io)?;
        if kind.is_dir() {
            read_dir_into(&entry.path(), &format!("{path}/"), files, total)?;
        } else if kind.is_file() {
            if files.len() >= LIMITS.entries {
                return Err(SkillError::TooMany);
            }
            let bytes = read_regular(&entry.path(), &path, LIMITS.unpacked - *total)?;
            *total += bytes.len() as u64;
            files.push((path, bytes));
        } else {
            return Err(SkillError::NotAFile(path));
        }
    }
    Ok(())
}

/// A regular file's bytes, at most `room` of them: opened without
/// following a link and without blocking on a FIFO, checked to be a
/// regular file once open.
pub(super) fn read_regular(path: &Path, shown: &str, room: u64) -> Result<Vec<u8>, SkillError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // An error names the file as the skill does, never the server's path.
    let io = |error: std::io::Error| SkillError::Io(format!("{shown}: {}", error.kind()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(SkillError::NotAFile(shown.to_string()));
    }
    let mut bytes = Vec::new();
    file.take(room + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > room {
        return Err(SkillError::TooLarge);
    }
    Ok(bytes)
}

/// `sha256:` and the hex digest of `bytes`, as the extension writes it.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The skills of `owner` a test makes from `(path, text)` pairs.
#[cfg(test)]
pub(crate) fn of(owner: Owner, name: &str, files: &[(&str, &str)]) -> Result<Skill, SkillError> {
    Skill::new(
        owner,
        name,
        files
            .iter()
            .map(|(path, text)| (path.to_string(), text.as_bytes().to_vec()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "---\nname: csv-report\ndescription: Turn a CSV into a report\n---\n# Use\n";

    #[test]
    fn an_entry_lists_each_file_with_its_digest_and_size() {
        let skill = of(
            Owner::Namespace("ada".into()),
            "csv-report",
            &[("references/FORMS.md", "forms"), ("SKILL.md", MD)],
        )
        .unwrap();
        assert_eq!(skill.uri, "skill://ada/csv-report/SKILL.md");
        let entry = skill.entry();
        assert_eq!(entry["resources"][0]["uri"], skill.uri);
        assert_eq!(
            entry["resources"][1]["uri"],
            "skill://ada/csv-report/references/FORMS.md"
        );
        assert_eq!(entry["resources"][1]["size"], 5);
        assert_eq!(entry["resources"][1]["digest"], sha256(b"forms"));
        assert_eq!(entry["frontmatter"]["name"], "csv-report");
        // The entry is what rmcp's model checks.
        let typed: rmcp::model::Skill = serde_json::from_value(entry).unwrap();
        typed.validate().unwrap();
        let room = of(Owner::Room, "csv-report", &[("SKILL.md", MD)]).unwrap();
        assert_eq!(room.uri, "skill://skills/csv-report/SKILL.md");
    }

    #[test]
    fn what_is_not_a_skill_is_refused_with_why() {
        let ada = || Owner::Namespace("ada".into());
        assert!(matches!(
            of(ada(), "x", &[("a.md", "")]),
            Err(SkillError::BadName(_)) | Err(SkillError::NoSkillMd)
        ));
        assert!(matches!(
            of(ada(), "csv-report", &[("notes.md", "")]),
            Err(SkillError::NoSkillMd)
        ));
        assert!(matches!(
            of(ada(), "csv-report", &[("SKILL.md", MD), ("a b.md", "")]),
            Err(SkillError::BadPath(_))
        ));
        assert!(matches!(
            of(ada(), "Bad", &[("SKILL.md", MD)]),
            Err(SkillError::BadName(_))
        ));
        let error = of(ada(), "csv-report", &[("SKILL.md", "# no frontmatter\n")]).unwrap_err();
        assert!(error.to_string().starts_with("SKILL.md line 1:"), "{error}");
    }

    #[test]
    fn a_folder_with_a_link_or_a_fifo_is_refused_and_neither_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SKILL.md"), MD).unwrap();
        std::fs::create_dir(dir.path().join("references")).unwrap();
        std::fs::write(dir.path().join("references/a.md"), "a").unwrap();
        let skill = Skill::from_dir(Owner::Room, "csv-report", dir.path()).unwrap();
        assert_eq!(skill.files.len(), 2);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        assert!(matches!(
            Skill::from_dir(Owner::Room, "csv-report", dir.path()),
            Err(SkillError::NotAFile(_))
        ));
        std::fs::remove_file(dir.path().join("passwd")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(
            Skill::from_dir(Owner::Room, "csv-report", dir.path()),
            Err(SkillError::NotAFile(_))
        ));
    }

    #[test]
    fn a_zip_of_the_folder_is_the_same_skill() {
        let zip = zipped::zip_of(&[
            ("csv-report/SKILL.md", MD.as_bytes()),
            ("csv-report/x.txt", b"x"),
        ]);
        let skill = Skill::from_zip(Owner::Room, "csv-report", &zip).unwrap();
        assert_eq!(skill.files[1].path, "x.txt");
    }
}
