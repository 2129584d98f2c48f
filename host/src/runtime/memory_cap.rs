//! The per-call memory budget: one cap over every linear memory and table
//! of an instance, which remembers when it refused.

use super::pool::{
    MAX_CORE_INSTANCES_PER_COMPONENT, MAX_MEMORIES_PER_COMPONENT, MAX_TABLES_PER_COMPONENT,
};
use wasmtime::ResourceLimiter;

/// One memory budget for the whole call: the bytes of every linear memory
/// and every table of the instance, summed, may not pass the cap (a
/// component with several memories gets no more than one with one). It
/// remembers a refusal, so that the trap that usually follows (a guest
/// aborting on allocation failure) is reported as OUT_OF_MEMORY rather
/// than as a generic trap.
pub(crate) struct MemoryCap {
    cap_bytes: usize,
    used_bytes: usize,
    /// The largest total the call reached (its peak memory).
    pub(crate) peak_bytes: usize,
    pub(crate) refused: bool,
}

/// What one table element is counted as: a function reference is a
/// pointer-sized slot in host memory.
const TABLE_ELEMENT_BYTES: usize = 8;

impl MemoryCap {
    pub(crate) fn new(cap_bytes: usize) -> Self {
        MemoryCap {
            cap_bytes,
            used_bytes: 0,
            peak_bytes: 0,
            refused: false,
        }
    }

    /// A new call on a kept instance: its peak counts from what the
    /// instance holds now, and no refusal yet.
    pub(crate) fn start_call(&mut self) {
        self.peak_bytes = self.used_bytes;
        self.refused = false;
    }

    /// Grows the call's total from `current` to `desired` bytes for one
    /// memory or table, if the total stays within the cap.
    pub(crate) fn grow(&mut self, current: usize, desired: usize) -> bool {
        let total = (self.used_bytes - current.min(self.used_bytes)).saturating_add(desired);
        let allowed = total <= self.cap_bytes;
        if allowed {
            self.used_bytes = total;
            self.peak_bytes = self.peak_bytes.max(total);
        }
        self.refused |= !allowed;
        allowed
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(current, desired))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
        ))
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES_PER_COMPONENT as usize
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_COMPONENT as usize
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_COMPONENT as usize
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryCap;

    #[test]
    fn the_budget_covers_every_memory_together() {
        let mut cap = MemoryCap::new(100);
        assert!(cap.grow(0, 60), "a first memory within the cap");
        assert!(!cap.grow(0, 60), "a second memory may not add past the cap");
        assert!(cap.refused);
        assert!(cap.grow(0, 40), "but may use what is left");
        assert!(
            cap.grow(40, 30),
            "shrinking frees budget for growth elsewhere"
        );
        assert!(!cap.grow(60, 71));
    }
}
