//! Fair shares: how much one person may hold and run on a shared server,
//! so that one attendee never takes the room's capacity. A person is a
//! namespace (`plugins/ada/`, the tokens file's `name`); the top level,
//! an admin's, has no share but the server's own limits.
//!
//! - **Plugins and bytes**, checked when a component is published into the
//!   namespace: the plugin files it would hold, and their size together,
//!   counting the new version instead of the one it replaces. A file put
//!   there by hand is the admin's doing and is not refused, but counts.
//! - **Calls running at once**, over all the namespace's plugins: what
//!   [`PersonShares::max_calls`] says is counted where calls are made
//!   (`call/slots.rs`).

use std::path::Path;

/// Each person's share; see the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct PersonShares {
    /// Plugins one namespace may hold.
    pub max_plugins: usize,
    /// Their size together, in bytes.
    pub max_bytes: u64,
    /// Calls of one namespace's tools running at once; `None`: a quarter
    /// of the host's call slots, at least one.
    pub max_calls: Option<usize>,
}

impl PersonShares {
    pub const DEFAULT: PersonShares = PersonShares {
        max_plugins: 10,
        max_bytes: 256 << 20,
        max_calls: None,
    };
}

/// A publish that would take a namespace past its share.
#[derive(Debug, thiserror::Error)]
#[error("namespace {namespace:?} would hold {would} {what}, over its share of {limit}")]
pub(crate) struct OverShare {
    pub(crate) namespace: String,
    /// `plugins` or `bytes`.
    pub(crate) what: &'static str,
    pub(crate) would: u64,
    pub(crate) limit: u64,
}

impl PersonShares {
    /// Refuses `namespace` holding `plugins` plugin files (a publish's
    /// among them) of `bytes` bytes together.
    pub(crate) fn check(&self, namespace: &str, plugins: u64, bytes: u64) -> Result<(), OverShare> {
        let over = |what, would, limit| OverShare {
            namespace: namespace.to_string(),
            what,
            would,
            limit,
        };
        if plugins > self.max_plugins as u64 {
            return Err(over("plugins", plugins, self.max_plugins as u64));
        }
        if bytes > self.max_bytes {
            return Err(over("bytes", bytes, self.max_bytes));
        }
        Ok(())
    }
}

/// What namespace folder `folder` would hold with its plugin file
/// `file_name` published: the plugin files (that plugin counted once,
/// whichever of its files are there) and the bytes of the others. Hidden files (uploads
/// in progress, records) do not count.
pub(crate) fn storage_in_use(folder: &Path, file_name: &str) -> (u64, u64) {
    let (mut plugins, mut bytes) = (1u64, 0u64);
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let same_plugin = Path::new(&*name).file_stem() == Path::new(file_name).file_stem();
        let is_plugin = Path::new(&*name)
            .extension()
            .and_then(|extension| extension.to_str())
            .is_some_and(|extension| {
                crate::registry::layout::PLUGIN_EXTENSIONS.contains(&extension)
            });
        if same_plugin || name.starts_with('.') || !is_plugin {
            continue;
        }
        plugins += 1;
        bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
    }
    (plugins, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_counts_once_and_hidden_files_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.wasm"), [0u8; 100]).unwrap();
        std::fs::write(dir.path().join("b.wasm"), [0u8; 100]).unwrap();
        std::fs::write(dir.path().join(".b.wasm.published"), [0u8; 900]).unwrap();
        std::fs::write(dir.path().join("b.toml"), [0u8; 900]).unwrap();
        let shares = PersonShares {
            max_plugins: 2,
            max_bytes: 300,
            max_calls: None,
        };
        let check = |name: &str, incoming: u64| {
            let (plugins, bytes) = storage_in_use(dir.path(), name);
            shares.check("ada", plugins, bytes + incoming)
        };
        check("b.wasm", 200).unwrap();
        let over = check("c.wasm", 1).unwrap_err();
        assert_eq!((over.what, over.would, over.limit), ("plugins", 3, 2));
        let over = check("a.wasm", 201).unwrap_err();
        assert_eq!((over.what, over.would, over.limit), ("bytes", 301, 300));
    }
}
