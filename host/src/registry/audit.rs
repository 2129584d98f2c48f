//! The audit log (`GET /audit`, for admins): who changed what on the
//! server, and when: publishes, removals, approvals and refusals, versions
//! held for approval, and reloads of the tokens file.
//!
//! It is kept with the plugin folder, in `.toolhost/audit.jsonl` (one JSON
//! object a line), so a restart and every replica on the folder share it.
//! It holds at most [`MAX_AUDIT_BYTES`]: past that, the older half is
//! dropped (rewritten by rename, so a reader never sees half a file).
//! Entries name people and plugins, never a secret.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value, json};

/// The most the log keeps on disk.
pub(crate) const MAX_AUDIT_BYTES: u64 = 4 * 1024 * 1024;

/// The audit log of one plugin folder.
pub(crate) struct Audit {
    file: PathBuf,
    /// One writer at a time in this process (appends of one line are
    /// atomic between processes).
    writing: Mutex<()>,
}

impl Audit {
    pub(crate) fn new(folder: &Path) -> Audit {
        Audit {
            file: folder.join(".toolhost").join("audit.jsonl"),
            writing: Mutex::new(()),
        }
    }

    /// Adds one entry: `action` by `person`, on `plugin` if any, with
    /// `details` (an object's fields, merged in).
    pub(crate) fn record(&self, action: &str, person: &str, plugin: Option<&str>, details: Value) {
        let mut entry = Map::new();
        entry.insert(
            "at".into(),
            json!(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()),
        );
        entry.insert("action".into(), json!(action));
        entry.insert("person".into(), json!(person));
        if let Some(plugin) = plugin {
            entry.insert("plugin".into(), json!(plugin));
        }
        if let Value::Object(details) = details {
            entry.extend(details);
        }
        let mut line = Value::Object(entry).to_string();
        line.push('\n');
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = self.append(line.as_bytes()) {
            tracing::warn!(file = %self.file.display(), %error, "cannot write the audit log");
        }
    }

    fn append(&self, line: &[u8]) -> std::io::Result<()> {
        if let Some(folder) = self.file.parent() {
            std::fs::create_dir_all(folder)?;
        }
        let size = std::fs::metadata(&self.file).map_or(0, |m| m.len());
        if size + line.len() as u64 > MAX_AUDIT_BYTES {
            self.drop_older_half()?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)?;
        file.write_all(line)
    }

    fn drop_older_half(&self) -> std::io::Result<()> {
        let text = std::fs::read_to_string(&self.file)?;
        let lines: Vec<&str> = text.lines().collect();
        let kept = lines[lines.len() / 2..].join("\n") + "\n";
        let temporary = self.file.with_extension("jsonl.tmp");
        std::fs::write(&temporary, kept)?;
        std::fs::rename(&temporary, &self.file)
    }

    /// The entries, newest first, at most `limit`.
    pub(crate) fn newest_first(&self, limit: usize) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        text.lines()
            .rev()
            .filter_map(|line| serde_json::from_str(line).ok())
            .take(limit)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_newest_first_and_the_log_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::new(dir.path());
        audit.record("publish", "ada", Some("ada/echo"), json!({"hash": "ab"}));
        audit.record("remove", "ada", Some("ada/echo"), json!({}));
        let entries = audit.newest_first(10);
        assert_eq!(entries[0]["action"], "remove");
        assert_eq!(entries[1]["hash"], "ab");
        let filler = "x".repeat(100_000);
        for _ in 0..100 {
            audit.record("publish", "bob", None, json!({"filler": filler}));
        }
        let size = std::fs::metadata(dir.path().join(".toolhost/audit.jsonl"))
            .unwrap()
            .len();
        assert!(size <= MAX_AUDIT_BYTES, "{size}");
        assert_eq!(audit.newest_first(1)[0]["person"], "bob");
    }
}
