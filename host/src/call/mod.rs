//! The call path every front shares: [`invoke`] looks a tool up, checks
//! its arguments, takes its [`slots`], calls it and hands the outcome to
//! the one normalizer ([`envelope`]); [`errors`] is the one table of error
//! codes and their HTTP, JSON-RPC and exit statuses; [`render`] turns
//! structured data into text; [`accounting`] is what a call cost, returned
//! with its result; [`ledger`] the one count of calls, which metrics, the
//! event feed and the page read; [`span`] a tool call's span, made only
//! when something reads it; [`catalog_path`] is the same path for
//! resources, prompts and completion.
//!
//! [`Calls`] is what the path keeps besides the registry: the ledger and
//! each person's call slots, opened with the host and shared by every
//! front.

pub mod accounting;
pub(crate) mod catalog_path;
pub mod envelope;
pub(crate) mod errors;
pub mod invoke;
pub mod ledger;
pub(crate) mod render;
pub(crate) mod skills_path;
pub(crate) mod slots;
pub(crate) mod span;

use std::time::Duration;

use crate::registry::shares::PersonShares;
use crate::runtime::CallUsage;

/// What the call path keeps across calls: the one count of calls, and each
/// person's call slots.
pub struct Calls {
    pub(crate) ledger: ledger::Ledger,
    pub(crate) slots: slots::CallShares,
}

impl Calls {
    /// The books of a host running at most `max_calls` calls at once, each
    /// person their share of them.
    pub(crate) fn new(shares: &PersonShares, max_calls: usize) -> Calls {
        Calls {
            ledger: ledger::Ledger::default(),
            slots: slots::CallShares::new(shares, max_calls),
        }
    }

    /// The one count of calls (activity, events and metrics read it).
    pub fn ledger(&self) -> &ledger::Ledger {
        &self.ledger
    }

    /// The end of every call path (tools, resources, prompts, completion):
    /// the call counted once in the ledger under `served` (its name and
    /// plugin; `None` when no served tool had the name), and its span
    /// closed with how it ended. The closing fields and line are for debug
    /// logs and traces; at the default level, formatting them into the span
    /// cost ~5 % of a REST echo call (perf), for nothing anyone reads.
    pub(crate) fn settle(
        &self,
        span: &tracing::Span,
        served: Option<(&str, &str)>,
        outcome: &str,
        duration: Duration,
        usage: Option<&CallUsage>,
    ) {
        self.ledger.record(served, outcome, duration, usage);
        if tracing::enabled!(tracing::Level::DEBUG) {
            span.record("outcome", outcome);
            span.record("duration_ms", duration.as_secs_f64() * 1e3);
            if let Some(usage) = usage {
                span.record("cpu_ms", usage.cpu.as_secs_f64() * 1e3);
                span.record("fuel", usage.fuel);
                span.record("peak_memory_bytes", usage.peak_memory_bytes);
            }
            span.in_scope(|| tracing::debug!("call ended"));
        }
    }
}
