//! Where task records live: a folder under the server's state (one
//! machine; survives a restart), or Redis (replicas share it). Every
//! change is a compare-and-set on the record's version, so two servers
//! answering and ending one task at once never lose either change.
//!
//! What the records take is counted where they live, in bytes as written
//! (arguments, answers and results together) and in records, per person
//! and in all: a folder counts its records when it is opened and keeps the
//! count as it writes; Redis keeps the count in Redis, beside the records,
//! changed by the same script that writes one, so every replica shares it
//! and a restart forgets nothing. A record that would pass a bound is not
//! written ([`StoreError::Full`]); one that expires gives its share back.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use super::bounds::{Bound, Growth, Limits, Usage};
use super::record::{TaskRecord, now_ms};

/// How long a replica counts as alive after its last heartbeat, and how
/// often it beats while it runs a task.
pub(super) const HEARTBEAT_TTL: Duration = Duration::from_secs(3);
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How often the folder is swept of expired records, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("a task record does not read: {0}")]
    Record(#[from] serde_json::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("the record kept changing under this update")]
    Contended,
    /// The record would pass a bound; nothing was written.
    #[error("{0}")]
    Full(Bound),
}

pub(crate) struct Store {
    kind: Kind,
    limits: Limits,
}

enum Kind {
    Folder(Folder),
    Redis(Redis),
}

struct Folder {
    dir: PathBuf,
    /// One change at a time (this server is the folder's only writer).
    state: tokio::sync::Mutex<FolderState>,
}

struct FolderState {
    /// When the folder was last swept, in milliseconds since the epoch.
    swept: u64,
    usage: Usage,
}

struct Redis {
    connection: redis::aio::ConnectionManager,
}

/// The functions the Redis scripts share: `release` gives back what the
/// records expired by `now` took (at most 256 of them a script, so that
/// none holds Redis long; the rest on the next writes), `add` changes a
/// count (a count that reaches zero is removed). The keys after the
/// record's: when each record expires (a sorted set), each record's size
/// and owner (hashes), and each owner's bytes (with `*` for all) and
/// records (hashes).
const ACCOUNTING: &str = r"
local expiring, sizes, owners, bytes, records = KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function add(hash, field, by)
  if by ~= 0 and redis.call('HINCRBY', hash, field, by) <= 0 then
    redis.call('HDEL', hash, field)
  end
end
local function count(hash, field)
  return tonumber(redis.call('HGET', hash, field)) or 0
end
local function release(now)
  local gone = redis.call('ZRANGEBYSCORE', expiring, '-inf', now, 'LIMIT', 0, 256)
  for _, id in ipairs(gone) do
    local size = count(sizes, id)
    local owner = redis.call('HGET', owners, id)
    if owner then
      add(bytes, owner, -size)
      add(records, owner, -1)
    end
    add(bytes, '*', -size)
    redis.call('HDEL', sizes, id)
    redis.call('HDEL', owners, id)
    redis.call('ZREM', expiring, id)
  end
end
";

/// A new record, if it fits: ARGV is the id, the owner's key, the record,
/// its remaining milliseconds, when it expires, now, and the limits
/// (records and bytes per person, bytes in all). 1 when written, else
/// the bound it would pass (11, 12, 13).
const CREATE: &str = r"
local id, owner, text = ARGV[1], ARGV[2], ARGV[3]
release(tonumber(ARGV[6]))
local size = string.len(text)
if count(records, owner) >= tonumber(ARGV[7]) then return 11 end
if count(bytes, owner) + size > tonumber(ARGV[8]) then return 12 end
if count(bytes, '*') + size > tonumber(ARGV[9]) then return 13 end
redis.call('SET', KEYS[1], text, 'PX', ARGV[4])
redis.call('ZADD', expiring, ARGV[5], id)
redis.call('HSET', sizes, id, size)
redis.call('HSET', owners, id, owner)
add(bytes, owner, size)
add(bytes, '*', size)
add(records, owner, 1)
return 1
";

/// A changed record, if it is still the version read and its growth fits:
/// ARGV is the version read, the record, its remaining milliseconds, the
/// id, now, whether its growth is bounded (`1`), and the limits (bytes
/// per person, bytes in all). 1 when written, -1 when gone, 0 when
/// changed meanwhile, else the bound it would pass (12, 13). A record not
/// counted (made before its count was kept, or counted out as expired) is
/// written as it is.
const CAS: &str = r"
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if tostring(cjson.decode(current)['version']) ~= ARGV[1] then return 0 end
release(tonumber(ARGV[5]))
local id, text = ARGV[4], ARGV[2]
local size = string.len(text)
local was = tonumber(redis.call('HGET', sizes, id))
local owner = redis.call('HGET', owners, id)
if was and owner then
  local more = size - was
  if ARGV[6] == '1' and more > 0 then
    if count(bytes, owner) + more > tonumber(ARGV[7]) then return 12 end
    if count(bytes, '*') + more > tonumber(ARGV[8]) then return 13 end
  end
  redis.call('HSET', sizes, id, size)
  add(bytes, owner, more)
  add(bytes, '*', more)
end
redis.call('SET', KEYS[1], text, 'PX', ARGV[3])
return 1
";

/// The bound a script's answer names, if it names one.
fn bound_of(answer: i64, limits: &Limits) -> Option<Bound> {
    match answer {
        11 => Some(Bound::RecordsPerPerson(limits.records_per_person)),
        12 => Some(Bound::BytesPerPerson(limits.bytes_per_person)),
        13 => Some(Bound::Bytes(limits.bytes)),
        _ => None,
    }
}

static CREATE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(&format!("{ACCOUNTING}{CREATE}")));
static CAS_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(&format!("{ACCOUNTING}{CAS}")));

/// `script` over the record `id` and the accounting's keys.
fn invoke(script: &'static redis::Script, id: &str) -> redis::ScriptInvocation<'static> {
    let mut invocation = script.prepare_invoke();
    invocation.key(key(id));
    for name in ["expiring", "sizes", "owners", "bytes", "records"] {
        invocation.key(format!("toolhost:tasks:{name}"));
    }
    invocation
}

/// Who owns a record, as Redis's accounting names them.
fn owner_key(owner: Option<&str>) -> String {
    owner.map_or_else(|| "open".to_string(), |name| format!("person:{name}"))
}

impl Store {
    /// The folder store in `dir` (made if missing), its records counted.
    pub(crate) fn folder(dir: PathBuf) -> std::io::Result<Store> {
        std::fs::create_dir_all(&dir)?;
        let usage = Folder::count(&dir)?;
        Ok(Store {
            kind: Kind::Folder(Folder {
                dir,
                state: tokio::sync::Mutex::new(FolderState { swept: 0, usage }),
            }),
            limits: Limits::default(),
        })
    }

    /// The Redis store at `url` (`redis://host:port/db`), connected to
    /// lazily and again whenever the connection drops: a server starts,
    /// and serves its calls, while Redis is away (tasks wait for it).
    pub(crate) async fn redis(url: &str) -> Result<Store, StoreError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)));
        let connection = redis::aio::ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Store {
            kind: Kind::Redis(Redis { connection }),
            limits: Limits::default(),
        })
    }

    /// The same store with other bounds.
    #[cfg(test)]
    pub(super) fn with_limits(self, limits: Limits) -> Store {
        Store { limits, ..self }
    }

    /// Whether other servers share it.
    pub(super) fn is_shared(&self) -> bool {
        matches!(self.kind, Kind::Redis(_))
    }

    /// Writes a new record, if it fits within the bounds; else nothing
    /// (`StoreError::Full`).
    pub(super) async fn create(&self, record: &TaskRecord) -> Result<(), StoreError> {
        match &self.kind {
            Kind::Folder(folder) => {
                let bytes = serde_json::to_vec(record)?;
                let size = bytes.len() as u64;
                let mut state = folder.state.lock().await;
                folder.expire(&mut state).await;
                folder.sweep(&mut state).await;
                state
                    .usage
                    .admits(&self.limits, &record.owner, size)
                    .map_err(StoreError::Full)?;
                folder.write(&record.id, bytes).await?;
                let owner = record.owner.clone();
                state
                    .usage
                    .add(&record.id, owner, size, record.expires_ms());
                Ok(())
            }
            Kind::Redis(redis) => {
                let text = serde_json::to_string(record)?;
                let mut invocation = invoke(&CREATE_SCRIPT, &record.id);
                invocation
                    .arg(&record.id)
                    .arg(owner_key(record.owner.as_deref()))
                    .arg(text)
                    .arg(remaining_ms(record))
                    .arg(record.expires_ms())
                    .arg(now_ms())
                    .arg(self.limits.records_per_person)
                    .arg(self.limits.bytes_per_person)
                    .arg(self.limits.bytes);
                let mut connection = redis.connection.clone();
                let answer: i64 = invocation.invoke_async(&mut connection).await?;
                match bound_of(answer, &self.limits) {
                    Some(bound) => Err(StoreError::Full(bound)),
                    None => Ok(()),
                }
            }
        }
    }

    pub(super) async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        if !is_task_id(id) {
            return Ok(None);
        }
        match &self.kind {
            Kind::Folder(folder) => folder.read(id).await,
            Kind::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let text: Option<String> = redis::cmd("GET")
                    .arg(key(id))
                    .query_async(&mut connection)
                    .await?;
                Ok(text.map(|text| serde_json::from_str(&text)).transpose()?)
            }
        }
    }

    /// Changes the record `id` with `change`, if it exists; the record as
    /// changed.
    /// `change` says whether it changed anything: if not, nothing is
    /// written. What it adds is refused past a bound when `growth` is
    /// `Bounded` (`StoreError::Full`, and nothing written).
    pub(super) async fn update(
        &self,
        id: &str,
        growth: Growth,
        mut change: impl FnMut(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, StoreError> {
        if !is_task_id(id) {
            return Ok(None);
        }
        match &self.kind {
            Kind::Folder(folder) => {
                let mut state = folder.state.lock().await;
                // An expired record is gone, as Redis forgets it.
                folder.expire(&mut state).await;
                let Some(mut record) = folder.read(id).await? else {
                    return Ok(None);
                };
                if !change(&mut record) {
                    return Ok(Some(record));
                }
                record.version += 1;
                let bytes = serde_json::to_vec(&record)?;
                let size = bytes.len() as u64;
                state
                    .usage
                    .resizes(&self.limits, id, size, growth)
                    .map_err(StoreError::Full)?;
                folder.write(id, bytes).await?;
                state.usage.resize(id, size);
                Ok(Some(record))
            }
            Kind::Redis(redis) => {
                for _ in 0..32 {
                    let Some(mut record) = self.get(id).await? else {
                        return Ok(None);
                    };
                    let seen = record.version;
                    if !change(&mut record) {
                        return Ok(Some(record));
                    }
                    record.version = seen + 1;
                    let mut invocation = invoke(&CAS_SCRIPT, id);
                    invocation
                        .arg(seen.to_string())
                        .arg(serde_json::to_string(&record)?)
                        .arg(remaining_ms(&record))
                        .arg(id)
                        .arg(now_ms())
                        .arg(if growth == Growth::Bounded { "1" } else { "0" })
                        .arg(self.limits.bytes_per_person)
                        .arg(self.limits.bytes);
                    let mut connection = redis.connection.clone();
                    let set: i64 = invocation.invoke_async(&mut connection).await?;
                    if let Some(bound) = bound_of(set, &self.limits) {
                        return Err(StoreError::Full(bound));
                    }
                    match set {
                        1 => return Ok(Some(record)),
                        -1 => return Ok(None),
                        _ => continue,
                    }
                }
                Err(StoreError::Contended)
            }
        }
    }

    /// Whether `replica` beat within [`HEARTBEAT_TTL`] (never, for a
    /// folder: its one server is this one).
    pub(super) async fn alive(&self, replica: &str) -> Result<bool, StoreError> {
        match &self.kind {
            Kind::Folder(_) => Ok(false),
            Kind::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let exists: bool = redis::cmd("EXISTS")
                    .arg(format!("toolhost:replica:{replica}"))
                    .query_async(&mut connection)
                    .await?;
                Ok(exists)
            }
        }
    }

    /// Says `replica` is alive, every [`HEARTBEAT_EVERY`], for as long as
    /// it is awaited (while a task runs); never ends.
    pub(super) async fn beat(&self, replica: &str) {
        if !self.is_shared() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(HEARTBEAT_EVERY).await;
            self.beat_once(replica).await;
        }
    }

    /// Says `replica` is alive now (a shared store only).
    pub(super) async fn beat_once(&self, replica: &str) {
        let Kind::Redis(redis) = &self.kind else {
            return;
        };
        let mut connection = redis.connection.clone();
        let beat: Result<(), _> = redis::cmd("SET")
            .arg(format!("toolhost:replica:{replica}"))
            .arg(1)
            .arg("PX")
            .arg(HEARTBEAT_TTL.as_millis() as u64)
            .query_async(&mut connection)
            .await;
        if let Err(error) = beat {
            tracing::warn!(%error, "the task heartbeat could not be written");
        }
    }
}

impl Folder {
    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// What the records in `dir` take, read as the folder is opened: each
    /// record's size as written, its owner and when it expires (an expired
    /// one is not counted; the first sweep removes it).
    fn count(dir: &Path) -> std::io::Result<Usage> {
        /// What counting needs of a record (the rest is skipped unread).
        #[derive(serde::Deserialize)]
        struct Header {
            id: String,
            owner: Option<String>,
            created_ms: u64,
            ttl_ms: u64,
        }
        let now = now_ms();
        let mut usage = Usage::default();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|extension| extension != "json") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(record) = serde_json::from_slice::<Header>(&bytes) else {
                continue;
            };
            let expires_ms = record.created_ms.saturating_add(record.ttl_ms);
            if expires_ms > now && is_task_id(&record.id) {
                usage.add(&record.id, record.owner, bytes.len() as u64, expires_ms);
            }
        }
        Ok(usage)
    }

    /// Gives back what the records expired by now took, and removes them.
    async fn expire(&self, state: &mut FolderState) {
        for id in state.usage.expire(now_ms()) {
            let _ = tokio::fs::remove_file(self.path(&id)).await;
        }
    }

    async fn read(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        match tokio::fs::read(self.path(id)).await {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// The record `id` as `bytes`, written whole and synced before it
    /// replaces the last version.
    async fn write(&self, id: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let (dir, path) = (self.dir.clone(), self.path(id));
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write;
            let mut file = tempfile::NamedTempFile::new_in(&dir)?;
            file.write_all(&bytes)?;
            file.as_file().sync_all()?;
            file.persist(&path).map_err(|error| error.error)?;
            std::fs::File::open(&dir)?.sync_all()
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(())
    }

    /// Removes, at most once per [`SWEEP_EVERY`], what is not counted
    /// and not to be kept: expired or unreadable records, and writes a
    /// crash cut short. (A counted record is removed as it expires.)
    async fn sweep(&self, state: &mut FolderState) {
        let now = now_ms();
        if now.saturating_sub(state.swept) < SWEEP_EVERY.as_millis() as u64 {
            return;
        }
        state.swept = now;
        let Ok(mut entries) = tokio::fs::read_dir(&self.dir).await else {
            return;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            let path = entry.path();
            let leftover = entry.file_name().to_string_lossy().starts_with(".tmp");
            if leftover {
                // A write a crash cut short (a finished one was renamed).
                let old = entry
                    .metadata()
                    .await
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .is_some_and(|modified| modified.elapsed().is_ok_and(|age| age > SWEEP_EVERY));
                if old {
                    let _ = tokio::fs::remove_file(&path).await;
                }
                continue;
            }
            let counted = path
                .file_stem()
                .is_some_and(|id| state.usage.counts(&id.to_string_lossy()));
            if counted {
                continue;
            }
            let expired = match tokio::fs::read(&path).await {
                Ok(bytes) => serde_json::from_slice::<TaskRecord>(&bytes)
                    .map_or(true, |record| record.expired()),
                Err(_) => false,
            };
            if expired && path.extension().is_some_and(|e| e == "json") {
                let _ = tokio::fs::remove_file(&path).await;
            }
        }
    }
}

fn key(id: &str) -> String {
    format!("toolhost:task:{id}")
}

fn remaining_ms(record: &TaskRecord) -> u64 {
    record.expires_ms().saturating_sub(now_ms()).max(1)
}

/// Ids this server makes: 32 lowercase hex digits. Anything else is no
/// task (and never a path).
fn is_task_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
