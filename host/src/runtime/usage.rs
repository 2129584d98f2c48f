//! What one call used: CPU time (the clock of each thread that polled it,
//! summed: a call may start on its caller's thread and end on a guest
//! thread), fuel, peak memory and which code ran.

use std::time::Duration;

use crate::runtime::Tier;

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
}

/// The CPU time the calling thread has used.
pub(crate) fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
