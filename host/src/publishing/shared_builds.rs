//! Builds handed between the replicas sharing one store (`shared.rs`):
//! the Redis side of `builds/room.rs`. A build that finds no free slot on
//! the replica it was published on is offered here, and the first replica
//! with a free slot that builds its language takes it.
//!
//! What Redis holds, under the prefix `toolhost:`:
//! - `builds:offers:<language>`: the builds offered, oldest first (ids);
//! - `build:<id>`: an offered build (a [`Job`]), an hour at most;
//! - `build:<id>:taken`: the replica building it, for [`TAKEN_LASTS`]
//!   unless said again every [`TAKEN_REFRESH`] (a replica that died leaves
//!   it to expire, and the build is then made where it was published; one
//!   that stops takes it out);
//! - `build:<id>:cancel`: no one waits for it any more (a newer source
//!   replaced it, its publish was dropped): its builder stops it;
//! - `build:<id>:done` and `build:<id>:wasm`: what it made, kept
//!   [`DONE_LASTS`] until the replica that offered it reads them.
//!
//! Each replica that builds runs one taker: once it has a free slot, it
//! waits for an offer of a language it builds (`BLPOP`, on a connection of
//! its own), takes it in one script, and builds it in that slot, contained
//! and bounded as every build is (the component by this replica's
//! `--max-plugin-mib` too). While it waits it holds that slot, so a build
//! published here when it is the last one free is handed to the room too
//! (and taken by the first replica waiting, maybe this one). While Redis
//! is away the taker holds no slot. Nothing here is durable: a build is
//! what a publish that waits for its answer needs.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use crate::builds::Builds;
use crate::builds::recipe::Language;
use crate::builds::room::{Handed, Job, Polled, Room, Withdrawn};

const OFFERS: &str = "toolhost:builds:offers:";
const BUILD: &str = "toolhost:build:";

/// How long an offered build is kept (a replica that offered it and
/// stopped leaves it to expire).
const JOB_LASTS: Duration = Duration::from_secs(60 * 60);
/// How long a replica's word that it builds something lasts, and how often
/// it is said again.
const TAKEN_LASTS: Duration = Duration::from_secs(20);
const TAKEN_REFRESH: Duration = Duration::from_secs(2);
/// How long what a build made waits for the replica that offered it.
const DONE_LASTS: Duration = Duration::from_secs(5 * 60);
/// How long a taker waits for an offer at once (then asks again: a
/// connection that died is found so).
const BLOCK: Duration = Duration::from_secs(30);
/// How long a component may take to cross to or from the store.
const MOVE_TIMEOUT: Duration = Duration::from_secs(30);

fn offers_key(language: &str) -> String {
    format!("{OFFERS}{language}")
}

fn job_key(id: &str) -> String {
    format!("{BUILD}{id}")
}

fn taken_key(id: &str) -> String {
    format!("{BUILD}{id}:taken")
}

fn done_key(id: &str) -> String {
    format!("{BUILD}{id}:done")
}

fn wasm_key(id: &str) -> String {
    format!("{BUILD}{id}:wasm")
}

fn cancel_key(id: &str) -> String {
    format!("{BUILD}{id}:cancel")
}

/// How an offered build stands: `done` and what it made, `taken` and by
/// whom, `waiting`, or `lost`.
const POLL: &str = r"
local done = redis.call('GET', KEYS[1])
if done then return {'done', done} end
local taken = redis.call('GET', KEYS[2])
if taken then return {'taken', taken} end
if redis.call('LPOS', KEYS[3], ARGV[1]) then return {'waiting', ''} end
return {'lost', ''}
";

/// Takes an offered build back: 1 if it was still offered.
const WITHDRAW: &str = r"
if redis.call('LREM', KEYS[1], 0, ARGV[1]) > 0 then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
";

/// No one waits for a build: taken back if still offered, else its
/// builder is asked to stop.
const CANCEL: &str = r"
if redis.call('LREM', KEYS[1], 0, ARGV[1]) > 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
end
return 0
";

/// Says again that this replica builds it: 1 if it was cancelled instead.
const STILL: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
";

/// Takes a build just popped from the offers: its job, once marked taken
/// by this replica (nothing if it expired).
const TAKE: &str = r"
local job = redis.call('GET', KEYS[1])
if job then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) end
return job
";

/// What a build another replica ran made, as it is left for the replica
/// that offered it (its component beside it, at `build:<id>:wasm`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Done {
    /// The replica that built it.
    replica: String,
    handed: Handed,
}

/// The room of builds in the store the replicas share.
struct RedisRoom {
    shared: Arc<Shared>,
    /// For what a component crosses (slower than a publish's writes).
    moves: ConnectionManager,
    /// Told when the store could not be reached, so that the taker lets
    /// its slot go.
    unreachable: Arc<tokio::sync::Notify>,
}

/// Hands `builds`' builds that find no free slot to the replicas sharing
/// `shared`, and takes theirs (of the languages built here) while this
/// replica has a free slot, until `shutdown`; a component built here is at
/// most `max_plugin_bytes`.
pub(crate) fn share(
    shared: Arc<Shared>,
    builds: Arc<Builds>,
    max_plugin_bytes: u64,
    shutdown: CancellationToken,
) -> Result<(), redis::RedisError> {
    let client = redis::Client::open(shared.url.as_str())?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(super::shared::WRITE_TIMEOUT))
        .set_response_timeout(Some(MOVE_TIMEOUT))
        .set_number_of_retries(1);
    let moves = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
    let unreachable = Arc::new(tokio::sync::Notify::new());
    builds.share_with(Arc::new(RedisRoom {
        shared: shared.clone(),
        moves: moves.clone(),
        unreachable: unreachable.clone(),
    }));
    let languages = builds.languages_built();
    if languages.is_empty() {
        return Ok(());
    }
    let taker = Taker {
        shared,
        builds,
        client,
        moves,
        languages,
        unreachable,
        max_plugin_bytes,
        shutdown: shutdown.clone(),
    };
    let taking = tokio::spawn(taker.take());
    tokio::spawn(async move {
        shutdown.cancelled().await;
        taking.abort();
    });
    Ok(())
}

impl Room for RedisRoom {
    fn replica(&self) -> &str {
        self.shared.replica()
    }

    fn offer<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), ()>> {
        Box::pin(async move {
            let text = serde_json::to_string(job).expect("serialises");
            let mut connection = self.shared.connection();
            let offers = offers_key(&job.language);
            redis::pipe()
                .atomic()
                .pset_ex(job_key(&job.id), text, JOB_LASTS.as_millis() as u64)
                .ignore()
                .rpush(&offers, &job.id)
                .ignore()
                .pexpire(&offers, JOB_LASTS.as_millis() as i64)
                .ignore()
                .query_async::<()>(&mut connection)
                .await
                .map_err(|error| {
                    self.unreachable.notify_waiters();
                    tracing::debug!(%error, "a build cannot be offered to the room; it waits here");
                })
        })
    }

    fn withdraw<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Withdrawn> {
        Box::pin(async move {
            let mut connection = self.shared.connection();
            let withdrawn: redis::RedisResult<i64> = redis::Script::new(WITHDRAW)
                .key(offers_key(&job.language))
                .key(job_key(&job.id))
                .arg(&job.id)
                .invoke_async(&mut connection)
                .await;
            match withdrawn {
                Ok(1) => Withdrawn::Yes,
                Ok(_) => Withdrawn::Taken,
                Err(_) => Withdrawn::Unreachable,
            }
        })
    }

    fn cancel<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut connection = self.shared.connection();
            let _: redis::RedisResult<i64> = redis::Script::new(CANCEL)
                .key(offers_key(&job.language))
                .key(job_key(&job.id))
                .key(cancel_key(&job.id))
                .arg(&job.id)
                .arg(TAKEN_LASTS.as_millis() as u64 * 3)
                .invoke_async(&mut connection)
                .await;
        })
    }

    fn poll<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Polled> {
        Box::pin(async move {
            let mut connection = self.shared.connection();
            let stands: redis::RedisResult<(String, String)> = redis::Script::new(POLL)
                .key(done_key(&job.id))
                .key(taken_key(&job.id))
                .key(offers_key(&job.language))
                .arg(&job.id)
                .invoke_async(&mut connection)
                .await;
            match stands {
                Err(_) => Polled::Unreachable,
                Ok((stand, _)) if stand == "waiting" => Polled::Waiting,
                Ok((stand, replica)) if stand == "taken" => Polled::Taken(replica),
                Ok((stand, done)) if stand == "done" => self.collect(job, &done).await,
                Ok(_) => Polled::Lost,
            }
        })
    }
}

impl RedisRoom {
    /// What `job` made (`done`, and the component beside it), once; the
    /// store forgets it.
    async fn collect(&self, job: &Job, done: &str) -> Polled {
        let Ok(Done { replica, handed }) = serde_json::from_str::<Done>(done) else {
            tracing::warn!(plugin = %job.plugin, "what another replica built does not read");
            return Polled::Lost;
        };
        let mut connection = self.moves.clone();
        let wasm: redis::RedisResult<Option<Vec<u8>>> = if matches!(handed, Handed::Built { .. }) {
            // Read only within the bound a publish here has.
            let size: redis::RedisResult<u64> = redis::cmd("STRLEN")
                .arg(wasm_key(&job.id))
                .query_async(&mut connection)
                .await;
            match size {
                Ok(size) if size > job.max_output => {
                    return Polled::Done(Err(crate::builds::BuildError::TooLarge {
                        size,
                        limit: job.max_output,
                    }));
                }
                Ok(_) => {
                    redis::cmd("GET")
                        .arg(wasm_key(&job.id))
                        .query_async(&mut connection)
                        .await
                }
                Err(error) => Err(error),
            }
        } else {
            Ok(Some(Vec::new()))
        };
        let wasm = match wasm {
            Ok(Some(wasm)) => wasm,
            Ok(None) => return Polled::Lost,
            Err(_) => return Polled::Unreachable,
        };
        let _: redis::RedisResult<()> = redis::pipe()
            .del(&[
                job_key(&job.id),
                taken_key(&job.id),
                done_key(&job.id),
                wasm_key(&job.id),
            ])
            .query_async(&mut connection)
            .await;
        let elsewhere = (replica != self.shared.replica()).then_some(replica.as_str());
        match handed.outcome(wasm, elsewhere) {
            Ok(outcome) => Polled::Done(outcome),
            Err(declined) => Polled::Declined(declined),
        }
    }
}

/// This replica's taker of the room's builds.
struct Taker {
    shared: Arc<Shared>,
    builds: Arc<Builds>,
    client: redis::Client,
    moves: ConnectionManager,
    /// The languages built here, in the order the offers are asked for
    /// (turned each time, so that no language waits behind another).
    languages: Vec<Language>,
    unreachable: Arc<tokio::sync::Notify>,
    max_plugin_bytes: u64,
    shutdown: CancellationToken,
}

impl Taker {
    /// While this replica has a free slot, takes the oldest build offered
    /// in a language built here and builds it in that slot.
    async fn take(mut self) {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(super::shared::WRITE_TIMEOUT))
            .set_response_timeout(Some(BLOCK + Duration::from_secs(10)));
        let mut waiting: Option<MultiplexedConnection> = None;
        loop {
            if waiting.is_none() {
                // Connected before a slot is held: while Redis is away, no
                // slot is.
                match self
                    .client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                {
                    Ok(connection) => waiting = Some(connection),
                    Err(error) => {
                        tracing::debug!(%error, "cannot wait for the room's builds now");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        continue;
                    }
                }
            }
            let slot = self.builds.slot().await;
            self.languages.rotate_left(1);
            let keys: Vec<String> = self
                .languages
                .iter()
                .map(|l| offers_key(l.as_str()))
                .collect();
            let connection = waiting.as_mut().expect("connected above");
            let mut blpop = redis::cmd("BLPOP");
            blpop.arg(&keys).arg(BLOCK.as_secs());
            let popped = tokio::select! {
                popped = blpop.query_async::<Option<(String, String)>>(connection) => popped,
                // A build here found the store away: this slot is let go.
                () = self.unreachable.notified() => Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "the store is away",
                ))),
            };
            let id = match popped {
                Ok(Some((_, id))) => id,
                Ok(None) => continue,
                Err(error) => {
                    tracing::debug!(%error, "cannot wait for the room's builds now");
                    waiting = None;
                    drop(slot);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            let mut connection = self.shared.connection();
            let taken: redis::RedisResult<Option<String>> = redis::Script::new(TAKE)
                .key(job_key(&id))
                .key(taken_key(&id))
                .arg(self.shared.replica())
                .arg(TAKEN_LASTS.as_millis() as u64)
                .invoke_async(&mut connection)
                .await;
            let job = match taken.map(|text| text.map(|text| serde_json::from_str::<Job>(&text))) {
                Ok(Some(Ok(job))) if job.id == id => job,
                Ok(None) => continue,
                Ok(Some(_)) => {
                    tracing::warn!(%id, "a build offered in the shared store does not read; skipped");
                    continue;
                }
                // The one that offered it finds it lost, and builds it.
                Err(_) => continue,
            };
            tracing::info!(plugin = %job.plugin, origin = %job.origin, "building a build another replica offered");
            tokio::spawn(build_taken(
                self.shared.clone(),
                self.builds.clone(),
                self.moves.clone(),
                job,
                slot,
                self.max_plugin_bytes,
                self.shutdown.clone(),
            ));
        }
    }
}

/// Builds `job` in `slot`, saying so while it runs (and stopping it if no
/// one waits for it any more, or this replica stops), and leaves what it
/// made for the replica that offered it.
async fn build_taken(
    shared: Arc<Shared>,
    builds: Arc<Builds>,
    moves: ConnectionManager,
    job: Job,
    slot: tokio::sync::OwnedSemaphorePermit,
    max_plugin_bytes: u64,
    shutdown: CancellationToken,
) {
    let cancelled = CancellationToken::new();
    let saying = tokio::spawn({
        let mut connection = shared.connection();
        let (taken, cancel) = (taken_key(&job.id), cancel_key(&job.id));
        let (replica, cancelled) = (shared.replica().to_string(), cancelled.clone());
        async move {
            loop {
                tokio::time::sleep(TAKEN_REFRESH).await;
                let still: redis::RedisResult<i64> = redis::Script::new(STILL)
                    .key(&taken)
                    .key(&cancel)
                    .arg(&replica)
                    .arg(TAKEN_LASTS.as_millis() as u64)
                    .invoke_async(&mut connection)
                    .await;
                if matches!(still, Ok(1)) {
                    cancelled.cancel();
                    return;
                }
            }
        }
    });
    let max_output = job.max_output.min(max_plugin_bytes);
    let outcome = tokio::select! {
        outcome = builds.build_handed(&job, slot, max_output) => Some(outcome),
        () = cancelled.cancelled() => None,
        () = shutdown.cancelled() => None,
    };
    saying.abort();
    let Some(outcome) = outcome else {
        // Stopped (the build's processes killed as it was dropped): the
        // replica that offered it, if it still waits, builds it itself.
        tracing::info!(plugin = %job.plugin, "a build taken from the room was stopped");
        let mut connection = shared.connection();
        let _: redis::RedisResult<()> = redis::pipe()
            .del(&[taken_key(&job.id), cancel_key(&job.id)])
            .query_async(&mut connection)
            .await;
        return;
    };
    let done = serde_json::to_string(&Done {
        replica: shared.replica().to_string(),
        handed: Handed::of(&outcome),
    })
    .expect("serialises");
    let lasts = DONE_LASTS.as_millis() as u64;
    let mut connection = moves;
    // Left for the replica that offered it, which waits as long as this
    // replica said it builds: tried again while that lasts.
    for _ in 0..3 {
        let mut pipe = redis::pipe();
        pipe.atomic();
        if let Ok(built) = &outcome {
            pipe.pset_ex(wasm_key(&job.id), built.wasm.as_slice(), lasts)
                .ignore();
        }
        pipe.pset_ex(done_key(&job.id), &done, lasts).ignore();
        match pipe.query_async::<()>(&mut connection).await {
            Ok(()) => break,
            Err(error) => {
                tracing::warn!(%error, plugin = %job.plugin, "what a build made cannot be left in the shared store yet");
                tokio::time::sleep(TAKEN_REFRESH).await;
            }
        }
    }
}
