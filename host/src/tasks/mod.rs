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

pub(crate) use self::record::{Status, TaskRecord};
pub(crate) use self::store::{Store, StoreError};

/// How long a task is kept after it was made, unless the server says.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);
/// How often a client is told to poll.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How often a run elsewhere is checked for a cancellation (shared store).
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(250);

/// How a run of a task's call ended.
#[derive(Clone)]
pub(crate) enum RunEnd {
    /// The tool's result (a business error too: `isError`).
    Completed(Value),
    /// The call could not give a result: a JSON-RPC error object.
    Failed(Value),
    /// The plugin asked its client for input: the requests by key, and
    /// the answers it used.
    NeedsInput {
        requests: Value,
        answers: Map<String, Value>,
    },
}

/// A run of a task's call: given the record (its arguments, answers,
/// the client's capabilities), how it ended.
pub(crate) type Run = Pin<Box<dyn Future<Output = RunEnd> + Send>>;

/// Why a task request is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// No such task for this person (or it expired).
    #[error("no task {0:?} is known here for you; it may have expired")]
    Unknown(String),
    #[error("the task store failed: {0}")]
    Store(#[from] StoreError),
}

/// The tasks of this server.
pub(crate) struct Tasks {
    store: Store,
    /// This server's name among replicas (its runs are marked with it).
    replica: String,
    /// Runs on this server, by task id.
    running: Mutex<HashMap<String, CancellationToken>>,
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

    /// Makes a task, durably, before anyone hears of it: `working`, run
    /// here.
    pub(crate) async fn create(
        &self,
        owner: Option<&str>,
        tool: &str,
        arguments: Map<String, Value>,
        capabilities: Value,
        answers: Map<String, Value>,
    ) -> Result<TaskRecord, TaskError> {
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
        self.store.create(&record).await?;
        Ok(record)
    }

    /// The task `id` as `owner` may see it: a run lost with its server is
    /// `failed` from now on.
    pub(crate) async fn get(&self, id: &str, owner: Option<&str>) -> Result<TaskRecord, TaskError> {
        let record = self.owned(id, owner).await?;
        if record.status == Status::Working && !self.runner_alive(&record).await? {
            return self
                .store
                .update(id, |record| {
                    if record.status == Status::Working {
                        record.fail_lost();
                    }
                })
                .await?
                .ok_or_else(|| TaskError::Unknown(id.into()));
        }
        Ok(record)
    }

    /// Answers some of what the task waits for; once nothing is missing,
    /// the record to run again (here), else `None`. Answers to what it
    /// does not wait for are ignored.
    pub(crate) async fn answer(
        &self,
        id: &str,
        owner: Option<&str>,
        responses: Map<String, Value>,
    ) -> Result<Option<TaskRecord>, TaskError> {
        self.owned(id, owner).await?;
        let replica = self.replica.clone();
        let mut resume = false;
        let record = self
            .store
            .update(id, |record| {
                resume = record.answer(responses.clone(), &replica);
            })
            .await?
            .ok_or_else(|| TaskError::Unknown(id.into()))?;
        Ok(resume.then_some(record))
    }

    /// Cancels the task: at once if it runs here, within [`CANCEL_POLL`]
    /// elsewhere. A task already ended stays as it ended.
    pub(crate) async fn cancel(&self, id: &str, owner: Option<&str>) -> Result<(), TaskError> {
        self.owned(id, owner).await?;
        self.store
            .update(id, |record| {
                if !record.status.is_terminal() {
                    record.set_status(Status::Cancelled);
                }
            })
            .await?;
        if let Some(token) = self.lock_running().get(id) {
            token.cancel();
        }
        Ok(())
    }

    /// Runs `run` for `record` on this server, and records how it ended;
    /// a cancellation (here, or marked in the store by another replica)
    /// drops the run, which stops the call.
    pub(crate) fn run(self: &Arc<Self>, record: &TaskRecord, run: Run) {
        let token = CancellationToken::new();
        self.lock_running().insert(record.id.clone(), token.clone());
        let tasks = self.clone();
        let id = record.id.clone();
        tokio::spawn(async move {
            let ended = tokio::select! {
                ended = run => Some(ended),
                () = token.cancelled() => None,
                () = tasks.watch_cancel(&id) => None,
                () = tasks.store.beat(&tasks.replica) => None,
            };
            if let Some(ended) = ended {
                let written = tasks
                    .store
                    .update(&id, |record| {
                        if record.status == Status::Working {
                            record.end(ended.clone());
                        }
                    })
                    .await;
                if let Err(error) = written {
                    tracing::warn!(task = %id, %error, "the task's end could not be recorded");
                }
            }
            tasks.lock_running().remove(&id);
        });
    }

    /// Ends when the store says the task was cancelled (by another
    /// replica); never with a store only this server uses.
    async fn watch_cancel(&self, id: &str) {
        if !self.store.is_shared() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(CANCEL_POLL).await;
            if let Ok(Some(record)) = self.store.get(id).await
                && record.status == Status::Cancelled
            {
                return;
            }
        }
    }

    async fn owned(&self, id: &str, owner: Option<&str>) -> Result<TaskRecord, TaskError> {
        match self.store.get(id).await? {
            Some(record) if record.owner.as_deref() == owner && !record.expired() => Ok(record),
            _ => Err(TaskError::Unknown(id.into())),
        }
    }

    /// Whether the server running `record` still does.
    async fn runner_alive(&self, record: &TaskRecord) -> Result<bool, TaskError> {
        if record.runner == self.replica {
            return Ok(self.lock_running().contains_key(&record.id));
        }
        Ok(self.store.alive(&record.runner).await?)
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
