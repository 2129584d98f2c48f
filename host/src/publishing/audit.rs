//! The audit log (`GET /audit`, for admins): who changed what on the
//! server, and when: publishes, removals, approvals and refusals, versions
//! held for approval, and reloads of the tokens file.
//!
//! It is kept with the plugin folder, in `.toolhost/audit.jsonl` (one JSON
//! object a line), so a restart and every replica on the folder share it.
//! It holds at most `--audit-max-kib` (4 MiB by default). Past that it is
//! compacted to half, fairly ([`compact`]): the admins' decisions (approvals,
//! refusals, tokens-file reloads) are kept first, then each person keeps an
//! equal share of their own newest entries, so that one publisher's many
//! publishes push out only their own. A republish of the very bytes that
//! serve is no change and no entry (`publish.rs`). It is rewritten by
//! rename, so a reader never sees half a file. Entries name people and
//! plugins, never a secret.
//!
//! Replicas that share a Redis (`--redis`) share the log there too: each
//! entry is also added to a stream every replica reads `GET /audit` from,
//! the admins' decisions to one of their own, so that no flood of
//! publishes pushes them out. Each stream keeps about as many entries as
//! the folder's bound holds (at [`ENTRY_BYTES`] an entry).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

/// The most the log keeps on disk by default (`--audit-max-kib`).
pub(crate) const MAX_AUDIT_BYTES: u64 = 4 * 1024 * 1024;

/// What an entry records, as its `action` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Action {
    #[serde(rename = "publish")]
    Publish,
    /// A publish whose version waits for an admin (`--require-approval`).
    #[serde(rename = "publish (held for approval)")]
    PublishHeld,
    #[serde(rename = "remove")]
    Remove,
    #[serde(rename = "approve")]
    Approve,
    #[serde(rename = "refuse")]
    Refuse,
    #[serde(rename = "tokens file reloaded")]
    TokensFileReloaded,
    /// An action this build does not know (a newer server's, on a shared
    /// folder): kept as anyone's.
    #[serde(other)]
    Other,
}

impl Action {
    /// An admin's (or the operator's) decision: kept before anyone's
    /// publishes when the log is compacted.
    fn is_decision(self) -> bool {
        matches!(
            self,
            Action::Approve | Action::Refuse | Action::TokensFileReloaded
        )
    }
}

/// One line of the log.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct AuditEntry {
    /// When (RFC 3339).
    at: String,
    action: Action,
    /// Who: a person's name, or `operator` for the tokens file.
    person: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    plugin: Option<String>,
    /// What else the action says (a hash, the people changed, ...).
    #[serde(flatten)]
    details: Map<String, Value>,
}

/// What an entry takes, about, for the shared streams' bound.
pub(crate) const ENTRY_BYTES: u64 = 160;

const SHARED_ENTRIES: &str = "toolhost:audit";
const SHARED_DECISIONS: &str = "toolhost:audit:decisions";

/// The audit log of one plugin folder.
pub(crate) struct Audit {
    file: PathBuf,
    max_bytes: u64,
    /// One writer at a time in this process (appends of one line are
    /// atomic between processes).
    writing: Mutex<()>,
    /// The Redis replicas share it in, if any.
    shared: Option<redis::aio::ConnectionManager>,
}

impl Audit {
    pub(crate) fn new(folder: &Path, max_bytes: u64) -> Audit {
        Audit {
            file: folder.join(".toolhost").join("audit.jsonl"),
            max_bytes,
            writing: Mutex::new(()),
            shared: None,
        }
    }

    /// The log shared with every replica of `connection`'s Redis.
    pub(crate) fn shared_through(mut self, connection: redis::aio::ConnectionManager) -> Audit {
        self.shared = Some(connection);
        self
    }

    /// Adds one entry: `action` by `person`, on `plugin` if any, with
    /// `details` (an object's fields, merged in).
    pub(crate) fn record(
        &self,
        action: Action,
        person: &str,
        plugin: Option<&str>,
        details: Value,
    ) {
        let entry = AuditEntry {
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            action,
            person: person.to_string(),
            plugin: plugin.map(str::to_string),
            details: match details {
                Value::Object(details) => details,
                _ => Map::new(),
            },
        };
        let mut line = serde_json::to_string(&entry).expect("an entry serialises");
        if let (Some(connection), Ok(handle)) =
            (&self.shared, tokio::runtime::Handle::try_current())
        {
            let stream = if action.is_decision() {
                SHARED_DECISIONS
            } else {
                SHARED_ENTRIES
            };
            let bound = (self.max_bytes / ENTRY_BYTES).max(1);
            let (mut connection, text) = (connection.clone(), line.clone());
            handle.spawn(async move {
                let added: Result<String, _> = redis::cmd("XADD")
                    .arg(stream)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(bound)
                    .arg("*")
                    .arg("entry")
                    .arg(text)
                    .query_async(&mut connection)
                    .await;
                if let Err(error) = added {
                    tracing::warn!(%error, "cannot add to the shared audit log; it is in this replica's");
                }
            });
        }
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
        if size + line.len() as u64 > self.max_bytes {
            let text = std::fs::read_to_string(&self.file)?;
            let kept = compact(&text, self.max_bytes / 2);
            let temporary = self.file.with_extension("jsonl.tmp");
            std::fs::write(&temporary, kept)?;
            std::fs::rename(&temporary, &self.file)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)?;
        file.write_all(line)
    }

    /// The entries, newest first, at most `limit`: every replica's when
    /// they share a Redis (this replica's own while it cannot be read).
    pub(crate) async fn newest(&self, limit: usize) -> Vec<Value> {
        let Some(connection) = &self.shared else {
            return self.newest_first(limit);
        };
        let mut connection = connection.clone();
        let mut entries: Vec<(String, Value)> = Vec::new();
        for stream in [SHARED_ENTRIES, SHARED_DECISIONS] {
            let read: Result<redis::streams::StreamRangeReply, _> = redis::cmd("XREVRANGE")
                .arg(stream)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(limit)
                .query_async(&mut connection)
                .await;
            let Ok(read) = read else {
                tracing::warn!("cannot read the shared audit log: answering this replica's");
                return self.newest_first(limit);
            };
            for entry in read.ids {
                let text: Option<String> = entry.get("entry");
                if let Some(value) = text.and_then(|text| serde_json::from_str(&text).ok()) {
                    entries.push((entry.id, value));
                }
            }
        }
        entries.sort_by_key(|(id, _)| std::cmp::Reverse(super::shared::stream_order(id)));
        entries
            .into_iter()
            .take(limit)
            .map(|(_, value)| value)
            .collect()
    }

    /// This folder's entries, newest first, at most `limit`.
    pub(crate) fn newest_first(&self, limit: usize) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        text.lines()
            .rev()
            .filter_map(|line| serde_json::from_str(line).ok())
            .take(limit)
            .collect()
    }
}

/// The lines of `text` to keep within `budget` bytes, in their order: the
/// admins' decisions first (their newest, if even they are over it), then
/// each person an equal share of what is left (a person under it keeps all
/// theirs, and what they leave is shared by the rest), their newest kept.
fn compact(text: &str, budget: u64) -> String {
    let lines: Vec<&str> = text.lines().filter(|line| !line.is_empty()).collect();
    let size = |index: &usize| lines[*index].len() as u64 + 1;
    let mut decisions = Vec::new();
    let mut by_person: HashMap<String, Vec<usize>> = HashMap::new();
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<AuditEntry>(line) {
            Ok(entry) if entry.action.is_decision() => decisions.push(index),
            Ok(entry) => by_person.entry(entry.person).or_default().push(index),
            // A line no entry reads (cut short by a crash) is nobody's.
            Err(_) => by_person.entry(String::new()).or_default().push(index),
        }
    }
    let mut kept = Vec::new();
    let mut left = budget;
    let newest_within = |indices: &[usize], allowance: u64, kept: &mut Vec<usize>| {
        let mut used = 0;
        for index in indices.iter().rev() {
            if used + size(index) > allowance {
                break;
            }
            used += size(index);
            kept.push(*index);
        }
        used
    };
    left -= newest_within(&decisions, left, &mut kept);
    // Water-filling: the smallest first, each taking at most an equal
    // share of what is left among those still to come.
    let mut people: Vec<(u64, Vec<usize>)> = by_person
        .into_values()
        .map(|indices| (indices.iter().map(size).sum(), indices))
        .collect();
    people.sort_by_key(|(total, _)| *total);
    let count = people.len() as u64;
    for (done, (_, indices)) in people.iter().enumerate() {
        let share = left / (count - done as u64).max(1);
        left -= newest_within(indices, share, &mut kept);
    }
    kept.sort_unstable();
    kept.iter()
        .map(|index| format!("{}\n", lines[*index]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_come_newest_first_and_the_log_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::new(dir.path(), MAX_AUDIT_BYTES);
        audit.record(
            Action::Publish,
            "ada",
            Some("ada/echo"),
            json!({"hash": "ab"}),
        );
        audit.record(Action::Remove, "ada", Some("ada/echo"), json!({}));
        let entries = audit.newest_first(10);
        assert_eq!(entries[0]["action"], "remove");
        assert_eq!(entries[1]["hash"], "ab");
        let filler = "x".repeat(100_000);
        for _ in 0..100 {
            audit.record(Action::Publish, "bob", None, json!({"filler": filler}));
        }
        let size = std::fs::metadata(dir.path().join(".toolhost/audit.jsonl"))
            .unwrap()
            .len();
        assert!(size <= MAX_AUDIT_BYTES, "{size}");
        assert_eq!(audit.newest_first(1)[0]["person"], "bob");
    }

    #[test]
    fn one_persons_flood_pushes_out_only_their_own_entries() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::new(dir.path(), 64 * 1024);
        audit.record(
            Action::Publish,
            "instructor",
            Some("echo"),
            json!({"hash": "a"}),
        );
        audit.record(Action::Approve, "root", Some("ada/x"), json!({"hash": "b"}));
        audit.record(Action::Remove, "carol", Some("carol/y"), json!({}));
        for round in 0..5_000 {
            audit.record(
                Action::Publish,
                "ada",
                Some("ada/x"),
                json!({ "hash": round }),
            );
        }
        let entries = audit.newest_first(usize::MAX);
        let of = |person: &str| entries.iter().filter(|e| e["person"] == person).count();
        assert_eq!(of("instructor"), 1);
        assert_eq!(of("root"), 1);
        assert_eq!(of("carol"), 1);
        assert!(of("ada") > 100, "{}", of("ada"));
        assert_eq!(entries[0]["hash"], 4_999, "ada keeps her newest");
        let size = std::fs::metadata(dir.path().join(".toolhost/audit.jsonl"))
            .unwrap()
            .len();
        assert!(size <= 64 * 1024, "{size}");
    }
}
