//! The write side shared by replicas through Redis (`--redis URL`): every
//! publish and removal made on one replica reaches every other, which
//! writes it into its own folder, where its watcher loads it as a dropped
//! file. Calls never wait on Redis; only publishing does.
//!
//! What Redis holds, under the prefix `toolhost:`:
//! - `blob:<sha256>`: each file's bytes, once, by content (a plugin, its
//!   publish record, the source it was built from), and `refs`, how many
//!   plugins name each: a blob none names goes an hour later;
//! - `plugins`: a hash from each plugin to its newest [`Change`] (the
//!   present, which a replica that is new or too far behind copies whole);
//! - `changes`: a stream of every [`Change`] in the order Redis took them
//!   (the history each replica follows from its own place, kept in its
//!   folder as `.toolhost/shared.json`), trimmed to about [`STREAM_LEN`];
//! - `room`: the store's name, given on its first use, so that a replica
//!   knows a store that lost its data from the one it followed.
//!
//! Order: a change is written to `plugins` and `changes` by one script, so
//! both say the same order; every replica applies every change in that
//! order, its own included, and two publishes of one plugin on two
//! replicas end as the later one everywhere.
//!
//! A publish answers once its change is in Redis; when Redis cannot take
//! it, the publish is undone on the replica that received it and refused
//! ([`SharedError`], 503): nothing is served that the others will not
//! serve. A removal is written to Redis before the files go.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use crate::registry::layout::{
    PLUGIN_EXTENSIONS, file_name, is_valid_namespace, is_valid_plugin_name, name_of,
};
use crate::registry::plugin::{content_hash, published_file, source_file};

/// About how many changes the stream keeps; a replica further behind copies
/// the present (`plugins`) instead.
pub(crate) const STREAM_LEN: usize = 10_000;

/// How long a publish waits for Redis before it is refused.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) const BLOB: &str = "toolhost:blob:";
pub(super) const PLUGINS: &str = "toolhost:plugins";
pub(super) const CHANGES: &str = "toolhost:changes";

/// The files an approval keeps, by extension (`registry/approvals.rs`).
pub(crate) const APPROVAL_EXTENSIONS: [&str; 8] = [
    "json",
    "wasm",
    "py",
    "js",
    "ts",
    "zip",
    "published",
    "source",
];
pub(super) const ROOM: &str = "toolhost:room";
const REFS: &str = "toolhost:refs";

/// How long a blob no plugin names is kept: one just written, before its
/// change; one a newer version replaced, for replicas still behind.
const UNREFERENCED_MS: u64 = 60 * 60 * 1000;

/// Why a change could not be shared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SharedError {
    #[error(
        "the shared store (Redis) cannot be reached ({0}); nothing was published: try again once it is back"
    )]
    Unreachable(#[from] redis::RedisError),
    #[error("the shared store (Redis) did not answer within {0:?}; nothing was published")]
    TimedOut(Duration),
    #[error("cannot read a file of the plugin to share it: {0}")]
    Read(#[from] std::io::Error),
}

/// One publish or removal, as replicas share it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Change {
    /// The plugin (`name` or `namespace/name`).
    pub(crate) plugin: String,
    /// The plugin's files after the change, by name in its folder, each
    /// the hash of its bytes (`blob:<hash>`). Empty: the plugin is removed.
    pub(crate) files: BTreeMap<String, String>,
    /// Its approval's files after the change (`--require-approval`), by
    /// name in its folder of `.toolhost/approvals`: the record, the
    /// approved version and what was kept beside it. Empty: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) approvals: BTreeMap<String, String>,
    /// Who made it.
    pub(crate) by: String,
    /// The replica that took it.
    pub(crate) replica: String,
}

impl Change {
    /// Whether `name` may be one of plugin `id`'s files: its file
    /// (`x.wasm`, `x.py`…), or that file's publish record or kept source.
    /// Anything else a change names is refused: a change never writes
    /// outside its plugin.
    pub(super) fn may_name(id: &str, name: &str) -> bool {
        let stem = name_of(id);
        let plugin_file = |file: &str| {
            PLUGIN_EXTENSIONS
                .iter()
                .any(|extension| file == format!("{stem}.{extension}"))
        };
        plugin_file(name)
            || name
                .strip_prefix('.')
                .and_then(|rest| {
                    rest.strip_suffix(".published")
                        .or_else(|| rest.strip_suffix(".source"))
                })
                .is_some_and(plugin_file)
    }

    /// Whether `id` is a plugin id a publish could have made: `name` or
    /// `namespace/name`, each of letters, digits, `_` and `-`, starting
    /// with a letter.
    pub(super) fn is_valid_id(id: &str) -> bool {
        match id.split_once('/') {
            Some((namespace, name)) => is_valid_namespace(namespace) && is_valid_plugin_name(name),
            None => is_valid_plugin_name(id),
        }
    }

    /// Whether `name` may be one of plugin `id`'s approval's files.
    pub(super) fn may_name_approval(id: &str, name: &str) -> bool {
        let stem = name_of(id);
        name.strip_prefix(stem)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|extension| APPROVAL_EXTENSIONS.contains(&extension))
    }

    /// The plugin's file among the change's files.
    pub(crate) fn plugin_file(&self) -> Option<&str> {
        self.files
            .keys()
            .map(String::as_str)
            .find(|name| !name.starts_with('.'))
    }
}

/// The replicas' shared store: one connection for publishing's writes,
/// which fail fast, and one for following the stream.
pub(crate) struct Shared {
    writes: ConnectionManager,
    pub(super) url: String,
    /// This replica's name in the changes it writes.
    replica: String,
}

impl Shared {
    /// Connects to the Redis at `url` (`redis://host:port/db`). The
    /// connection is made lazily and made again whenever it drops: a
    /// replica starts, and serves, while Redis is away.
    pub(crate) fn open(url: &str) -> Result<Arc<Shared>, SharedError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(WRITE_TIMEOUT))
            .set_response_timeout(Some(WRITE_TIMEOUT))
            .set_number_of_retries(1);
        let writes = ConnectionManager::new_lazy_with_config(client, config)?;
        let replica = format!(
            "{}-{}",
            std::process::id(),
            &content_hash(format!("{:?}", std::time::SystemTime::now()).as_bytes())[..8]
        );
        Ok(Arc::new(Shared {
            writes,
            url: url.to_string(),
            replica,
        }))
    }

    /// This replica's name in its changes.
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// A connection to the store, which fails fast, for what else replicas
    /// share there (the audit log).
    pub(crate) fn connection(&self) -> ConnectionManager {
        self.writes.clone()
    }

    /// Shares plugin `id`'s files, as they are now on disk at `file` (the
    /// plugin's file) with its record, and `source` (the text it was built
    /// from) as its kept source, and its approval's files in `approvals`
    /// (its folder of `.toolhost/approvals`): each file's bytes, then the
    /// change.
    #[tracing::instrument(level = "debug", skip(self, source))]
    pub(crate) async fn publish(
        &self,
        id: &str,
        file: &Path,
        source: Option<&[u8]>,
        by: &str,
        approvals: Option<&Path>,
    ) -> Result<(), SharedError> {
        let mut files = BTreeMap::new();
        let mut blobs = Vec::new();
        let mut approved = BTreeMap::new();
        if let Some(dir) = approvals {
            let stem = name_of(id);
            for extension in APPROVAL_EXTENSIONS {
                let name = format!("{stem}.{extension}");
                match tokio::fs::read(dir.join(&name)).await {
                    Ok(bytes) => {
                        let hash = content_hash(&bytes);
                        approved.insert(name, hash.clone());
                        blobs.push((hash, bytes));
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        let plugin = tokio::fs::read(file).await?;
        let record = match tokio::fs::read(published_file(file)).await {
            Ok(bytes) => Some(bytes),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(error.into()),
        };
        let kept = [
            (file.to_path_buf(), Some(plugin)),
            (published_file(file), record),
            (source_file(file), source.map(<[u8]>::to_vec)),
        ];
        for (path, bytes) in kept {
            let Some(bytes) = bytes else { continue };
            let hash = content_hash(&bytes);
            files.insert(file_name(&path), hash.clone());
            blobs.push((hash, bytes));
        }
        let change = Change {
            plugin: id.to_string(),
            files,
            approvals: approved,
            by: by.to_string(),
            replica: self.replica.clone(),
        };
        self.write(&change, blobs).await
    }

    /// Shares the removal of plugin `id`.
    pub(crate) async fn remove(&self, id: &str, by: &str) -> Result<(), SharedError> {
        let change = Change {
            plugin: id.to_string(),
            files: BTreeMap::new(),
            approvals: BTreeMap::new(),
            by: by.to_string(),
            replica: self.replica.clone(),
        };
        self.write(&change, Vec::new()).await
    }

    /// Each blob (kept for [`UNREFERENCED_MS`] until a change names it),
    /// then the change. A blob that expired in between (one no plugin
    /// named any more) is written again, once.
    async fn write(
        &self,
        change: &Change,
        blobs: Vec<(String, Vec<u8>)>,
    ) -> Result<(), SharedError> {
        let mut connection = self.writes.clone();
        let text = serde_json::to_string(change).expect("a change serialises");
        let written = async {
            let mut tries = 0;
            loop {
                tries += 1;
                for (hash, bytes) in &blobs {
                    let _: Option<String> = redis::cmd("SET")
                        .arg(format!("{BLOB}{hash}"))
                        .arg(bytes.as_slice())
                        .arg("NX")
                        .arg("PX")
                        .arg(UNREFERENCED_MS)
                        .query_async(&mut connection)
                        .await?;
                }
                let changed: Result<String, redis::RedisError> = CHANGE_SCRIPT
                    .key(PLUGINS)
                    .key(CHANGES)
                    .key(REFS)
                    .arg(&change.plugin)
                    .arg(&text)
                    .arg(if change.files.is_empty() { 0 } else { 1 })
                    .arg(STREAM_LEN)
                    .arg(BLOB)
                    .arg(UNREFERENCED_MS)
                    .invoke_async(&mut connection)
                    .await;
                match changed {
                    Err(error) if tries == 1 && error.to_string().contains("MISSING") => continue,
                    other => return other.map(|_| ()),
                }
            }
        };
        let outcome = match tokio::time::timeout(WRITE_TIMEOUT, written).await {
            Ok(result) => result.map_err(SharedError::from),
            Err(_) => Err(SharedError::TimedOut(WRITE_TIMEOUT)),
        };
        if outcome.is_err() && self.landed(change, &text).await {
            // The script ran though its answer was lost: it is shared.
            return Ok(());
        }
        outcome
    }

    /// Whether the store's present holds `change` (as `text`), asked once
    /// more after a write whose answer did not come.
    async fn landed(&self, change: &Change, text: &str) -> bool {
        let mut connection = self.writes.clone();
        let mut command = redis::cmd("HGET");
        command.arg(PLUGINS).arg(&change.plugin);
        let asked = command.query_async::<Option<String>>(&mut connection);
        match tokio::time::timeout(WRITE_TIMEOUT, asked).await {
            Ok(Ok(present)) if change.files.is_empty() => present.is_none(),
            Ok(Ok(present)) => present.as_deref() == Some(text),
            _ => false,
        }
    }

    /// Whether the store answers now (before a change that cannot be
    /// undone once made here: an admin's decision).
    pub(crate) async fn reachable(&self) -> Result<(), SharedError> {
        let mut connection = self.writes.clone();
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut connection);
        match tokio::time::timeout(WRITE_TIMEOUT, ping).await {
            Ok(result) => result.map(|_| ()).map_err(SharedError::from),
            Err(_) => Err(SharedError::TimedOut(WRITE_TIMEOUT)),
        }
    }
}

/// A stream id (`<ms>-<seq>`) as the two numbers it orders by.
pub(crate) fn stream_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// Writes a change to the present and to the stream in one step (the
/// stream's order is the present's), and counts which plugins name each
/// blob: one the change names is kept for good, one no plugin names any
/// more is kept [`UNREFERENCED_MS`] (for a replica still applying an older
/// change), then goes. Refused, changing nothing, if a blob is missing.
static CHANGE_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local function hashes(change)
  local all = {}
  for _, hash in pairs(change.files or {}) do table.insert(all, hash) end
  for _, hash in pairs(change.approvals or {}) do table.insert(all, hash) end
  return all
end
local change = cjson.decode(ARGV[2])
for _, hash in ipairs(hashes(change)) do
  if redis.call('EXISTS', ARGV[5] .. hash) == 0 then
    return redis.error_reply('MISSING ' .. hash)
  end
end
for _, hash in ipairs(hashes(change)) do
  redis.call('HINCRBY', KEYS[3], hash, 1)
  redis.call('PERSIST', ARGV[5] .. hash)
end
local before = redis.call('HGET', KEYS[1], ARGV[1])
if before then
  for _, hash in ipairs(hashes(cjson.decode(before))) do
    if redis.call('HINCRBY', KEYS[3], hash, -1) <= 0 then
      redis.call('HDEL', KEYS[3], hash)
      redis.call('PEXPIRE', ARGV[5] .. hash, ARGV[6])
    end
  end
end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'change', ARGV[2])
",
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_only_its_plugins_files() {
        for ok in [
            "word.py",
            "word.wasm",
            ".word.wasm.published",
            ".word.wasm.source",
        ] {
            assert!(Change::may_name("ada/word", ok), "{ok}");
        }
        for bad in [
            "other.py",
            "../word.py",
            "word.toml",
            "_namespace.toml",
            ".word.wasm",
            ".other.py.published",
            "word.py/x",
        ] {
            assert!(!Change::may_name("ada/word", bad), "{bad}");
        }
    }

    #[test]
    fn a_change_names_only_ids_a_publish_could_make() {
        for ok in ["word", "ada/word", "ada/word_count-2"] {
            assert!(Change::is_valid_id(ok), "{ok}");
        }
        for bad in [
            "",
            "../x",
            "ada/../x",
            "ada/x\0",
            "/x",
            "ada/",
            ".toolhost/x",
            "a/b/c",
            "ada/.x",
        ] {
            assert!(!Change::is_valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_approval_names_only_its_plugins_files() {
        for ok in [
            "word.json",
            "word.wasm",
            "word.py",
            "word.published",
            "word.source",
        ] {
            assert!(Change::may_name_approval("ada/word", ok), "{ok}");
        }
        for bad in [
            "other.json",
            "word.toml",
            "../word.json",
            "word",
            ".word.json",
        ] {
            assert!(!Change::may_name_approval("ada/word", bad), "{bad}");
        }
    }
}
