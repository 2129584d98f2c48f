//! The one bookkeeping of calls: every call through `call::invoke`
//! is counted here once, by served tool, plugin and outcome (`ok` or the
//! error code), with its duration in a histogram. The dashboard's activity
//! panel and `/events` call summaries read it; metrics read the same
//! counters, so no front keeps a second count.
//!
//! - Label values are bounded: only a tool that is served at the time of
//!   the call gets an entry of its own. A call to a name that is not a
//!   tool (a typo, a probe) counts under [`UNKNOWN_TOOL`].
//! - Durations go into fixed buckets from 100 µs to 30 s ([`BUCKETS`]),
//!   kept for all time by outcome (a Prometheus histogram) and per minute for the last
//!   [`RECENT_MINUTES`] minutes (the dashboard's p50 and p95, estimated
//!   within the bucket).
//! - Recording takes one read lock on the tool map and one short lock on
//!   the tool's own entry: calls to different tools never wait on each
//!   other.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::runtime::CallUsage;

/// Upper bounds of the duration buckets, in seconds (100 µs to 30 s); a
/// last, unbounded bucket takes what is slower.
pub(crate) const BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];
/// How many minutes the recent percentiles cover.
pub(crate) const RECENT_MINUTES: u64 = 5;
/// Where calls to names that are not served tools are counted.
pub(crate) const UNKNOWN_TOOL: &str = "";

type Counts = [u64; BUCKETS.len() + 1];

/// The all-time durations of one tool's calls with one outcome, and what
/// the calls whose plugin code ran used.
#[derive(Default, Clone)]
struct Durations {
    counts: Counts,
    sum_seconds: f64,
    cpu_seconds: f64,
    fuel: u64,
    peak_memory_bytes: u64,
}

/// Everything counted for one served tool (of one plugin).
#[derive(Default)]
struct ToolEntry {
    plugin: String,
    /// All-time durations by outcome (`ok` or an error code); their counts
    /// are the calls.
    outcomes: BTreeMap<String, Durations>,
    /// Per-minute histograms over every outcome, newest last: (minute
    /// since the epoch, counts).
    recent: Vec<(u64, Counts)>,
}

/// The calls of the host since it started.
#[derive(Default)]
pub struct Ledger {
    tools: RwLock<HashMap<String, Arc<Mutex<ToolEntry>>>>,
    /// Bumped on every recorded call: a reader can tell whether anything
    /// happened since it last looked.
    version: AtomicU64,
}

/// One tool's counts, as read out.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolActivity {
    pub tool: String,
    pub plugin: String,
    /// Calls since start, by outcome (`ok` or the error code).
    pub outcomes: BTreeMap<String, u64>,
    /// All-time duration histograms, one per outcome (for `/metrics`).
    #[serde(skip)]
    pub histograms: Vec<OutcomeHistogram>,
    /// Calls in the last [`RECENT_MINUTES`] minutes, and their p50 and p95
    /// duration in milliseconds (estimated within the bucket).
    pub recent_calls: u64,
    pub recent_p50_ms: Option<f64>,
    pub recent_p95_ms: Option<f64>,
}

/// One tool's all-time durations with one outcome, as read out, with the
/// guest CPU time and fuel its calls used and the largest peak memory of
/// one call.
#[derive(Debug, Clone)]
pub struct OutcomeHistogram {
    pub outcome: String,
    /// Cumulative counts per bucket bound of [`BUCKETS`], then the total.
    pub cumulative: Vec<u64>,
    pub sum_seconds: f64,
    pub cpu_seconds: f64,
    pub fuel: u64,
    pub peak_memory_bytes: u64,
}

impl OutcomeHistogram {
    /// How many calls it counts.
    pub fn calls(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

impl Ledger {
    /// Counts one call. `tool` is `None` when the name is not a served
    /// tool; `usage` is what its plugin code used, if any ran.
    pub(crate) fn record(
        &self,
        tool: Option<(&str, &str)>,
        outcome: &str,
        duration: Duration,
        usage: Option<&CallUsage>,
    ) {
        let (tool, plugin) = tool.unwrap_or((UNKNOWN_TOOL, ""));
        // Counted under the map's read lock, without taking a count of the
        // entry's `Arc`: both calls' threads share it.
        let tools = self.tools.read().unwrap_or_else(|e| e.into_inner());
        match tools.get(tool) {
            Some(entry) => Self::count(entry, plugin, outcome, duration, usage),
            None => {
                drop(tools);
                Self::count(&self.entry(tool, plugin), plugin, outcome, duration, usage);
            }
        }
        self.version.fetch_add(1, Ordering::Release);
    }

    fn count(
        entry: &Mutex<ToolEntry>,
        plugin: &str,
        outcome: &str,
        duration: Duration,
        usage: Option<&CallUsage>,
    ) {
        let seconds = duration.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        let minute = now_minute();
        let mut entry = entry.lock().unwrap_or_else(|e| e.into_inner());
        if entry.plugin != plugin {
            entry.plugin = plugin.to_string();
        }
        let durations = match entry.outcomes.get_mut(outcome) {
            Some(durations) => durations,
            None => entry.outcomes.entry(outcome.to_string()).or_default(),
        };
        durations.counts[bucket] += 1;
        durations.sum_seconds += seconds;
        if let Some(usage) = usage {
            durations.cpu_seconds += usage.cpu.as_secs_f64();
            durations.fuel = durations.fuel.saturating_add(usage.fuel);
            durations.peak_memory_bytes = durations.peak_memory_bytes.max(usage.peak_memory_bytes);
        }
        if entry.recent.last().map(|(m, _)| *m) != Some(minute) {
            entry.recent.push((minute, [0; BUCKETS.len() + 1]));
            entry
                .recent
                .retain(|(m, _)| minute.saturating_sub(*m) < RECENT_MINUTES);
        }
        if let Some((_, counts)) = entry.recent.last_mut() {
            counts[bucket] += 1;
        }
    }

    fn entry(&self, tool: &str, plugin: &str) -> Arc<Mutex<ToolEntry>> {
        if let Some(entry) = self
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tool)
        {
            return entry.clone();
        }
        let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
        tools
            .entry(tool.to_string())
            .or_insert_with(|| {
                Arc::new(Mutex::new(ToolEntry {
                    plugin: plugin.to_string(),
                    ..ToolEntry::default()
                }))
            })
            .clone()
    }

    /// Forgets the counts of every tool `served` says is no longer served
    /// (its plugin was removed, or its new version dropped the tool): a
    /// plugin's series go with the plugin. The unknown-tool entry and the
    /// method-named entries of resources and prompts (`resources/read`)
    /// stay.
    pub(crate) fn forget_unserved(&self, served: impl Fn(&str) -> bool) {
        let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = tools.len();
        tools.retain(|tool, _| tool == UNKNOWN_TOOL || tool.contains('/') || served(tool));
        if tools.len() != before {
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// How many calls have been recorded: changes whenever one is.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Every tool's counts, by tool name (the unknown-tool entry, if any,
    /// under `""`).
    pub fn activity(&self) -> Vec<ToolActivity> {
        let minute = now_minute();
        let tools = self.tools.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<ToolActivity> = tools
            .iter()
            .map(|(tool, entry)| {
                let entry = entry.lock().unwrap_or_else(|e| e.into_inner());
                let mut recent: Counts = [0; BUCKETS.len() + 1];
                for (_, counts) in entry
                    .recent
                    .iter()
                    .filter(|(m, _)| minute.saturating_sub(*m) < RECENT_MINUTES)
                {
                    for (sum, count) in recent.iter_mut().zip(counts) {
                        *sum += count;
                    }
                }
                let histograms = entry
                    .outcomes
                    .iter()
                    .map(|(outcome, durations)| {
                        let mut running = 0;
                        OutcomeHistogram {
                            outcome: outcome.clone(),
                            cumulative: durations
                                .counts
                                .iter()
                                .map(|count| {
                                    running += count;
                                    running
                                })
                                .collect(),
                            sum_seconds: durations.sum_seconds,
                            cpu_seconds: durations.cpu_seconds,
                            fuel: durations.fuel,
                            peak_memory_bytes: durations.peak_memory_bytes,
                        }
                    })
                    .collect();
                ToolActivity {
                    tool: tool.clone(),
                    plugin: entry.plugin.clone(),
                    outcomes: entry
                        .outcomes
                        .iter()
                        .map(|(outcome, durations)| {
                            (outcome.clone(), durations.counts.iter().sum())
                        })
                        .collect(),
                    histograms,
                    recent_calls: recent.iter().sum(),
                    recent_p50_ms: quantile(&recent, 0.5).map(|s| s * 1e3),
                    recent_p95_ms: quantile(&recent, 0.95).map(|s| s * 1e3),
                }
            })
            .collect();
        all.sort_by(|a, b| a.tool.cmp(&b.tool));
        all
    }
}

fn now_minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() / 60)
}

/// The `q` quantile of a histogram, in seconds, interpolated linearly
/// within its bucket; `None` when empty. The unbounded bucket reports the
/// last bound.
fn quantile(counts: &Counts, q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut seen = 0u64;
    for (index, count) in counts.iter().enumerate() {
        if *count == 0 {
            continue;
        }
        if (seen + count) as f64 >= rank {
            let lower = if index == 0 { 0.0 } else { BUCKETS[index - 1] };
            let Some(upper) = BUCKETS.get(index) else {
                return Some(BUCKETS[BUCKETS.len() - 1]);
            };
            let within = (rank - seen as f64) / *count as f64;
            return Some(lower + (upper - lower) * within.clamp(0.0, 1.0));
        }
        seen += count;
    }
    Some(BUCKETS[BUCKETS.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_tool_and_outcome_and_unknown_names_share_one_entry() {
        let ledger = Ledger::default();
        let ms = Duration::from_millis;
        ledger.record(Some(("echo", "echo")), "ok", ms(1), None);
        ledger.record(Some(("echo", "echo")), "ok", ms(3), None);
        ledger.record(Some(("echo", "echo")), "INVALID_ARGUMENTS", ms(0), None);
        ledger.record(None, "TOOL_NOT_FOUND", ms(0), None);
        ledger.record(None, "TOOL_NOT_FOUND", ms(0), None);
        assert_eq!(ledger.version(), 5);
        let activity = ledger.activity();
        assert_eq!(activity.len(), 2);
        let unknown = &activity[0];
        assert_eq!(unknown.tool, UNKNOWN_TOOL);
        assert_eq!(unknown.outcomes["TOOL_NOT_FOUND"], 2);
        let echo = &activity[1];
        assert_eq!(
            (echo.outcomes["ok"], echo.outcomes["INVALID_ARGUMENTS"]),
            (2, 1)
        );
        assert_eq!(echo.recent_calls, 3);
        let ok = &echo.histograms.iter().find(|h| h.outcome == "ok").unwrap();
        assert_eq!(*ok.cumulative.last().unwrap(), 2);
        assert!((ok.sum_seconds - 0.004).abs() < 1e-9, "{}", ok.sum_seconds);
        let p50 = echo.recent_p50_ms.unwrap();
        assert!((0.5..=2.5).contains(&p50), "{p50}");
        let p95 = echo.recent_p95_ms.unwrap();
        assert!((2.5..=5.0).contains(&p95), "{p95}");
    }

    #[test]
    fn a_tool_no_longer_served_is_forgotten() {
        let ledger = Ledger::default();
        let ms = Duration::from_millis;
        ledger.record(Some(("gone", "bob/x")), "TOOL_ERROR", ms(1), None);
        ledger.record(Some(("kept", "ada/y")), "ok", ms(1), None);
        ledger.record(Some(("resources/read", "bob/x")), "ok", ms(1), None);
        ledger.record(None, "TOOL_NOT_FOUND", ms(0), None);
        ledger.forget_unserved(|tool| tool == "kept");
        let tools: Vec<String> = ledger.activity().into_iter().map(|a| a.tool).collect();
        assert_eq!(tools, ["", "kept", "resources/read"]);
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let mut counts: Counts = [0; BUCKETS.len() + 1];
        counts[3] = 10; // 0.5 ms to 1 ms
        let p50 = quantile(&counts, 0.5).unwrap();
        assert!((p50 - 0.00075).abs() < 1e-9, "{p50}");
        counts[BUCKETS.len()] = 100;
        assert_eq!(quantile(&counts, 0.99), Some(30.0));
        assert_eq!(quantile(&[0; BUCKETS.len() + 1], 0.5), None);
    }
}
