//! Following the shared store (`shared.rs`): each replica makes its folder
//! the store's present as it starts and whenever Redis comes back, then
//! applies every change of the stream in order, keeping its place in the
//! folder (`.toolhost/shared.json`). What applying a change does to the
//! folder is the [`Applier`]'s (`replicate.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use super::shared::{
    BLOB, CHANGES, Change, PLUGINS, ROOM, Shared, SharedError, WRITE_TIMEOUT, stream_order,
};
use crate::registry::layout;
use crate::registry::plugin::{content_hash, published_file, source_file};

/// How long one read of the stream waits for a change.
const FOLLOW_BLOCK_MS: usize = 30_000;

/// What following the stream applies changes through: the publishing of
/// this replica (its locks, its registry, its room's view).
pub(crate) trait Applier: Send + Sync + 'static {
    /// The folder plugin `id`'s files go in (`None`: no folder, or `id`
    /// is no plugin of it).
    fn folder_of(&self, id: &str) -> Option<PathBuf>;
    /// The folder its approval's files go in, if this replica asks for
    /// approvals.
    fn approvals_of(&self, id: &str) -> Option<PathBuf>;
    /// Writes `change` into the folder, under the plugin's publish lock:
    /// `blobs` are the bytes of its files that differ here, `approvals` of
    /// its approval's. The plugin's file to load, if anything changed.
    fn write(
        &self,
        change: &Change,
        blobs: BTreeMap<String, Vec<u8>>,
        approvals: BTreeMap<String, Vec<u8>>,
    ) -> impl std::future::Future<Output = std::io::Result<Option<PathBuf>>> + Send;
    /// Loads the plugins `written` names, as one batch through the one
    /// load path, and tells the room's view of them.
    fn load(&self, written: Vec<(Change, PathBuf)>)
    -> impl std::future::Future<Output = ()> + Send;
}

/// Where a replica keeps what it follows, in the folder's state.
fn followed_file(folder: &Path) -> PathBuf {
    folder.join(".toolhost").join("shared.json")
}

/// What a replica has applied of the shared store: which store (`room`, a
/// name the store is given when first used), and up to which change.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Followed {
    room: String,
    at: String,
}

impl Followed {
    fn read(folder: &Path) -> Option<Followed> {
        let text = std::fs::read_to_string(followed_file(folder)).ok()?;
        serde_json::from_str::<Followed>(&text)
            .ok()
            .filter(|followed| is_stream_id(&followed.at))
    }

    fn save(&self, folder: &Path) -> std::io::Result<()> {
        let file = followed_file(folder);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let text = serde_json::to_vec(self).expect("serialises");
        layout::write_by_rename(&file, &text)
    }
}

/// Follows the shared store for as long as the server runs. First (and
/// again after Redis was away) the replica makes its folder the store's
/// present; then it applies each change of the stream in order, keeping
/// its place after each. `ready` is told once the present was copied the
/// first time, or, for a folder that followed the store before, once the
/// store is found away (it serves what it has, and catches up later).
pub(crate) async fn follow<A: Applier>(
    shared: Arc<Shared>,
    applier: Arc<A>,
    folder: PathBuf,
    ready: tokio::sync::watch::Sender<bool>,
) {
    let client = match redis::Client::open(shared.url.as_str()) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot follow the shared store");
            return;
        }
    };
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(WRITE_TIMEOUT))
        .set_response_timeout(Some(Duration::from_millis(FOLLOW_BLOCK_MS as u64 + 5_000)));
    let mut connection = match ConnectionManager::new_lazy_with_config(client, config) {
        Ok(connection) => connection,
        Err(error) => {
            tracing::error!(%error, "cannot follow the shared store");
            return;
        }
    };
    let mut followed = Followed::read(&folder);
    let mut in_step = false;
    let mut failing = false;
    loop {
        let step = if in_step {
            follow_once(&mut connection, &*applier, &folder, &mut followed).await
        } else {
            start(&mut connection, &shared, &*applier, &folder, &mut followed).await
        };
        match step {
            Ok(()) => {
                if failing {
                    tracing::info!("the shared store is back: following it again");
                    failing = false;
                }
                in_step = true;
                if !*ready.borrow() {
                    let _ = ready.send(true);
                }
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(error = %error, "cannot follow the shared store; serving what is here, and trying again");
                    failing = true;
                }
                // A folder that followed the store before serves what it
                // has meanwhile; a new one waits until it has the room.
                if followed.is_some() && !*ready.borrow() {
                    let _ = ready.send(true);
                }
                in_step = false;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The store's name, given it on its first use.
async fn room_of(connection: &mut ConnectionManager) -> Result<String, SharedError> {
    let named: Option<String> = connection.get(ROOM).await?;
    if let Some(room) = named {
        return Ok(room);
    }
    let fresh = content_hash(
        format!("{:?}-{}", std::time::SystemTime::now(), std::process::id()).as_bytes(),
    )[..16]
        .to_string();
    let _: Option<String> = redis::cmd("SET")
        .arg(ROOM)
        .arg(&fresh)
        .arg("NX")
        .query_async(connection)
        .await?;
    let named: Option<String> = connection.get(ROOM).await?;
    Ok(named.unwrap_or(fresh))
}

/// Makes the folder the store's present. A replica that followed this
/// very store removes what the room no longer has. One that never followed
/// it (a server that starts sharing), or finds it behind its own place (a
/// store restored from an older copy, or that lost its newest writes),
/// removes nothing and overwrites nothing it published: it takes what it
/// lacks, and offers the store its own.
async fn start<A: Applier>(
    connection: &mut ConnectionManager,
    shared: &Shared,
    applier: &A,
    folder: &Path,
    followed: &mut Option<Followed>,
) -> Result<(), SharedError> {
    let room = room_of(connection).await?;
    let newest = newest_change(connection).await?;
    let ours = followed.as_ref().is_some_and(|followed| {
        followed.room == room && stream_order(&newest) >= stream_order(&followed.at)
    });
    if followed.is_some() && !ours {
        tracing::warn!(%room, "the shared store is not the one this folder followed, or is behind it (its data was lost, replaced or restored from an older copy): nothing published here is removed or overwritten, and it is offered to the store");
    }
    let at = copy_present(connection, Some(shared).filter(|_| !ours), applier, folder).await?;
    let now = Followed { room, at };
    now.save(folder)?;
    *followed = Some(now);
    Ok(())
}

fn is_stream_id(text: &str) -> bool {
    let mut parts = text.splitn(2, '-');
    let ms = parts.next().unwrap_or_default();
    let seq = parts.next().unwrap_or_default();
    !ms.is_empty()
        && !seq.is_empty()
        && ms.bytes().all(|b| b.is_ascii_digit())
        && seq.bytes().all(|b| b.is_ascii_digit())
}

/// Reads the next changes (waiting for some) and applies them; copies the
/// present instead when the stream no longer holds what follows the
/// replica's place.
async fn follow_once<A: Applier>(
    connection: &mut ConnectionManager,
    applier: &A,
    folder: &Path,
    followed: &mut Option<Followed>,
) -> Result<(), SharedError> {
    let Some(mut now) = followed.clone() else {
        return Err(SharedError::Read(std::io::Error::other(
            "no place in the stream",
        )));
    };
    // The newest id trimmed away: past our place, changes are lost to us
    // and the present is copied instead.
    let info: redis::Value = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(CHANGES)
        .query_async(connection)
        .await
        .unwrap_or(redis::Value::Nil);
    if trimmed_past(&info).is_some_and(|trimmed| stream_order(&trimmed) > stream_order(&now.at)) {
        now.at = copy_present(connection, None, applier, folder).await?;
        now.save(folder)?;
        *followed = Some(now);
        return Ok(());
    }
    let reply: Option<redis::streams::StreamReadReply> = connection
        .xread_options(
            &[CHANGES],
            &[&now.at],
            &redis::streams::StreamReadOptions::default()
                .count(100)
                .block(FOLLOW_BLOCK_MS),
        )
        .await?;
    let Some(reply) = reply else {
        return Ok(());
    };
    // Written in order, then loaded as one batch (a file written twice
    // loads its newest bytes).
    let mut written = Vec::new();
    for entry in reply.keys.into_iter().flat_map(|key| key.ids) {
        let text: Option<String> = entry.get("change");
        match text.as_deref().map(serde_json::from_str::<Change>) {
            Some(Ok(change)) => written.extend(write_change(connection, applier, change).await?),
            _ => {
                tracing::warn!(id = %entry.id, "a change in the shared store does not read; skipped")
            }
        }
        now.at = entry.id;
    }
    applier.load(written).await;
    // Kept once a batch is applied (one applied again changes nothing).
    now.save(folder)?;
    *followed = Some(now);
    Ok(())
}

/// The `max-deleted-entry-id` of an `XINFO STREAM` reply.
fn trimmed_past(info: &redis::Value) -> Option<String> {
    let (redis::Value::Array(items) | redis::Value::Set(items)) = info else {
        if let redis::Value::Map(pairs) = info {
            return pairs.iter().find_map(|(key, value)| {
                (text_of(key)? == "max-deleted-entry-id").then(|| text_of(value))?
            });
        }
        return None;
    };
    items
        .chunks(2)
        .find_map(|pair| match pair {
            [key, value] if text_of(key).as_deref() == Some("max-deleted-entry-id") => {
                Some(text_of(value))
            }
            _ => None,
        })
        .flatten()
}

fn text_of(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        redis::Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// Copies the present: every plugin in `plugins`; then, for each plugin
/// published here that the room does not have, its removal, or (with
/// `offer`) its offer to the store. Answers the stream id to follow from
/// (read first, so no change is missed: one applied twice changes
/// nothing).
async fn copy_present<A: Applier>(
    connection: &mut ConnectionManager,
    offer: Option<&Shared>,
    applier: &A,
    folder: &Path,
) -> Result<String, SharedError> {
    let at = newest_change(connection).await?;
    let present: std::collections::HashMap<String, String> = connection.hgetall(PLUGINS).await?;
    let mine: std::collections::HashMap<String, PathBuf> =
        published_here(folder).into_iter().collect();
    let mut known = std::collections::HashSet::new();
    // Every file written first, then all loaded as one batch: a new
    // replica compiles and lists the room's plugins in parallel.
    let mut written = Vec::new();
    for (plugin, text) in present {
        match serde_json::from_str::<Change>(&text) {
            // Offering, what was published here stays as it is and is
            // offered below.
            Ok(change) if change.plugin == plugin => {
                if offer.is_some() && mine.contains_key(&plugin) {
                    continue;
                }
                known.insert(plugin);
                written.extend(write_change(connection, applier, change).await?);
            }
            _ => tracing::warn!(%plugin, "a plugin in the shared store does not read; skipped"),
        }
    }
    for (id, file) in mine {
        if known.contains(&id) {
            continue;
        }
        match offer {
            Some(shared) => {
                let source = tokio::fs::read(source_file(&file)).await.ok();
                let by = std::fs::read(published_file(&file))
                    .ok()
                    .and_then(|bytes| crate::registry::plugin::PublishRecord::read(&bytes))
                    .map(|record| record.by)
                    .unwrap_or_default();
                tracing::info!(plugin = %id, "offered to the shared store: published here, and the store did not follow it");
                let approvals = applier.approvals_of(&id);
                shared
                    .publish(&id, &file, source.as_deref(), &by, approvals.as_deref())
                    .await?;
            }
            None => {
                let change = Change {
                    plugin: id,
                    files: BTreeMap::new(),
                    approvals: BTreeMap::new(),
                    by: String::new(),
                    replica: String::new(),
                };
                written.extend(write_change(connection, applier, change).await?);
            }
        }
    }
    applier.load(written).await;
    Ok(at)
}

/// The plugins of the folder that were published (they have a publish
/// record), with their files.
fn published_here(folder: &Path) -> Vec<(String, PathBuf)> {
    let layout = layout::Layout::new(folder);
    let mut ids = Vec::new();
    let dirs = std::iter::once(folder.to_path_buf()).chain(layout.namespace_dirs());
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if let Some(id) = layout.plugin_id(&path)
                && published_file(&path).exists()
            {
                ids.push((id, path));
            }
        }
    }
    ids.sort();
    ids.dedup_by(|a, b| a.0 == b.0);
    ids
}

/// Fetches a change's files (those not already here with the same bytes)
/// and writes them into the folder; the change and its plugin's file, to
/// load, if anything changed.
async fn write_change<A: Applier>(
    connection: &mut ConnectionManager,
    applier: &A,
    change: Change,
) -> Result<Option<(Change, PathBuf)>, SharedError> {
    if !Change::is_valid_id(&change.plugin)
        || change
            .files
            .keys()
            .any(|name| !Change::may_name(&change.plugin, name))
        || change
            .approvals
            .keys()
            .any(|name| !Change::may_name_approval(&change.plugin, name))
        || (!change.files.is_empty() && change.plugin_file().is_none())
    {
        tracing::warn!(plugin = %change.plugin, "a change in the shared store names files that are not its plugin's; skipped");
        return Ok(None);
    }
    let Some(folder) = applier.folder_of(&change.plugin) else {
        return Ok(None);
    };
    let Some(blobs) = differing(connection, &change, &change.files, &folder).await? else {
        return Ok(None);
    };
    let approvals = match applier.approvals_of(&change.plugin) {
        Some(dir) => match differing(connection, &change, &change.approvals, &dir).await? {
            Some(approvals) => approvals,
            None => return Ok(None),
        },
        None => BTreeMap::new(),
    };
    // A change this folder cannot take (a namespace folder made
    // read-only, a full disk) is said and skipped: the replica goes on
    // following the others, and its start-up copy tries it again.
    match applier.write(&change, blobs, approvals).await {
        Ok(file) => Ok(file.map(|file| (change, file))),
        Err(error) => {
            tracing::error!(plugin = %change.plugin, %error, "a shared change cannot be written into this folder; skipped");
            Ok(None)
        }
    }
}

/// The newest change's id in the stream (`0-0` when there is none).
async fn newest_change(connection: &mut ConnectionManager) -> Result<String, SharedError> {
    let newest: redis::streams::StreamRangeReply =
        connection.xrevrange_count(CHANGES, "+", "-", 1).await?;
    Ok(newest
        .ids
        .first()
        .map_or_else(|| "0-0".to_string(), |entry| entry.id.clone()))
}

/// The bytes of those of `files` whose copy in `dir` differs, from the
/// store; `None` (said) if one is missing there.
async fn differing(
    connection: &mut ConnectionManager,
    change: &Change,
    files: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, SharedError> {
    let mut blobs = BTreeMap::new();
    for (name, hash) in files {
        let here = tokio::fs::read(dir.join(name)).await.ok();
        if here
            .as_deref()
            .is_some_and(|bytes| content_hash(bytes) == *hash)
        {
            continue;
        }
        let bytes: Option<Vec<u8>> = connection.get(format!("{BLOB}{hash}")).await?;
        match bytes {
            Some(bytes) if content_hash(&bytes) == *hash => {
                blobs.insert(name.clone(), bytes);
            }
            _ => {
                tracing::warn!(plugin = %change.plugin, file = %name, "a file of a shared change is missing from the store; skipped");
                return Ok(None);
            }
        }
    }
    Ok(Some(blobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_compare_as_numbers() {
        assert!(stream_order("10-0") > stream_order("9-5"));
        assert!(stream_order("9-10") > stream_order("9-9"));
        assert!(is_stream_id("1700000000000-3"));
        assert!(!is_stream_id("1-"));
        assert!(!is_stream_id("$"));
    }
}
