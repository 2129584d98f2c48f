//! Builds handed to the room: where replicas share a store
//! (`publishing/shared_builds.rs` over Redis), a build that finds no free
//! slot here is offered to every replica that builds its language, and
//! runs on the first with a slot, this one included. The build keeps its
//! place in its person's lane and in this replica's line, which tells when
//! it started elsewhere; its outcome (the component, or why there is none)
//! comes back here, where it is published as any build is.
//!
//! This file owns what is handed ([`Job`]), what comes back ([`Handed`]),
//! what the store must do ([`Room`]) and how a build waits on both a slot
//! here and the room ([`wait`]). A build is never lost to the room: if the
//! store cannot be reached before it was taken, or the replica that took it
//! stops, it is built here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedSemaphorePermit;

use super::queue::Queue;
use super::{BuildError, Built};

/// How often a build offered to the room asks how it stands.
const POLL: Duration = Duration::from_millis(250);
/// How long a build may be neither waiting, taken nor done before it is
/// taken back (a replica takes an offer in one step, then says so).
const LOST_AFTER: Duration = Duration::from_secs(3);
/// How long the store may be unreachable while another replica builds
/// before the build is taken back and built here.
const UNREACHABLE_AFTER: Duration = Duration::from_secs(30);

/// One build, as it is handed to another replica.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Job {
    /// Its own name in the store.
    pub(crate) id: String,
    /// The replica it was published on.
    pub(crate) origin: String,
    pub(crate) person: String,
    pub(crate) plugin: String,
    /// `python` or `js`.
    pub(crate) language: String,
    pub(crate) text: String,
    /// The largest component it may make (`--max-plugin-mib` where it was
    /// published).
    pub(crate) max_output: u64,
}

impl Job {
    /// A name no other build has: 16 random bytes, in hex.
    pub(crate) fn new_id() -> String {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).expect("the system's randomness");
        id.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

/// What became of a build another replica ran (its component travels
/// beside this): each of [`BuildError`]'s ends an author is answered with,
/// or the builder's own trouble, for which the build is made where it was
/// published.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase", deny_unknown_fields)]
pub(crate) enum Handed {
    #[serde(rename_all = "camelCase")]
    Built {
        took_ms: u64,
        peak_memory_bytes: u64,
        peak_disk_bytes: u64,
        notes: Vec<String>,
    },
    /// The toolchain refused the source.
    #[serde(rename_all = "camelCase")]
    Failed {
        headline: String,
        line: Option<u32>,
        log: String,
        took_ms: u64,
    },
    #[serde(rename_all = "camelCase")]
    TimedOut {
        limit_secs: u64,
        log: String,
    },
    OutOfMemory {
        limit: u64,
        log: String,
    },
    OutOfDisk {
        limit: u64,
        log: String,
    },
    TooLarge {
        size: u64,
        limit: u64,
    },
    /// Any other end the source caused (a link left behind): what it said.
    Stopped {
        message: String,
    },
    /// The builder could not build (its toolchain, its folder, its flags):
    /// not the source's doing.
    Declined {
        message: String,
    },
}

impl Handed {
    /// How `outcome` travels.
    pub(crate) fn of(outcome: &Result<Built, BuildError>) -> Handed {
        let error = match outcome {
            Ok(built) => {
                return Handed::Built {
                    took_ms: built.took.as_millis() as u64,
                    peak_memory_bytes: built.peak_memory_bytes,
                    peak_disk_bytes: built.peak_disk_bytes,
                    notes: built.notes.clone(),
                };
            }
            Err(error) => error,
        };
        match error {
            BuildError::Failed {
                headline,
                line,
                log,
                took,
            } => Handed::Failed {
                headline: headline.clone(),
                line: *line,
                log: log.clone(),
                took_ms: took.as_millis() as u64,
            },
            BuildError::TimedOut { limit, log } => Handed::TimedOut {
                limit_secs: limit.as_secs(),
                log: log.clone(),
            },
            BuildError::OutOfMemory { limit, log } => Handed::OutOfMemory {
                limit: *limit,
                log: log.clone(),
            },
            BuildError::OutOfDisk { limit, log } => Handed::OutOfDisk {
                limit: *limit,
                log: log.clone(),
            },
            BuildError::TooLarge { size, limit } => Handed::TooLarge {
                size: *size,
                limit: *limit,
            },
            BuildError::LeftBehind { .. } | BuildError::Replaced | BuildError::Elsewhere(_) => {
                Handed::Stopped {
                    message: error.to_string(),
                }
            }
            BuildError::NotBuiltHere(_)
            | BuildError::Unavailable(_)
            | BuildError::Toolchain { .. }
            | BuildError::NoToolchain(_)
            | BuildError::Io(_) => Handed::Declined {
                message: error.to_string(),
            },
        }
    }

    /// The outcome again, with the component `wasm` made on `replica`
    /// (none: this one); `Err` with what the builder said when it declined.
    pub(crate) fn outcome(
        self,
        wasm: Vec<u8>,
        replica: Option<&str>,
    ) -> Result<Result<Built, BuildError>, String> {
        Ok(match self {
            Handed::Built {
                took_ms,
                peak_memory_bytes,
                peak_disk_bytes,
                notes,
            } => Ok(Built {
                wasm,
                took: Duration::from_millis(took_ms),
                waited: Duration::ZERO,
                peak_memory_bytes,
                peak_disk_bytes,
                notes,
                replica: replica.map(str::to_string),
            }),
            Handed::Failed {
                headline,
                line,
                log,
                took_ms,
            } => Err(BuildError::Failed {
                headline,
                line,
                log,
                took: Duration::from_millis(took_ms),
            }),
            Handed::TimedOut { limit_secs, log } => Err(BuildError::TimedOut {
                limit: Duration::from_secs(limit_secs),
                log,
            }),
            Handed::OutOfMemory { limit, log } => Err(BuildError::OutOfMemory { limit, log }),
            Handed::OutOfDisk { limit, log } => Err(BuildError::OutOfDisk { limit, log }),
            Handed::TooLarge { size, limit } => Err(BuildError::TooLarge { size, limit }),
            Handed::Stopped { message } => Err(BuildError::Elsewhere(message)),
            Handed::Declined { message } => return Err(message),
        })
    }
}

/// How an offered build stands in the store.
pub(crate) enum Polled {
    /// Still offered.
    Waiting,
    /// The replica named took it and builds it.
    Taken(String),
    /// Its outcome, from the replica that built it.
    Done(Result<Built, BuildError>),
    /// The replica that took it could not build it (what it said).
    Declined(String),
    /// Neither offered, taken nor done: its replica stopped, or it is
    /// between two of those.
    Lost,
    /// The store cannot be reached.
    Unreachable,
}

/// Whether a build offered to the room was taken back.
pub(crate) enum Withdrawn {
    Yes,
    /// Another replica took it first.
    Taken,
    /// The store cannot be reached.
    Unreachable,
}

/// What a store shared by replicas does with builds handed to it.
pub(crate) trait Room: Send + Sync {
    /// This replica's name.
    fn replica(&self) -> &str;
    /// Offers `job` to every replica that builds its language.
    fn offer<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), ()>>;
    /// Takes `job` back, unless a replica took it.
    fn withdraw<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Withdrawn>;
    /// No one waits for `job` any more: takes it back, or asks the replica
    /// that took it to stop.
    fn cancel<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()>;
    /// How `job` stands; once [`Polled::Done`], the store forgets it.
    fn poll<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Polled>;
}

/// Where a build runs.
pub(crate) enum Place {
    /// Here, in this slot (given back once past its first slice).
    Here(Option<OwnedSemaphorePermit>),
    /// Another replica took it and builds it: it runs, and is no longer
    /// replaced by a newer source ([`Elsewhere::outcome`] waits for it).
    Taken(Box<Elsewhere>),
    /// Elsewhere, and this is what it made.
    Done(Result<Built, BuildError>),
}

/// A build another replica runs.
pub(crate) struct Elsewhere {
    room: Arc<dyn Room>,
    job: Job,
    offered: Offered,
}

impl Elsewhere {
    /// What it made, or a slot here if its replica stopped before it ended.
    pub(crate) async fn outcome(self: Box<Self>, queue: &Queue) -> Place {
        let Elsewhere { room, job, offered } = *self;
        follow(room, queue, job, offered, None, true, |_| {}).await
    }
}

/// Takes `job` back, or stops it where it runs, if no one waits for it
/// any more (a newer source from its person replaced it while it waited;
/// the publish was dropped).
struct Offered {
    room: Arc<dyn Room>,
    job: Option<Job>,
}

impl Offered {
    /// No longer offered: nothing to take back.
    fn settled(&mut self) {
        self.job = None;
    }
}

impl Drop for Offered {
    fn drop(&mut self) {
        if let (Some(job), Ok(runtime)) = (self.job.take(), tokio::runtime::Handle::try_current()) {
            let room = self.room.clone();
            runtime.spawn(async move { room.cancel(&job).await });
        }
    }
}

/// Waits for a place for `job`: a slot here if one is free, else the first
/// of a slot here and another replica taking it from the room.
/// `on_taken` is told which replica took it.
pub(crate) async fn wait(
    room: Arc<dyn Room>,
    queue: &Queue,
    job: Job,
    on_taken: impl Fn(&str),
) -> Place {
    if let Some(slot) = queue.try_slot() {
        return Place::Here(Some(slot));
    }
    // Made first: a publish dropped while its build is offered takes it
    // back.
    let mut offered = Offered {
        room: room.clone(),
        job: Some(job.clone()),
    };
    if room.offer(&job).await.is_err() {
        offered.settled();
        return Place::Here(Some(queue.slot().await));
    }
    // A slot here is waited for only while no other replica builds it (a
    // waiter is handed a slot as it frees, polled or not).
    let here: BoxFuture<'_, OwnedSemaphorePermit> = Box::pin(queue.slot());
    follow(room, queue, job, offered, Some(here), false, on_taken).await
}

/// Follows `job` in the room until it is taken (when not yet `taken`),
/// done, or lost; or, while `here` is waited for, until a slot here frees
/// and the job is taken back.
async fn follow(
    room: Arc<dyn Room>,
    queue: &Queue,
    job: Job,
    mut offered: Offered,
    mut here: Option<BoxFuture<'_, OwnedSemaphorePermit>>,
    taken: bool,
    on_taken: impl Fn(&str),
) -> Place {
    let mut astray: Option<Instant> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            slot = async { here.as_mut().expect("polled only while waited for").await },
                if here.is_some() =>
            {
                match room.withdraw(&job).await {
                    Withdrawn::Yes | Withdrawn::Unreachable => {
                        offered.settled();
                        return Place::Here(Some(slot));
                    }
                    Withdrawn::Taken => here = None,
                }
            }
            _ = tick.tick() => {
                let stray_for = match room.poll(&job).await {
                    Polled::Waiting => None,
                    Polled::Taken(replica) => {
                        if !taken {
                            on_taken(&replica);
                            return Place::Taken(Box::new(Elsewhere { room, job, offered }));
                        }
                        None
                    }
                    Polled::Done(outcome) => {
                        offered.settled();
                        return Place::Done(outcome);
                    }
                    Polled::Declined(why) => {
                        tracing::warn!(plugin = %job.plugin, %why, "the replica that took a build could not build it");
                        Some(Duration::ZERO)
                    }
                    Polled::Lost => Some(LOST_AFTER),
                    Polled::Unreachable if taken => Some(UNREACHABLE_AFTER),
                    // Not taken yet: a slot here still serves it.
                    Polled::Unreachable => None,
                };
                match stray_for {
                    None => astray = None,
                    Some(limit) => {
                        let since = *astray.get_or_insert_with(Instant::now);
                        if since.elapsed() >= limit {
                            offered.settled();
                            tracing::warn!(
                                plugin = %job.plugin,
                                "a build handed to another replica came back unbuilt; it is built here"
                            );
                            let slot = match here.take() {
                                Some(waiting) => waiting.await,
                                None => queue.slot().await,
                            };
                            return Place::Here(Some(slot));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;

    /// A store that answers each poll as scripted (then `Waiting`), and
    /// counts offers and withdrawals.
    #[derive(Default)]
    struct Scripted {
        polls: Mutex<VecDeque<Polled>>,
        offers: Mutex<usize>,
        withdrawn: Mutex<usize>,
    }

    impl Room for Scripted {
        fn replica(&self) -> &str {
            "here"
        }
        fn offer<'a>(&'a self, _: &'a Job) -> BoxFuture<'a, Result<(), ()>> {
            *self.offers.lock().unwrap() += 1;
            Box::pin(async { Ok(()) })
        }
        fn withdraw<'a>(&'a self, _: &'a Job) -> BoxFuture<'a, Withdrawn> {
            *self.withdrawn.lock().unwrap() += 1;
            Box::pin(async { Withdrawn::Yes })
        }
        fn cancel<'a>(&'a self, _: &'a Job) -> BoxFuture<'a, ()> {
            *self.withdrawn.lock().unwrap() += 1;
            Box::pin(async {})
        }
        fn poll<'a>(&'a self, _: &'a Job) -> BoxFuture<'a, Polled> {
            let next = self.polls.lock().unwrap().pop_front();
            Box::pin(async { next.unwrap_or(Polled::Waiting) })
        }
    }

    fn job() -> Job {
        Job {
            id: Job::new_id(),
            origin: "here".into(),
            person: "ada".into(),
            plugin: "ada/wc".into(),
            language: "python".into(),
            text: String::new(),
            max_output: 1 << 20,
        }
    }

    fn built() -> Result<Built, BuildError> {
        Handed::Built {
            took_ms: 1500,
            peak_memory_bytes: 1,
            peak_disk_bytes: 2,
            notes: vec![],
        }
        .outcome(b"\0asm".to_vec(), Some("there"))
        .unwrap()
    }

    /// Waits for a place for a job `room` will say is taken, then for its
    /// outcome: whether it was a slot here.
    fn taken_then_built_here(
        room: &Arc<Scripted>,
        queue: &Arc<Queue>,
    ) -> tokio::task::JoinHandle<bool> {
        let (room, queue) = (room.clone(), queue.clone());
        tokio::spawn(async move {
            let Place::Taken(elsewhere) = wait(room, &queue, job(), |_| {}).await else {
                return false;
            };
            matches!(elsewhere.outcome(&queue).await, Place::Here(Some(_)))
        })
    }

    #[tokio::test]
    async fn a_free_slot_here_is_taken_without_asking_the_room() {
        let room = Arc::new(Scripted::default());
        let queue = Queue::new(1);
        let place = wait(room.clone(), &queue, job(), |_| panic!("not taken")).await;
        assert!(matches!(place, Place::Here(Some(_))));
        assert_eq!(*room.offers.lock().unwrap(), 0);
    }

    #[tokio::test]
    async fn a_build_another_replica_took_comes_back_with_what_it_made() {
        let room = Arc::new(Scripted::default());
        room.polls.lock().unwrap().extend([
            Polled::Waiting,
            Polled::Taken("there".into()),
            Polled::Done(built()),
        ]);
        let queue = Queue::new(1);
        let busy = queue.try_slot().unwrap();
        let told = Mutex::new(Vec::new());
        let place = wait(room.clone(), &queue, job(), |replica| {
            told.lock().unwrap().push(replica.to_string())
        })
        .await;
        let Place::Taken(elsewhere) = place else {
            panic!("taken elsewhere")
        };
        let Place::Done(Ok(built)) = elsewhere.outcome(&queue).await else {
            panic!("built elsewhere")
        };
        assert_eq!(built.replica.as_deref(), Some("there"));
        assert_eq!(built.wasm, b"\0asm");
        assert_eq!(built.took, Duration::from_millis(1500));
        assert_eq!(*told.lock().unwrap(), ["there"]);
        assert_eq!(*room.offers.lock().unwrap(), 1);
        // The slot waited for here was let go once it was taken: it is
        // free again as soon as the build that held it ends.
        drop(busy);
        assert!(queue.try_slot().is_some());
    }

    #[tokio::test]
    async fn a_slot_freed_here_first_takes_the_offer_back() {
        let room = Arc::new(Scripted::default());
        let queue = Arc::new(Queue::new(1));
        let busy = queue.try_slot().unwrap();
        let waiting = tokio::spawn({
            let (room, queue) = (room.clone(), queue.clone());
            async move {
                matches!(
                    wait(room, &queue, job(), |_| panic!("not taken")).await,
                    Place::Here(Some(_))
                )
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(busy);
        assert!(waiting.await.unwrap(), "built here");
        assert_eq!(*room.withdrawn.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn a_build_whose_builder_stopped_is_built_here() {
        let room = Arc::new(Scripted::default());
        room.polls.lock().unwrap().extend(
            std::iter::once(Polled::Taken("there".into()))
                .chain(std::iter::repeat_with(|| Polled::Lost).take(100)),
        );
        let queue = Arc::new(Queue::new(1));
        let busy = queue.try_slot().unwrap();
        let waiting = taken_then_built_here(&room, &queue);
        tokio::time::sleep(LOST_AFTER + Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "it waits for a slot here");
        drop(busy);
        assert!(
            waiting.await.unwrap(),
            "built here once its builder was lost"
        );
    }

    #[test]
    fn a_failure_travels_with_the_authors_line() {
        let failed: Result<Built, BuildError> = Err(BuildError::Failed {
            headline: "app.py:3: SyntaxError".into(),
            line: Some(3),
            log: "log".into(),
            took: Duration::from_millis(700),
        });
        let text = serde_json::to_string(&Handed::of(&failed)).unwrap();
        let back: Handed = serde_json::from_str(&text).unwrap();
        match back.outcome(Vec::new(), Some("there")).unwrap() {
            Err(BuildError::Failed {
                headline,
                line,
                took,
                ..
            }) => {
                assert_eq!(
                    (headline.as_str(), line, took),
                    ("app.py:3: SyntaxError", Some(3), Duration::from_millis(700))
                );
            }
            other => panic!("{other:?}"),
        }
        let stopped = Handed::of(&Err(BuildError::Replaced));
        assert!(matches!(
            stopped.outcome(Vec::new(), None).unwrap(),
            Err(BuildError::Elsewhere(message)) if message.contains("replaced")
        ));
        // A limit keeps its kind (and its answer's code).
        let large = Handed::of(&Err(BuildError::TooLarge { size: 9, limit: 4 }));
        assert!(matches!(
            large.outcome(Vec::new(), None).unwrap(),
            Err(BuildError::TooLarge { size: 9, limit: 4 })
        ));
        // The builder's own trouble is not the author's: built at home.
        let declined = Handed::of(&Err(BuildError::NotBuiltHere("no python here".into())));
        assert_eq!(
            declined.outcome(Vec::new(), None).unwrap_err(),
            "no python here"
        );
    }

    #[tokio::test]
    async fn a_build_its_builder_declined_is_built_here() {
        let room = Arc::new(Scripted::default());
        room.polls.lock().unwrap().extend([
            Polled::Taken("there".into()),
            Polled::Declined("no toolchain".into()),
        ]);
        let queue = Arc::new(Queue::new(1));
        let busy = queue.try_slot().unwrap();
        let waiting = taken_then_built_here(&room, &queue);
        tokio::time::sleep(Duration::from_millis(800)).await;
        drop(busy);
        assert!(waiting.await.unwrap(), "built here");
    }
}
