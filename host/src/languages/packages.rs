//! The package store: the packages an admin chose (`toolhost packages
//! add`) for the room's sources to import live, kept in the plugin folder.
//!
//! ```text
//! plugins/_packages.lock        what is there: each package's name,
//!                               version, SHA-256 and the modules it gives
//! plugins/_packages/python/     the pure-Python wheels, unpacked
//! ```
//!
//! The lock file is a [`Lock`] (TOML). The server never downloads: it
//! reads the lock to answer what a source may import, hands the Python
//! folder to the runtime read-only, and reloads the room's sources when the
//! lock changes (the watcher sees it like any file). `_packages` is no
//! namespace (a namespace starts with a letter).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::language::Language;

/// The lock file's name, at the top of the plugin folder.
pub const LOCK_FILE: &str = "_packages.lock";
/// The store's folder, beside it.
pub const STORE_DIR: &str = "_packages";
/// Where the Python runtime sees the store's Python packages.
pub const PYTHON_GUEST_DIR: &str = "/toolhost/packages";

/// What the store holds, per language.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub python: Section,
    /// JavaScript (and TypeScript) packages: each bundled whole, with what
    /// it needs, into one script (`_packages/js/<name>.js`).
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub js: Section,
}

/// One language's packages: what the admin asked for, and what resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// The specs as the admin gave them (`python-dateutil`,
    /// `beautifulsoup4>=4.12`), resolved again together on each change.
    #[serde(default)]
    pub requested: Vec<String>,
    /// Everything installed: the requested and what they need.
    #[serde(default, rename = "package")]
    pub packages: Vec<Package>,
}

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// The SHA-256 of the wheel it was installed from.
    pub sha256: String,
    /// The top-level modules it gives (`dateutil`, `bs4`).
    pub modules: Vec<String>,
}

impl Section {
    fn is_empty(&self) -> bool {
        self.requested.is_empty() && self.packages.is_empty()
    }
}

/// Why the lock file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{} does not parse: {source}", file.display())]
    Parse {
        file: PathBuf,
        source: toml::de::Error,
    },
}

impl Lock {
    /// The lock of the plugin folder `root`; an empty one when there is
    /// none.
    pub fn read(root: &Path) -> Result<Lock, LockError> {
        let file = root.join(LOCK_FILE);
        match std::fs::read_to_string(&file) {
            Ok(text) => Lock::parse(&text).map_err(|source| LockError::Parse { file, source }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(source) => Err(LockError::Read { file, source }),
        }
    }

    pub fn parse(text: &str) -> Result<Lock, toml::de::Error> {
        toml::from_str(text)
    }

    /// The lock as its file's text, with a line saying what wrote it.
    pub fn to_text(&self) -> String {
        let body = toml::to_string_pretty(self).unwrap_or_default();
        format!(
            "# Written by `toolhost packages`: what the room's sources may import.\n\
             # The server reads it; edit it with `toolhost packages add|remove`.\n\n{body}"
        )
    }

    /// The section of `language`, if it has packages of its own.
    pub fn section(&self, language: Language) -> Option<&Section> {
        match language {
            Language::Python => Some(&self.python),
            Language::JavaScript | Language::TypeScript => Some(&self.js),
            Language::Rust => None,
        }
    }

    /// The section of `language`, to change.
    pub fn section_mut(&mut self, language: Language) -> Option<&mut Section> {
        match language {
            Language::Python => Some(&mut self.python),
            Language::JavaScript | Language::TypeScript => Some(&mut self.js),
            Language::Rust => None,
        }
    }

    /// The top-level modules the store gives `language`'s sources.
    pub fn modules(&self, language: Language) -> BTreeSet<String> {
        self.section(language)
            .into_iter()
            .flat_map(|section| &section.packages)
            .flat_map(|package| package.modules.iter().cloned())
            .collect()
    }
}

/// The store's folder of `language`'s packages in the plugin folder
/// `root`.
pub fn store_dir(root: &Path, language: Language) -> PathBuf {
    root.join(STORE_DIR).join(language.runtime().as_str())
}

/// The file of a JavaScript package's bundle in its store folder:
/// `yaml.js`, `@scope__name.js` for `@scope/name`.
pub fn bundle_file(name: &str) -> String {
    format!("{}.js", name.replace('/', "__"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_reads_back_what_was_written_and_names_the_modules() {
        let lock = Lock {
            python: Section {
                requested: vec!["python-dateutil".into()],
                packages: vec![Package {
                    name: "python-dateutil".into(),
                    version: "4.0.0".into(),
                    sha256: "a5e2".into(),
                    modules: vec!["dateutil".into()],
                }],
            },
            js: Section::default(),
        };
        let text = lock.to_text();
        assert!(
            text.starts_with("# Written by `toolhost packages`"),
            "{text}"
        );
        assert_eq!(Lock::parse(&text).unwrap(), lock);
        assert_eq!(
            lock.modules(Language::Python),
            BTreeSet::from(["dateutil".to_string()])
        );
        assert!(Lock::parse("[python]\nunknown = 1\n").is_err());
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(Lock::read(empty.path()).unwrap(), Lock::default());
    }
}
