//! The bound on what all images hold together: each run of written bytes
//! and each mapped layer claims its bytes from it, and gives them back
//! when it goes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What all images may hold, and hold now.
pub(crate) struct Bound {
    held: Arc<AtomicUsize>,
    pub(crate) max: usize,
}

impl Bound {
    pub(crate) fn new(max: usize) -> Bound {
        Bound {
            held: Arc::default(),
            max,
        }
    }

    /// `bytes` more, if they fit.
    pub(crate) fn claim(&self, bytes: usize) -> Option<Claim> {
        let mut held = self.held.load(Ordering::Relaxed);
        loop {
            if held + bytes > self.max {
                return None;
            }
            match self.held.compare_exchange_weak(
                held,
                held + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Claim {
                        held: self.held.clone(),
                        bytes,
                    });
                }
                Err(now) => held = now,
            }
        }
    }

    /// The bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// A share of the bound (a run's, a mapped layer's), given back when it
/// goes.
pub(crate) struct Claim {
    held: Arc<AtomicUsize>,
    bytes: usize,
}

impl Claim {
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
