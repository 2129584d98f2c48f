//! Instances kept between calls: the opt-in `reuse_instance = N` of a
//! plugin's policy. By default every call gets a fresh instance, and that
//! instance is most of a short call's cost (bench/README.md, "At scale,
//! and the call path"). A plugin whose policy opts in has an instance that
//! served a call successfully kept for its next call, up to N calls; a
//! call that trapped, timed out or ran out of memory or fuel never hands
//! its instance on. The trade-off is isolation between calls of that one
//! plugin: a call may see what an earlier call left in the instance's
//! memory (docs/security.md, "Reusing an instance").
//!
//! Kept instances hold pool slots, so their number over all plugins is
//! capped (the pool has room for that many beside `max_calls` running
//! calls; `pool.rs`), and an instance of code that has since been replaced
//! (baseline code after the optimised code took over) is dropped, not
//! reused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::Store;

use super::compiler::Code;
use super::exports::Plugin;
use super::sandbox::Sandbox;

/// An instance between calls, with its store.
pub(crate) struct Warm {
    pub(crate) store: Store<Sandbox>,
    pub(crate) instance: Plugin,
    /// Calls it has served.
    pub(crate) calls: u32,
    /// The code it was made from.
    code: Arc<Code>,
    _kept: Kept,
}

/// One of the kept instances counted over every plugin; uncounted when the
/// instance goes (taken for a call, or dropped with its plugin).
struct Kept(Arc<AtomicUsize>);

impl Drop for Kept {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many instances may be kept over every plugin, and how many are.
pub(crate) struct KeptInstances {
    kept: Arc<AtomicUsize>,
    max: usize,
}

impl KeptInstances {
    pub(crate) fn new(max: usize) -> Self {
        KeptInstances {
            kept: Arc::default(),
            max,
        }
    }
}

/// The kept instances of one plugin, shared by every clone of it.
#[derive(Clone, Default)]
pub(crate) struct Shelf(Arc<Mutex<Vec<Warm>>>);

impl Shelf {
    /// A kept instance of `code`, if there is one. Instances of other
    /// (replaced) code are dropped.
    pub(crate) fn take(&self, code: &Arc<Code>) -> Option<Warm> {
        let mut shelf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        shelf.retain(|warm| Arc::ptr_eq(&warm.code, code));
        shelf.pop()
    }

    /// Keeps an instance for the next call, unless as many instances as
    /// the pool has room for are kept already.
    pub(crate) fn put(
        &self,
        kept: &KeptInstances,
        store: Store<Sandbox>,
        instance: Plugin,
        code: Arc<Code>,
        calls: u32,
    ) {
        if kept.kept.fetch_add(1, Ordering::Relaxed) >= kept.max {
            kept.kept.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let warm = Warm {
            store,
            instance,
            calls,
            code,
            _kept: Kept(kept.kept.clone()),
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(warm);
    }
}
