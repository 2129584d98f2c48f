//! The count of load outcomes, beside the call ledger: how many events of
//! each kind the registry sent (reloads), and per plugin file its
//! rejections, cache hits and misses and how long its last compile took.
//! The registry records here where it sends each event (`Registry::tell`),
//! so `/metrics` reads the same outcomes `/events` streams.
//!
//! A plugin's entry goes when its file does, so plugin label values stay
//! those of the files present; the per-kind totals stay for all time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use crate::registry::events::LoadEventKind;
use crate::registry::report::PluginReport;
use crate::runtime::Tier;

#[derive(Default)]
pub(crate) struct Loads {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    events: BTreeMap<&'static str, u64>,
    plugins: HashMap<String, PluginLoads>,
    /// How long each plugin's finished load job took, until its outcome
    /// is told.
    finished: HashMap<String, Duration>,
}

/// One plugin file's load counts, as read out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginLoads {
    pub rejections: u64,
    /// Versions whose compiled code came from the on-disk cache, and
    /// versions that were compiled.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Seconds the last load job took (read, compile or load from the
    /// cache, check) and the code it produced.
    pub last_load: Option<(Tier, f64)>,
    /// Seconds the last background compile of optimised code took.
    pub last_optimise_seconds: Option<f64>,
}

impl Loads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A load job of `id` ended after `took`; its outcome follows.
    pub(crate) fn job_finished(&self, id: &str, took: Duration) {
        self.lock().finished.insert(id.to_string(), took);
    }

    /// Optimised code for `id` took `took` to compile and now serves.
    pub(crate) fn optimised(&self, id: &str, took: Duration) {
        let mut inner = self.lock();
        if let Some(plugin) = inner.plugins.get_mut(id) {
            plugin.last_optimise_seconds = Some(took.as_secs_f64());
        }
    }

    /// Counts one event the registry sent.
    pub(crate) fn record(&self, kind: LoadEventKind, id: &str, report: &PluginReport) {
        let mut inner = self.lock();
        *inner.events.entry(kind.as_str()).or_default() += 1;
        if kind == LoadEventKind::Removed {
            inner.plugins.remove(id);
            inner.finished.remove(id);
            return;
        }
        if !matches!(
            kind,
            LoadEventKind::Loaded | LoadEventKind::Replaced | LoadEventKind::Rejected
        ) {
            return;
        }
        let took = inner.finished.remove(id);
        let plugin = inner.plugins.entry(id.to_string()).or_default();
        if kind == LoadEventKind::Rejected {
            plugin.rejections += 1;
            return;
        }
        match report.from_cache {
            Some(true) => plugin.cache_hits += 1,
            Some(false) => plugin.cache_misses += 1,
            None => {}
        }
        if let (Some(took), Some(tier)) = (took, report.compiler) {
            plugin.last_load = Some((tier, took.as_secs_f64()));
        }
    }

    /// Events sent by kind, and each present plugin's counts.
    pub fn read(&self) -> (BTreeMap<&'static str, u64>, Vec<(String, PluginLoads)>) {
        let inner = self.lock();
        let mut plugins: Vec<_> = inner
            .plugins
            .iter()
            .map(|(id, loads)| (id.clone(), loads.clone()))
            .collect();
        plugins.sort_by(|a, b| a.0.cmp(&b.0));
        (inner.events.clone(), plugins)
    }
}
