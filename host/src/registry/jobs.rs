//! The load jobs in progress, one per plugin id, and who waits for their
//! outcome. Each job has a generation: a newer job of the same plugin
//! supersedes an older one (whose verdict is then dropped), and takes over
//! the older one's waiters, so whoever asked for a load hears the outcome
//! of the newest version (a oneshot each, as a request/answer pair does).
//! A waiter is attached to the job its own load began: a load that began
//! before (the watcher's, for an older version) never answers it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::registry::report::PluginReport;

/// Told the plugin's report once its load settles (`None`: no such plugin
/// any more).
pub(crate) type Waiter = oneshot::Sender<Option<PluginReport>>;

/// A load job in progress for one plugin id.
struct LoadJob {
    generation: u64,
    file: PathBuf,
    started: Instant,
    waiters: Vec<Waiter>,
}

/// Every plugin's newest load job.
#[derive(Default)]
pub(crate) struct Jobs {
    newest: Mutex<HashMap<String, LoadJob>>,
    generations: AtomicU64,
}

/// A job that ended as the newest of its plugin: how long it ran, and who
/// waits for its outcome.
pub(crate) struct Finished {
    pub(crate) took: Duration,
    pub(crate) waiters: Vec<Waiter>,
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, LoadJob>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a job for plugin `id` (its file `path`), superseding any in
    /// progress and taking over its waiters, with `waiters` of its own;
    /// returns its generation.
    pub(crate) fn begin(&self, id: &str, path: &Path, mut waiters: Vec<Waiter>) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let mut jobs = self.lock();
        if let Some(older) = jobs.remove(id) {
            waiters.extend(older.waiters);
        }
        jobs.insert(
            id.to_string(),
            LoadJob {
                generation,
                file: path.to_path_buf(),
                started: Instant::now(),
                waiters,
            },
        );
        generation
    }

    /// Whether job `generation` is still plugin `id`'s newest.
    pub(crate) fn is_newest(&self, id: &str, generation: u64) -> bool {
        self.lock()
            .get(id)
            .is_some_and(|job| job.generation == generation)
    }

    /// Ends job `generation` of plugin `id` if it is still the newest (only
    /// then may its verdict be applied); `None` when a newer one took over.
    pub(crate) fn finish(&self, id: &str, generation: u64) -> Option<Finished> {
        let mut jobs = self.lock();
        if jobs.get(id).is_none_or(|job| job.generation != generation) {
            return None;
        }
        let job = jobs.remove(id)?;
        Some(Finished {
            took: job.started.elapsed(),
            waiters: job.waiters,
        })
    }

    /// The jobs in progress: each plugin id, its file, and how long it has
    /// run.
    pub(crate) fn in_progress(&self) -> Vec<(String, PathBuf, Duration)> {
        self.lock()
            .iter()
            .map(|(id, job)| (id.clone(), job.file.clone(), job.started.elapsed()))
            .collect()
    }
}

/// Tells each waiter `report`.
pub(crate) fn answer(waiters: Vec<Waiter>, report: Option<PluginReport>) {
    for waiter in waiters {
        let _ = waiter.send(report.clone());
    }
}
