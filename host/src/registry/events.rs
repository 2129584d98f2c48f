//! Load outcomes as events: what became of each plugin file, as it
//! happens. The registry sends one [`LoadEvent`] per outcome (a load job
//! started, a version put in service or refused, a file removed, optimised
//! code swapped in), each carrying the plugin's report as `GET /plugins`
//! would show it at that moment. [`crate::Host::events`] hands out
//! receivers; `toolhost dev` waits on them, and they serialise to the same
//! JSON shape for any front that streams them.

use serde::{Deserialize, Serialize};

use crate::registry::report::PluginReport;

/// How many events a slow receiver may fall behind before it misses the
/// oldest ones (it is told how many, and never holds up the registry).
pub(crate) const EVENT_BUFFER: usize = 256;

/// One outcome for one plugin file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadEvent {
    pub kind: LoadEventKind,
    /// The plugin's id (its file name without `.wasm`).
    pub plugin: String,
    /// The plugin's report after the outcome: for `removed`, the last
    /// report before the file went away.
    pub report: PluginReport,
}

/// What happened to a plugin file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadEventKind {
    /// A load job started for a new or changed file.
    Compiling,
    /// The file's first version serves.
    Loaded,
    /// A new version of the file replaced the one that served.
    Replaced,
    /// The newest version was refused (`report.reason` says why); the
    /// version that served before, if any, keeps serving.
    Rejected,
    /// The file is gone, and its tools with it.
    Removed,
    /// Optimised code replaced the baseline code a large plugin started on.
    Optimised,
    /// The newest version waits for an admin's approval
    /// (`--require-approval`); the approved version, if any, serves on.
    Pending,
    /// A load job (a `compiling` event) found the file as it was: the
    /// report is the plugin's as before, no longer compiling.
    Unchanged,
}

impl LoadEventKind {
    /// The kind's name, as serde writes it: `/events` names its events by
    /// it and the metrics label their counts with it.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadEventKind::Compiling => "compiling",
            LoadEventKind::Loaded => "loaded",
            LoadEventKind::Replaced => "replaced",
            LoadEventKind::Rejected => "rejected",
            LoadEventKind::Removed => "removed",
            LoadEventKind::Pending => "pending",
            LoadEventKind::Unchanged => "unchanged",
            LoadEventKind::Optimised => "optimised",
        }
    }
}

impl LoadEvent {
    /// Whether this event settles the version with `content_hash`: it now
    /// serves, or it was refused.
    pub fn settles(&self, content_hash: &str) -> bool {
        matches!(
            self.kind,
            LoadEventKind::Loaded | LoadEventKind::Replaced | LoadEventKind::Rejected
        ) && self.report.content_hash.as_deref() == Some(content_hash)
    }
}
