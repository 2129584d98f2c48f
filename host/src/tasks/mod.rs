//! Long calls as durable tasks (MCP's tasks extension, REST's
//! `Prefer: respond-async`): each task's record, where records live (a
//! folder under the server's state, or Redis for replicas: `store.rs`),
//! and each task's run on this server. What a run does is the front's: it
//! hands [`Tasks::run`] a future that calls the tool and says how it ended
//! ([`RunEnd`]); this room knows nothing of MCP or HTTP.
//!
//! A task exists durably before its creator hears of it. It runs where it
//! was made; an input it needs (the plugin asked its client) parks it in
//! `input_required` with no run held, and the answer (`tasks/update`, on
//! any replica) runs the call again there, from the start, with every
//! answer so far. Cancelling stops a run here at once, and on another
//! replica within [`CANCEL_POLL`]. A task whose run is lost (its server
//! stopped, or its replica's heartbeat ended) is `failed` with that
//! reason the next time anyone looks: never lost, never `working` for
//! ever. Every record expires `ttl` after it was made.

mod record;
mod store;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub(crate) use self::record::{RunEnd, Status, TaskRecord};
pub(crate) use self::store::{Store, StoreError};

/// How long a task is kept after it was made, unless the server says.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);
/// How often a run elsewhere is checked for a cancellation (shared store).
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(250);

/// A run of a task's call: given the record (its arguments, answers,
/// the client's capabilities), how it ended.
pub(crate) type Run = Pin<Box<dyn Future<Output = RunEnd> + Send>>;

/// How many tasks one person may have run at once on one server; one more
/// is refused (busy) rather than queued.
pub(crate) const MAX_RUNNING_PER_PERSON: usize = 8;
/// How many tasks one person may make on one server within a task's
/// lifetime (`ttl`): what bounds the records kept.
pub(crate) const MAX_KEPT_PER_PERSON: usize = 512;

/// Why a task request is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// No such task for this person (or it expired, or its tool is no
    /// longer theirs to see).
    #[error("no task {0:?} is known here for you; it may have expired")]
    Unknown(String),
    /// The person holds as many tasks as they may.
    #[error("{0}")]
    Busy(String),
    /// An answer is not its request's kind of result: refused, and
    /// nothing written.
    #[error("{0}")]
    BadAnswer(String),
    #[error("the task store failed: {0}")]
    Store(#[from] StoreError),
}

/// Who asks, and which tools they see now (a task of a tool taken from
/// their set is no longer theirs to read).
pub(crate) struct Asker<'a> {
    pub(crate) owner: Option<&'a str>,
    pub(crate) sees_tool: &'a (dyn Fn(&str) -> bool + Sync),
}

/// Whether an answer fits the request it answers (by the request's
/// method): the front's rule, and the method's name when it does not.
pub(crate) type AnswerCheck<'a> =
    &'a (dyn Fn(&str, &Value) -> Result<(), crate::runtime::NotAResult> + Sync);

#[derive(Default)]
struct Running {
    /// Runs on this server: task id to its run's generation and token.
    runs: HashMap<String, (u64, CancellationToken)>,
    /// How many of them each person has.
    per_person: HashMap<Option<String>, usize>,
    /// When each person's tasks made here expire, oldest first.
    kept: HashMap<Option<String>, std::collections::VecDeque<u64>>,
    generation: u64,
}

/// The right to run a task here: while held, the task counts as running
/// on this server and its person's share is taken; dropped (the run ended,
/// even by a panic), both are given back.
pub(crate) struct RunClaim {
    tasks: Arc<Tasks>,
    id: String,
    owner: Option<String>,
    generation: u64,
    token: CancellationToken,
}

impl Drop for RunClaim {
    fn drop(&mut self) {
        let mut running = self.tasks.lock_running();
        if running
            .runs
            .get(&self.id)
            .is_some_and(|(generation, _)| *generation == self.generation)
        {
            running.runs.remove(&self.id);
        }
        if let Some(count) = running.per_person.get_mut(&self.owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.per_person.remove(&self.owner);
            }
        }
    }
}

/// The tasks of this server.
pub(crate) struct Tasks {
    store: Store,
    /// This server's name among replicas (its runs are marked with it).
    replica: String,
    running: Mutex<Running>,
    pub(crate) ttl: Duration,
}

impl Tasks {
    pub(crate) fn new(store: Store, ttl: Duration) -> Arc<Self> {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).expect("the system's randomness");
        Arc::new(Tasks {
            replica: hex(&id),
            store,
            running: Mutex::default(),
            ttl,
        })
    }

    /// Makes a task, durably, before anyone hears of it: `working`, to be
    /// run here with the claim.
    pub(crate) async fn create(
        self: &Arc<Self>,
        owner: Option<&str>,
        tool: &str,
        arguments: Map<String, Value>,
        capabilities: Value,
        answers: Map<String, Value>,
    ) -> Result<(TaskRecord, RunClaim), TaskError> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).expect("the system's randomness");
        let record = TaskRecord::new(
            hex(&id),
            owner.map(str::to_string),
            tool.to_string(),
            arguments,
            capabilities,
            answers,
            self.ttl,
            self.replica.clone(),
        );
        // Counted as running here before anyone can read it; a refusal
        // (past either limit, or the store's) counts nothing.
        let claim = self.claim(&record.id, owner)?;
        self.may_keep(owner)?;
        self.store.beat_once(&self.replica).await;
        self.store.create(&record).await?;
        self.keep(owner, record.expires_ms());
        Ok((record, claim))
    }

    /// The task `id` as `asker` may see it: a run lost with its server is
    /// `failed` from now on.
    pub(crate) async fn get(&self, id: &str, asker: &Asker<'_>) -> Result<TaskRecord, TaskError> {
        let record = self.owned(id, asker).await?;
        if record.status == Status::Working && !self.runner_alive(&record).await? {
            return self
                .store
                .update(id, |record| {
                    let lost = record.status == Status::Working;
                    if lost {
                        record.fail_lost();
                    }
                    lost
                })
                .await?
                .ok_or_else(|| TaskError::Unknown(id.into()));
        }
        Ok(record)
    }

    /// Answers some of what the task waits for; once nothing is missing,
    /// the record to run again here, with its claim; else `None`. Answers
    /// to what it does not wait for are ignored.
    pub(crate) async fn answer(
        self: &Arc<Self>,
        id: &str,
        asker: &Asker<'_>,
        responses: Map<String, Value>,
        check: AnswerCheck<'_>,
    ) -> Result<Option<(TaskRecord, RunClaim)>, TaskError> {
        let record = self.owned(id, asker).await?;
        if record.status != Status::InputRequired {
            return Ok(None);
        }
        let waiting = record.input_requests.clone().unwrap_or_default();
        for (key, answer) in &responses {
            let Some(method) = waiting
                .get(key)
                .and_then(|request| request["method"].as_str())
            else {
                continue;
            };
            check(method, answer).map_err(|problem| {
                TaskError::BadAnswer(format!("inputResponses.{key}: {problem}"))
            })?;
        }
        // Claimed before the store says it runs here, so that no reader
        // finds it running nowhere.
        let claim = self.claim(id, asker.owner)?;
        self.store.beat_once(&self.replica).await;
        let replica = self.replica.clone();
        let mut resume = false;
        let record = self
            .store
            .update(id, |record| {
                resume = record.answer(responses.clone(), &replica);
                resume || record.status == Status::InputRequired
            })
            .await?
            .ok_or_else(|| TaskError::Unknown(id.into()))?;
        Ok(resume.then_some((record, claim)))
    }

    /// Cancels the task: at once if it runs here, within [`CANCEL_POLL`]
    /// elsewhere. A task already ended stays as it ended (and nothing is
    /// written).
    pub(crate) async fn cancel(&self, id: &str, asker: &Asker<'_>) -> Result<(), TaskError> {
        let record = self.owned(id, asker).await?;
        if record.status.is_terminal() {
            return Ok(());
        }
        self.store
            .update(id, |record| {
                let live = !record.status.is_terminal();
                if live {
                    record.set_status(Status::Cancelled);
                }
                live
            })
            .await?;
        if let Some((_, token)) = self.lock_running().runs.get(id) {
            token.cancel();
        }
        Ok(())
    }

    /// Runs `run` for `record` on this server with its claim, and records
    /// how it ended; a cancellation (here, or marked in the store by
    /// another replica), or another server's finding that it was lost,
    /// drops the run, which stops the call.
    pub(crate) fn run(self: &Arc<Self>, record: &TaskRecord, claim: RunClaim, run: Run) {
        let tasks = self.clone();
        let id = record.id.clone();
        tokio::spawn(async move {
            let token = claim.token.clone();
            let ended = tokio::select! {
                ended = run => Some(ended),
                () = token.cancelled() => None,
                () = tasks.watch_status(&id) => None,
                () = tasks.store.beat(&tasks.replica) => None,
            };
            if let Some(ended) = ended {
                let written = tasks
                    .store
                    .update(&id, |record| {
                        let working = record.status == Status::Working;
                        if working {
                            record.end(ended.clone());
                        }
                        working
                    })
                    .await;
                if let Err(error) = written {
                    tracing::warn!(task = %id, %error, "the task's end could not be recorded");
                }
            }
            drop(claim);
        });
    }

    /// Ends when the store says the task is no longer working (cancelled
    /// by another replica, or found lost); never with a store only this
    /// server uses.
    async fn watch_status(&self, id: &str) {
        if !self.store.is_shared() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(CANCEL_POLL).await;
            if let Ok(Some(record)) = self.store.get(id).await
                && record.status != Status::Working
            {
                return;
            }
        }
    }

    async fn owned(&self, id: &str, asker: &Asker<'_>) -> Result<TaskRecord, TaskError> {
        match self.store.get(id).await? {
            Some(record)
                if record.owner.as_deref() == asker.owner
                    && !record.expired()
                    && (asker.sees_tool)(&record.tool) =>
            {
                Ok(record)
            }
            _ => Err(TaskError::Unknown(id.into())),
        }
    }

    /// Whether `owner` may make one more task here.
    fn may_keep(&self, owner: Option<&str>) -> Result<(), TaskError> {
        let now = record::now_ms();
        let mut running = self.lock_running();
        let kept = running.kept.entry(owner.map(str::to_string)).or_default();
        while kept.front().is_some_and(|expires| *expires <= now) {
            kept.pop_front();
        }
        if kept.len() >= MAX_KEPT_PER_PERSON {
            return Err(TaskError::Busy(format!(
                "you made {MAX_KEPT_PER_PERSON} tasks on this server within a task's lifetime; \
                 wait for them to expire"
            )));
        }
        Ok(())
    }

    /// Counts a task made by `owner` here, expiring at `expires_ms`.
    fn keep(&self, owner: Option<&str>, expires_ms: u64) {
        self.lock_running()
            .kept
            .entry(owner.map(str::to_string))
            .or_default()
            .push_back(expires_ms);
    }

    fn claim(self: &Arc<Self>, id: &str, owner: Option<&str>) -> Result<RunClaim, TaskError> {
        let owner = owner.map(str::to_string);
        let mut running = self.lock_running();
        let count = running.per_person.get(&owner).copied().unwrap_or(0);
        if count >= MAX_RUNNING_PER_PERSON {
            return Err(TaskError::Busy(format!(
                "you have {MAX_RUNNING_PER_PERSON} tasks running on this server, the most one \
                 person may; wait for one to end, or cancel one"
            )));
        }
        running.generation += 1;
        let generation = running.generation;
        let token = CancellationToken::new();
        running
            .runs
            .insert(id.to_string(), (generation, token.clone()));
        *running.per_person.entry(owner.clone()).or_default() += 1;
        Ok(RunClaim {
            tasks: self.clone(),
            id: id.to_string(),
            owner,
            generation,
            token,
        })
    }

    /// Whether the server running `record` still does. A run changed
    /// within a heartbeat's span counts as alive (its server may not have
    /// beaten yet).
    async fn runner_alive(&self, record: &TaskRecord) -> Result<bool, TaskError> {
        if record.runner == self.replica && self.lock_running().runs.contains_key(&record.id) {
            return Ok(true);
        }
        if record::now_ms().saturating_sub(record.updated_ms)
            < store::HEARTBEAT_TTL.as_millis() as u64
        {
            return Ok(true);
        }
        if record.runner == self.replica {
            return Ok(false);
        }
        Ok(self.store.alive(&record.runner).await?)
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everything(_: &str) -> bool {
        true
    }

    #[tokio::test]
    async fn one_person_runs_a_bounded_number_of_tasks_and_sees_only_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::new(
            Store::folder(dir.path().join("tasks")).unwrap(),
            DEFAULT_TTL,
        );
        let make = |owner: Option<&'static str>| {
            let tasks = tasks.clone();
            async move {
                tasks
                    .create(owner, "slow", Map::new(), Value::Null, Map::new())
                    .await
            }
        };
        let mut claims = Vec::new();
        for _ in 0..MAX_RUNNING_PER_PERSON {
            claims.push(make(Some("ada")).await.unwrap());
        }
        assert!(matches!(make(Some("ada")).await, Err(TaskError::Busy(_))));
        let kept = |tasks: &Tasks| tasks.lock_running().kept[&Some("ada".to_string())].len();
        assert_eq!(
            kept(&tasks),
            MAX_RUNNING_PER_PERSON,
            "a refusal counts nothing"
        );
        // Another person is not held back by her.
        let (bobs, _bob_claim) = make(Some("bob")).await.unwrap();
        // A run that ends gives its share back.
        let (first, claim) = claims.remove(0);
        drop(claim);
        make(Some("ada")).await.unwrap();

        let ada = Asker {
            owner: Some("ada"),
            sees_tool: &everything,
        };
        assert!(tasks.get(&first.id, &ada).await.is_ok());
        assert!(matches!(
            tasks.get(&bobs.id, &ada).await,
            Err(TaskError::Unknown(_))
        ));
        let hidden = Asker {
            owner: Some("ada"),
            sees_tool: &|tool| tool != "slow",
        };
        assert!(matches!(
            tasks.get(&first.id, &hidden).await,
            Err(TaskError::Unknown(_))
        ));
        for id in ["../../etc/passwd", "0123456789ABCDEF0123456789ABCDEF", ""] {
            assert!(matches!(
                tasks.get(id, &ada).await,
                Err(TaskError::Unknown(_))
            ));
        }
        // Cancelling an ended task writes nothing.
        tasks.cancel(&first.id, &ada).await.unwrap();
        let version = tasks.get(&first.id, &ada).await.unwrap().version;
        tasks.cancel(&first.id, &ada).await.unwrap();
        assert_eq!(tasks.get(&first.id, &ada).await.unwrap().version, version);
    }
}
