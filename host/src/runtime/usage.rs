//! What one call used: CPU time (the clock of each thread that polled it,
//! summed by the executor: a call may start on its caller's thread and end
//! on a guest thread), fuel, peak memory, which code ran and whether its
//! instance was made ahead.

use std::time::Duration;

use crate::runtime::compiler::Tier;

/// What one call used: the caller's
/// accounting (`call/invoke.rs`) and the metrics read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallUsage {
    /// CPU time of the threads that ran the call, from the instance's
    /// creation to the answer (the host functions the guest called
    /// included).
    pub cpu: Duration,
    /// Fuel the guest burned (counted on every call, limited or not).
    pub fuel: u64,
    /// The largest total of the call's linear memories and tables.
    pub peak_memory_bytes: u64,
    /// Which compiler's code ran.
    pub tier: Tier,
    /// Whether the instance was made ahead of the call: kept from an
    /// earlier call (a policy's `reuse_instance`) or a large plugin's
    /// spare (`warm.rs`).
    pub warm: bool,
    /// What the call did with outbound HTTP (the `http` import).
    pub outbound: super::outbound::OutboundUsage,
}
