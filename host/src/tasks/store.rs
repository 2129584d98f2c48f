//! Where task records live: a folder under the server's state (one
//! machine; survives a restart), or Redis (replicas share it). Every
//! change is a compare-and-set on the record's version, so two servers
//! answering and ending one task at once never lose either change.

use std::path::PathBuf;
use std::time::Duration;

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
}

pub(crate) enum Store {
    Folder(Folder),
    Redis(Redis),
}

pub(crate) struct Folder {
    dir: PathBuf,
    /// One change at a time (this server is the folder's only writer).
    lock: tokio::sync::Mutex<u64>,
}

pub(crate) struct Redis {
    connection: redis::aio::ConnectionManager,
}

const CAS: &str = r"
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if tostring(cjson.decode(current)['version']) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
";

impl Store {
    /// The folder store in `dir` (made if missing).
    pub(crate) fn folder(dir: PathBuf) -> std::io::Result<Store> {
        std::fs::create_dir_all(&dir)?;
        Ok(Store::Folder(Folder {
            dir,
            lock: tokio::sync::Mutex::new(0),
        }))
    }

    /// The Redis store at `url` (`redis://host:port/db`).
    pub(crate) async fn redis(url: &str) -> Result<Store, StoreError> {
        let client = redis::Client::open(url)?;
        let connection = redis::aio::ConnectionManager::new(client).await?;
        Ok(Store::Redis(Redis { connection }))
    }

    /// Whether other servers share it.
    pub(super) fn is_shared(&self) -> bool {
        matches!(self, Store::Redis(_))
    }

    pub(super) async fn create(&self, record: &TaskRecord) -> Result<(), StoreError> {
        match self {
            Store::Folder(folder) => {
                let mut swept = folder.lock.lock().await;
                folder.sweep(&mut swept).await;
                folder.write(record).await
            }
            Store::Redis(redis) => {
                let text = serde_json::to_string(record)?;
                let mut connection = redis.connection.clone();
                let _: () = redis::cmd("SET")
                    .arg(key(&record.id))
                    .arg(text)
                    .arg("PX")
                    .arg(remaining_ms(record))
                    .query_async(&mut connection)
                    .await?;
                Ok(())
            }
        }
    }

    pub(super) async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        if !is_task_id(id) {
            return Ok(None);
        }
        match self {
            Store::Folder(folder) => folder.read(id).await,
            Store::Redis(redis) => {
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
    /// written.
    pub(super) async fn update(
        &self,
        id: &str,
        mut change: impl FnMut(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, StoreError> {
        if !is_task_id(id) {
            return Ok(None);
        }
        match self {
            Store::Folder(folder) => {
                let _one = folder.lock.lock().await;
                let Some(mut record) = folder.read(id).await? else {
                    return Ok(None);
                };
                if !change(&mut record) {
                    return Ok(Some(record));
                }
                record.version += 1;
                folder.write(&record).await?;
                Ok(Some(record))
            }
            Store::Redis(redis) => {
                let script = redis::Script::new(CAS);
                for _ in 0..32 {
                    let Some(mut record) = self.get(id).await? else {
                        return Ok(None);
                    };
                    let seen = record.version;
                    if !change(&mut record) {
                        return Ok(Some(record));
                    }
                    record.version = seen + 1;
                    let mut connection = redis.connection.clone();
                    let set: i64 = script
                        .key(key(id))
                        .arg(seen.to_string())
                        .arg(serde_json::to_string(&record)?)
                        .arg(remaining_ms(&record))
                        .invoke_async(&mut connection)
                        .await?;
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
        match self {
            Store::Folder(_) => Ok(false),
            Store::Redis(redis) => {
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
        let Store::Redis(redis) = self else { return };
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

    async fn read(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        match tokio::fs::read(self.path(id)).await {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Written whole and synced before it replaces the last version.
    async fn write(&self, record: &TaskRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record)?;
        let (dir, path) = (self.dir.clone(), self.path(&record.id));
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

    /// Removes expired records, at most once per [`SWEEP_EVERY`].
    async fn sweep(&self, last: &mut u64) {
        let now = now_ms();
        if now.saturating_sub(*last) < SWEEP_EVERY.as_millis() as u64 {
            return;
        }
        *last = now;
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
