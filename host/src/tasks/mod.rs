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
//!
//! What records take is bounded where they live (`store.rs`), in bytes
//! and in records, per person and in all, across restarts and replicas: a
//! task past a bound is refused (busy) with nothing written, an answer
//! too, and a run whose result would pass one ends the task failed,
//! saying so. A task is its maker's: only they read, answer or cancel it,
//! and they read and answer it only while its tool is in their set, but
//! cancel it always (a task goes on running when its tool leaves their
//! set, so its maker can always stop it).

mod bounds;
mod record;
mod store;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use self::bounds::{Bound, Growth};

pub(crate) use self::record::{RunEnd, Status, TaskRecord};
pub(crate) use self::store::{Store, StoreError};

/// How long a task is kept after it was made, unless the server says.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);
/// How long a task's result is kept at least after a run that took all
/// its deadline (`Tasks::ttl_for`).
const KEPT_AFTER_A_RUN: Duration = Duration::from_secs(600);

/// How long a task's run may take, by default (`serve --task-timeout-secs`):
/// its own deadline, not a call's (a policy's `timeout_ms`, 10 s unless
/// it says otherwise), which a task is made to outlast.
pub(crate) const DEFAULT_RUN_DEADLINE: Duration = Duration::from_secs(15 * 60);
/// How often a run elsewhere is checked for a cancellation (shared store).
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(250);

/// A run of a task's call: given the record (its arguments, answers,
/// the client's capabilities), how it ended.
pub(crate) type Run = Pin<Box<dyn Future<Output = RunEnd> + Send>>;

/// How many tasks one person may have run at once on one server; one more
/// is refused (busy) rather than queued. (What their records may take is
/// the store's bound: `bounds::MAX_KEPT_PER_PERSON`,
/// `bounds::MAX_BYTES_PER_PERSON`, `bounds::MAX_BYTES`.)
pub(crate) const MAX_RUNNING_PER_PERSON: usize = 8;

/// Why a task request is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// No such task for this person (or it expired, or its tool is no
    /// longer theirs to see, for anything but a cancellation).
    #[error("no task {0:?} is known here for you; it may have expired")]
    Unknown(String),
    /// The person runs or keeps as many tasks as they may, or their
    /// records (or everyone's) would take more than they may: refused,
    /// and nothing written.
    #[error("{0}")]
    Busy(String),
    /// An answer is not its request's kind of result: refused, and
    /// nothing written.
    #[error("{0}")]
    BadAnswer(String),
    #[error("the task store failed: {0}")]
    Store(StoreError),
}

impl From<StoreError> for TaskError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Full(bound) => TaskError::Busy(bound.to_string()),
            error => TaskError::Store(error),
        }
    }
}

/// Who asks, and which tools they see now (a task of a tool taken from
/// their set is no longer theirs to read or answer, though still theirs
/// to cancel).
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
    /// How long one run of a task's call may take: this, or the call
    /// deadline of its tool's policy if that is longer.
    pub(crate) run_deadline: Duration,
}

impl Tasks {
    #[cfg(test)]
    pub(crate) fn new(store: Store, ttl: Duration) -> Arc<Self> {
        Self::with_run_deadline(store, ttl, DEFAULT_RUN_DEADLINE)
    }

    pub(crate) fn with_run_deadline(
        store: Store,
        ttl: Duration,
        run_deadline: Duration,
    ) -> Arc<Self> {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).expect("the system's randomness");
        Arc::new(Tasks {
            replica: hex(&id),
            store,
            running: Mutex::default(),
            ttl,
            run_deadline,
        })
    }

    /// Makes a task, durably, before anyone hears of it: `working`, to be
    /// run here with the claim. Refused (busy), with nothing written, past
    /// the runs one person may have here or what their records may take.
    /// How long a record lives whose runs may take `run_for`: `ttl`, or
    /// long enough for its result to be read for ten minutes (or `ttl`, if
    /// shorter) after a run that took all of it.
    fn ttl_for(&self, run_for: Duration) -> Duration {
        self.ttl.max(run_for + KEPT_AFTER_A_RUN.min(self.ttl))
    }

    pub(crate) async fn create(
        self: &Arc<Self>,
        owner: Option<&str>,
        tool: &str,
        arguments: Map<String, Value>,
        capabilities: Value,
        answers: Map<String, Value>,
        run_for: Duration,
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
            self.ttl_for(run_for),
            self.replica.clone(),
        );
        // Counted as running here before anyone can read it; a refusal
        // (past the runs here, or the store's bounds) counts nothing.
        let claim = self.claim(&record.id, owner)?;
        self.store.beat_once(&self.replica).await;
        self.store.create(&record).await?;
        Ok((record, claim))
    }

    /// The task `id` as `asker` may see it: a run lost with its server is
    /// `failed` from now on.
    pub(crate) async fn get(&self, id: &str, asker: &Asker<'_>) -> Result<TaskRecord, TaskError> {
        let record = self.owned(id, asker).await?;
        if record.status == Status::Working && !self.runner_alive(&record).await? {
            return self
                .store
                .update(id, Growth::Free, |record| {
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
    /// to what it does not wait for are ignored; answers that would pass
    /// what the person's records may take are refused (busy).
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
            .update(id, Growth::Bounded, |record| {
                resume = record.answer(responses.clone(), &replica);
                resume || record.status == Status::InputRequired
            })
            .await?
            .ok_or_else(|| TaskError::Unknown(id.into()))?;
        Ok(resume.then_some((record, claim)))
    }

    /// Cancels the task: at once if it runs here, within [`CANCEL_POLL`]
    /// elsewhere. A task already ended stays as it ended (and nothing is
    /// written). Its maker may cancel it whether or not its tool is still
    /// in their set; the task as it is then, without what it holds (its
    /// result, error, or what it waits for) when the tool is not.
    pub(crate) async fn cancel(
        &self,
        id: &str,
        asker: &Asker<'_>,
    ) -> Result<TaskRecord, TaskError> {
        let mut record = self.mine(id, asker.owner).await?;
        if !record.status.is_terminal() {
            record = self
                .store
                .update(id, Growth::Free, |record| {
                    let live = !record.status.is_terminal();
                    if live {
                        record.set_status(Status::Cancelled);
                    }
                    live
                })
                .await?
                .ok_or_else(|| TaskError::Unknown(id.into()))?;
            if let Some((_, token)) = self.lock_running().runs.get(id) {
                token.cancel();
            }
        }
        if (asker.sees_tool)(&record.tool) {
            Ok(record)
        } else {
            Ok(record.without_payload())
        }
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
                let finish = |ended: RunEnd| {
                    move |record: &mut TaskRecord| {
                        let working = record.status == Status::Working;
                        if working {
                            record.end(ended.clone());
                        }
                        working
                    }
                };
                let mut written = tasks
                    .store
                    .update(&id, Growth::Bounded, finish(ended))
                    .await;
                if let Err(StoreError::Full(bound)) = written {
                    // What it ended with would pass a bound: it ends
                    // failed, saying so, and that is always written.
                    written = tasks
                        .store
                        .update(&id, Growth::Free, finish(not_kept(bound)))
                        .await;
                }
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

    /// The task `id` if `asker` may read and answer it: theirs, and its
    /// tool still in their set.
    async fn owned(&self, id: &str, asker: &Asker<'_>) -> Result<TaskRecord, TaskError> {
        let record = self.mine(id, asker.owner).await?;
        if !(asker.sees_tool)(&record.tool) {
            return Err(TaskError::Unknown(id.into()));
        }
        Ok(record)
    }

    /// The task `id` if `owner` made it (and it has not expired), whatever
    /// their set holds now.
    async fn mine(&self, id: &str, owner: Option<&str>) -> Result<TaskRecord, TaskError> {
        match self.store.get(id).await? {
            Some(record) if record.owner.as_deref() == owner && !record.expired() => Ok(record),
            _ => Err(TaskError::Unknown(id.into())),
        }
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

/// How a run ends whose result (or what it asks) would pass `bound`: the
/// task fails, saying why.
fn not_kept(bound: Bound) -> RunEnd {
    let message = format!("the task's result was not kept: {bound}");
    RunEnd::Failed(json!({
        "code": -32603,
        "message": message,
        "data": { "code": "BUSY", "message": message },
    }))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::bounds::Limits;

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
                    .create(
                        owner,
                        "slow",
                        Map::new(),
                        Value::Null,
                        Map::new(),
                        DEFAULT_RUN_DEADLINE,
                    )
                    .await
            }
        };
        let mut claims = Vec::new();
        for _ in 0..MAX_RUNNING_PER_PERSON {
            claims.push(make(Some("ada")).await.unwrap());
        }
        assert!(matches!(make(Some("ada")).await, Err(TaskError::Busy(_))));
        let records = std::fs::read_dir(dir.path().join("tasks")).unwrap().count();
        assert_eq!(records, MAX_RUNNING_PER_PERSON, "a refusal writes nothing");
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

    #[tokio::test]
    async fn an_owner_cancels_their_task_after_its_tool_left_their_set() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::new(
            Store::folder(dir.path().join("tasks")).unwrap(),
            DEFAULT_TTL,
        );
        let (record, claim) = tasks
            .create(
                Some("ada"),
                "slow",
                Map::new(),
                Value::Null,
                Map::new(),
                DEFAULT_RUN_DEADLINE,
            )
            .await
            .unwrap();
        let hidden = Asker {
            owner: Some("ada"),
            sees_tool: &|tool| tool != "slow",
        };
        let bob = Asker {
            owner: Some("bob"),
            sees_tool: &everything,
        };
        // Another person still cancels nothing of it.
        assert!(matches!(
            tasks.cancel(&record.id, &bob).await,
            Err(TaskError::Unknown(_))
        ));
        assert!(!claim.token.is_cancelled());
        // Its maker does, though its tool left her set: the run is stopped
        // and the record says so; what it holds stays hidden from her.
        tasks.cancel(&record.id, &hidden).await.unwrap();
        assert!(claim.token.is_cancelled(), "the run goes on");
        let ada = Asker {
            owner: Some("ada"),
            sees_tool: &everything,
        };
        assert_eq!(
            tasks.get(&record.id, &ada).await.unwrap().status,
            Status::Cancelled
        );
        assert!(matches!(
            tasks.get(&record.id, &hidden).await,
            Err(TaskError::Unknown(_))
        ));

        // Cancelling one that ended changes nothing, and answers it
        // without its result while the tool is not in her set.
        let (record, claim) = tasks
            .create(
                Some("ada"),
                "slow",
                Map::new(),
                Value::Null,
                Map::new(),
                DEFAULT_RUN_DEADLINE,
            )
            .await
            .unwrap();
        let result = serde_json::json!({ "content": [{ "type": "text", "text": "secret" }] });
        tasks.run(
            &record,
            claim,
            Box::pin(async move { RunEnd::Completed(result) }),
        );
        while tasks.get(&record.id, &ada).await.unwrap().status == Status::Working {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let seen = tasks.cancel(&record.id, &hidden).await.unwrap();
        assert_eq!(seen.status, Status::Completed);
        assert!(
            !serde_json::to_string(&seen.wire(true))
                .unwrap()
                .contains("secret")
        );
        let seen = tasks.cancel(&record.id, &ada).await.unwrap();
        assert!(
            serde_json::to_string(&seen.wire(true))
                .unwrap()
                .contains("secret")
        );
    }

    /// Arguments of `bytes` bytes and a few more.
    fn arguments_of(bytes: usize) -> Map<String, Value> {
        let mut arguments = Map::new();
        arguments.insert("label".into(), Value::String("x".repeat(bytes)));
        arguments
    }

    /// Makes `owner`'s tasks of 4 MiB of arguments each until one is
    /// refused (at most 17, 68 MiB): how many were kept, and the refusal.
    async fn fill(tasks: &Arc<Tasks>, owner: &str) -> (usize, TaskError) {
        for kept in 0..17 {
            match tasks
                .create(
                    Some(owner),
                    "echo",
                    arguments_of(4 << 20),
                    Value::Null,
                    Map::new(),
                    DEFAULT_RUN_DEADLINE,
                )
                .await
            {
                Ok((_, claim)) => drop(claim),
                Err(error) => return (kept, error),
            }
        }
        panic!("{owner} kept 17 tasks of 4 MiB each: 68 MiB");
    }

    /// The task ends with a result of `mib` MiB; how it ended.
    async fn end_with_result_of(tasks: &Arc<Tasks>, owner: &str, mib: usize) -> TaskRecord {
        let (record, claim) = tasks
            .create(
                Some(owner),
                "echo",
                arguments_of(1 << 20),
                Value::Null,
                Map::new(),
                DEFAULT_RUN_DEADLINE,
            )
            .await
            .unwrap();
        let text = "x".repeat(mib << 20);
        let result = serde_json::json!({ "content": [{ "type": "text", "text": text }] });
        tasks.run(
            &record,
            claim,
            Box::pin(async move { RunEnd::Completed(result) }),
        );
        let asker = Asker {
            owner: Some(owner),
            sees_tool: &everything,
        };
        for _ in 0..200 {
            let now = tasks.get(&record.id, &asker).await.unwrap();
            if now.status != Status::Working {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the task did not end");
    }

    /// What a person's records may take, checked where `tasks` keeps them
    /// and again where `again` does (the same store after a restart, or
    /// another replica): 64 MiB of arguments and results together; past
    /// it a task is refused (naming the limit), and a result that would
    /// pass it is not kept.
    async fn a_persons_records_are_bounded_in_bytes(
        tasks: Arc<Tasks>,
        again: impl AsyncFnOnce() -> Store,
    ) {
        let (kept, refused) = fill(&tasks, "ada").await;
        assert_eq!(kept, 15, "15 records of 4 MiB fit in 64 MiB, not 16");
        let TaskError::Busy(message) = refused else {
            panic!("not busy: {refused}");
        };
        assert!(message.contains("64 MiB"), "{message}");
        // Another person is not held back by her.
        let (_, claim) = tasks
            .create(
                Some("bob"),
                "echo",
                arguments_of(4 << 20),
                Value::Null,
                Map::new(),
                DEFAULT_RUN_DEADLINE,
            )
            .await
            .unwrap();
        drop(claim);
        // A task of hers that fits, whose result would not: failed, with
        // why, and the result not kept.
        let ended = end_with_result_of(&tasks, "ada", 4).await;
        assert_eq!(ended.status, Status::Failed, "{:?}", ended.result.is_some());
        assert!(ended.result.is_none());
        let why = ended.error.unwrap()["message"].to_string();
        assert!(why.contains("64 MiB"), "{why}");

        let again = Tasks::new(again().await, DEFAULT_TTL);
        assert!(matches!(fill(&again, "ada").await, (0, TaskError::Busy(_))));
        assert_eq!(fill(&again, "bob").await.0, 14);
    }

    #[tokio::test]
    async fn a_persons_records_are_bounded_in_bytes_in_a_folder_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks");
        let tasks = Tasks::new(Store::folder(folder.clone()).unwrap(), DEFAULT_TTL);
        let files = || std::fs::read_dir(&folder).unwrap().count();
        let before = files();
        a_persons_records_are_bounded_in_bytes(tasks, async || {
            assert_eq!(files(), before + 15 + 1 + 1, "a refusal writes nothing");
            Store::folder(folder.clone()).unwrap()
        })
        .await;
    }

    /// Debian's redis-server on a loopback port, keeping nothing on disk;
    /// stopped on drop.
    struct RedisServer {
        child: std::process::Child,
        url: String,
        _dir: tempfile::TempDir,
    }

    impl Drop for RedisServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl RedisServer {
        fn start() -> RedisServer {
            let dir = tempfile::tempdir().unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("running redis-server (make test installs Debian's package)");
            let server = RedisServer {
                child,
                url: format!("redis://127.0.0.1:{port}/"),
                _dir: dir,
            };
            for _ in 0..400 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return server;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            panic!("redis-server did not start");
        }

        /// How many task records it holds.
        async fn records(&self) -> usize {
            let client = redis::Client::open(self.url.as_str()).unwrap();
            let mut connection = redis::aio::ConnectionManager::new(client).await.unwrap();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("toolhost:task:*")
                .query_async(&mut connection)
                .await
                .unwrap();
            keys.len()
        }
    }

    #[tokio::test]
    async fn a_persons_records_are_bounded_in_bytes_in_redis_for_every_replica() {
        let redis = RedisServer::start();
        let tasks = Tasks::new(Store::redis(&redis.url).await.unwrap(), DEFAULT_TTL);
        a_persons_records_are_bounded_in_bytes(tasks, async || {
            assert_eq!(
                redis.records().await,
                15 + 1 + 1,
                "a refusal writes nothing"
            );
            Store::redis(&redis.url).await.unwrap()
        })
        .await;
    }

    /// Bounds small enough to reach with a few records of a few hundred
    /// bytes (an empty one takes about 250).
    const SMALL: Limits = Limits {
        records_per_person: 3,
        bytes_per_person: 4_000,
        bytes: 6_000,
    };

    async fn make(tasks: &Arc<Tasks>, owner: &str, bytes: usize) -> Result<(), TaskError> {
        let arguments = arguments_of(bytes);
        // A run of no length: the record lives its `ttl`.
        let made = tasks.create(
            Some(owner),
            "echo",
            arguments,
            Value::Null,
            Map::new(),
            Duration::ZERO,
        );
        made.await.map(drop)
    }

    fn busy(made: Result<(), TaskError>) -> String {
        match made {
            Err(TaskError::Busy(why)) => why,
            other => panic!("not refused as busy: {other:?}"),
        }
    }

    /// The bound in records per person and the bound in bytes over
    /// everyone, checked where `open` keeps records, and again after a
    /// restart.
    async fn bounds_in_records_and_in_all_outlive_a_restart(open: impl AsyncFn() -> Store) {
        let tasks = Tasks::new(open().await.with_limits(SMALL), DEFAULT_TTL);
        for _ in 0..3 {
            make(&tasks, "ada", 0).await.unwrap();
        }
        let why = busy(make(&tasks, "ada", 0).await);
        assert!(why.contains("you keep 3 tasks"), "{why}");
        for _ in 0..2 {
            make(&tasks, "bob", 1_500).await.unwrap();
        }
        // Within carol's own bound, past everyone's.
        let why = busy(make(&tasks, "carol", 2_000).await);
        assert!(
            why.contains("6000 bytes") && why.contains("in all"),
            "{why}"
        );

        let again = Tasks::new(open().await.with_limits(SMALL), DEFAULT_TTL);
        busy(make(&again, "ada", 0).await);
        busy(make(&again, "carol", 2_000).await);
        make(&again, "carol", 500).await.unwrap();
    }

    #[tokio::test]
    async fn a_record_outlives_its_runs_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::new(
            Store::folder(dir.path().join("tasks")).unwrap(),
            DEFAULT_TTL,
        );
        assert_eq!(tasks.ttl_for(DEFAULT_RUN_DEADLINE), DEFAULT_TTL);
        let two_hours = Duration::from_secs(7200);
        assert_eq!(tasks.ttl_for(two_hours), two_hours + KEPT_AFTER_A_RUN);
    }

    /// An expired record gives its share back, where `open` keeps records.
    async fn expired_records_give_their_share_back(open: impl AsyncFn() -> Store) {
        let ttl = Duration::from_secs(2);
        let tasks = Tasks::new(open().await.with_limits(SMALL), ttl);
        make(&tasks, "dan", 3_000).await.unwrap();
        let why = busy(make(&tasks, "dan", 3_000).await);
        assert!(why.contains("4000 bytes"), "{why}");
        tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        make(&tasks, "dan", 3_000).await.unwrap();
        // And after a restart, the expired one is not counted again.
        let again = Tasks::new(open().await.with_limits(SMALL), ttl);
        busy(make(&again, "dan", 3_000).await);
    }

    #[tokio::test]
    async fn a_folders_bounds_in_records_and_in_all_outlive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks");
        bounds_in_records_and_in_all_outlive_a_restart(async || {
            Store::folder(folder.clone()).unwrap()
        })
        .await;
    }

    #[tokio::test]
    async fn redis_bounds_in_records_and_in_all_outlive_a_restart() {
        let redis = RedisServer::start();
        bounds_in_records_and_in_all_outlive_a_restart(async || {
            Store::redis(&redis.url).await.unwrap()
        })
        .await;
    }

    #[tokio::test]
    async fn a_folders_expired_records_give_their_share_back() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks");
        expired_records_give_their_share_back(async || Store::folder(folder.clone()).unwrap())
            .await;
        // The expired record is gone from the folder, not only uncounted.
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1);
    }

    #[tokio::test]
    async fn redis_expired_records_give_their_share_back() {
        let redis = RedisServer::start();
        expired_records_give_their_share_back(async || Store::redis(&redis.url).await.unwrap())
            .await;
        assert_eq!(redis.records().await, 1);
    }
}
