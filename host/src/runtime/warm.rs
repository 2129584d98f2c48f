//! Instances kept between calls: the opt-in `reuse_instance = N` of a
//! plugin's policy, and the spare instance of a large plugin. By default every call gets a fresh instance, and that
//! instance is most of a short call's cost (bench/README.md, "At scale,
//! and the call path"). A plugin whose policy opts in has an instance that
//! served a call successfully kept for its next call, up to N calls; a
//! call that trapped, timed out or ran out of memory or fuel never hands
//! its instance on. The trade-off is isolation between calls of that one
//! plugin: a call may see what an earlier call left in the instance's
//! memory (docs/security.md, "Reusing an instance").
//!
//! A large plugin (a componentize-py or componentize-js component) keeps
//! isolation and still does not instantiate on the call path: its
//! [`Spare`] is a fresh instance made ahead, off the call path, that no
//! call has used. It has answered `list-tools` once (no caller's input),
//! which pays an interpreter's first-use costs (function references made
//! lazily, the copy-on-write faults of its heap) before the call. A call
//! takes it before it is scheduled and, having nothing to instantiate,
//! starts where its caller is (a call refused before it runs gives it
//! back); once the call has answered, its used instance is torn down
//! and the next spare made, one after the other on a guest thread. A
//! plugin that starts serving alone in a running server (a drop, a
//! publish, a policy edit) has its first spare made at once
//! (`Runtime::loaded`), so its first call finds one too: the very instance
//! that described it, when its grants give nothing and its limits are the
//! default ones (`Runtime::describe`); a version that
//! stops serving has its spare and kept instances dropped as it stops
//! (`Runtime::unserved`; a call of it still running may leave one more).
//! Instantiating and tearing down such a component cost about 2 of a
//! call's 3.4 ms on 2 cores (perf: mostly wasmtime making function
//! references, `ref.func`, and the page faults of a fresh memory;
//! bench/README.md, "Big components" and "Sixth pass"), so a caller who is
//! not right behind another call of the same plugin gets an answer in the
//! time of the call alone. A call that comes while its spare is being
//! made (right behind the call before) waits for it, up to
//! [`SPARE_WAIT`]: it is ready sooner than an instance the call would
//! make; past that, the call makes its own.
//!
//! Kept instances, spares and instances being torn down hold pool slots, so their number over all plugins is
//! capped (the pool has room for that many beside `max_calls` running
//! calls; `pool.rs`), and an instance of code that has since been replaced
//! (baseline code after the optimised code took over) is dropped, not
//! reused. A spare of a large component holds that component's warmed
//! memory (about 13 MiB for the Python runtime), so at most
//! [`KeptInstances::max_spares`] plugins hold one at a time: the plugins
//! called most recently. Thirty Python tools in a room keep four spares,
//! not thirty; a plugin whose spare went makes a fresh instance for its
//! next call, and a spare after it. A spare no call has taken keeps its
//! place for [`UNUSED_SPARES_KEPT_FOR`]: when more plugins are loaded or
//! called at once than there are places (a room's burst of publishes),
//! the ones that come later make none, rather than each evicting a spare
//! made a moment ago that no call had time to use (bench/README.md, "The
//! room on many machines"); a plugin whose calls have run in its spares
//! before (a tool called on and on) still takes a place.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::Store;

use super::compiler::Code;
use super::exports::Plugin;
use super::grants::Grants;
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
pub(crate) struct Kept(Arc<AtomicUsize>);

impl Drop for Kept {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many instances may be kept over every plugin, and how many are.
pub(crate) struct KeptInstances {
    kept: Arc<AtomicUsize>,
    max: usize,
    /// The plugins with a spare (made, or being made), the one whose spare
    /// was made longest ago first.
    spares: Mutex<std::collections::VecDeque<Spare>>,
    max_spares: usize,
}

impl KeptInstances {
    pub(crate) fn new(max: usize) -> Self {
        KeptInstances {
            kept: Arc::default(),
            max,
            spares: Mutex::default(),
            max_spares: Self::max_spares(max),
        }
    }

    /// How many plugins may hold a spare at once: a sixteenth of the
    /// instances that may be kept (4 of `--max-calls` 64), at least 2.
    pub(crate) fn max_spares(max: usize) -> usize {
        (max / 16).max(2)
    }

    /// How many are held now.
    pub(crate) fn held(&self) -> usize {
        self.kept.load(Ordering::Relaxed)
    }

    /// Room for one more instance outside the running calls, if the pool
    /// has it.
    pub(crate) fn claim(&self) -> Option<Kept> {
        self.claim_within(self.max)
    }

    /// Room for `spare`'s next instance: spares may take half of the room,
    /// so that idle plugins' spares never leave none for kept instances and
    /// teardowns, and at most [`Self::max_spares`] plugins hold one: past
    /// that, the spare made longest ago goes (torn down on `guests`), unless
    /// it is being made or no call has taken it in
    /// [`UNUSED_SPARES_KEPT_FOR`] and no call has ever run in one of
    /// `spare`'s: then there is no room.
    pub(crate) fn claim_spare(
        &self,
        spare: &Spare,
        guests: &tokio::runtime::Handle,
    ) -> Option<Kept> {
        let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
        // The plugin's own place, and those of plugins that are gone.
        spares.retain(|known| !Arc::ptr_eq(&known.0, &spare.0) && Arc::strong_count(&known.0) > 1);
        while spares.len() >= self.max_spares {
            let Some(oldest) = spares.front() else {
                break;
            };
            let mut ready = oldest.0.ready.lock().unwrap_or_else(|e| e.into_inner());
            // More plugins called or loaded at once than there are spares
            // (a room's burst of publishes, thirty people each calling
            // their own tool): a spare no call has had time to take is
            // kept, and this one is not made, rather than each spare made
            // evicting one made a moment ago, unused; unless this plugin's
            // calls have run in its spares before, and so come back.
            let oldest_is = match &*ready {
                Some(prepared) => Place::Unused(prepared.made.elapsed()),
                None if oldest.0.filling.load(Ordering::Acquire) => Place::BeingMade,
                None => Place::Taken,
            };
            if !oldest_is.gives_way_to(spare.0.used.load(Ordering::Relaxed)) {
                return None;
            }
            let taken = ready.take();
            drop(ready);
            spares.pop_front();
            if let Some(taken) = taken {
                guests.spawn_blocking(move || drop(taken));
            }
        }
        let kept = self.claim_within(self.max / 2)?;
        spares.push_back(spare.clone());
        Some(kept)
    }

    fn claim_within(&self, max: usize) -> Option<Kept> {
        if self.kept.fetch_add(1, Ordering::Relaxed) >= max {
            self.kept.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Kept(self.kept.clone()))
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

    /// Drops every kept instance (the plugin's version no longer serves).
    pub(crate) fn clear(&self) {
        let taken = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        drop(taken);
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
        let Some(kept) = kept.claim() else {
            return;
        };
        let warm = Warm {
            store,
            instance,
            calls,
            code,
            _kept: kept,
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(warm);
    }
}

/// The oldest place in the spares' list, as a plugin that wants one finds
/// it when every place is held.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// Its spare waits, made this long ago.
    Unused(Duration),
    /// Its spare is being made.
    BeingMade,
    /// A call took its spare.
    Taken,
}

impl Place {
    /// Whether it goes for a plugin whose calls have (`used`) or have not
    /// run in its spares before: a spare no call has had
    /// [`UNUSED_SPARES_KEPT_FOR`] to take stays, unless that plugin's
    /// calls come back.
    fn gives_way_to(self, used: bool) -> bool {
        match self {
            Place::Taken => true,
            Place::Unused(age) if age >= UNUSED_SPARES_KEPT_FOR => true,
            Place::Unused(_) | Place::BeingMade => used,
        }
    }
}

/// A fresh instance made ahead of a large plugin's next call (see the
/// module's notes), shared by every clone of the plugin.
#[derive(Clone, Default)]
pub(crate) struct Spare(Arc<SpareSlot>);

#[derive(Default)]
struct SpareSlot {
    ready: Mutex<Option<Prepared>>,
    filling: AtomicBool,
    /// Set once warming failed (a `list-tools` that traps, runs out of
    /// fuel or runs past its deadline with the plugin's grants): its
    /// spares are then only instantiated, as before warming.
    cold: AtomicBool,
    /// Set once a call has run in one of its spares: its calls come back
    /// while a spare waits for them, so its next spare may take the place
    /// of one no call has taken yet (`KeptInstances::claim_spare`).
    used: AtomicBool,
    /// Told when a fill ends, filled or not: a call that found the spare
    /// being made waits for it (`Spare::wait_while_filling`).
    filled: tokio::sync::Notify,
}

/// An instance no call has used, with its store.
pub(crate) struct Prepared {
    pub(crate) store: Store<Sandbox>,
    pub(crate) instance: Plugin,
    code: Arc<Code>,
    grants: Arc<Grants>,
    /// When it was made ready.
    made: Instant,
    _kept: Kept,
}

/// How long a spare no call has taken keeps its place against plugins
/// that want one when every place is held (`KeptInstances::claim_spare`).
/// Making a spare costs about as much CPU as the call it saves: one
/// evicted unused is that CPU spent for nothing.
pub(crate) const UNUSED_SPARES_KEPT_FOR: Duration = Duration::from_secs(2);

/// The right to fill a spare; given back when dropped, filled or not.
pub(crate) struct Filling(Spare);

impl Drop for Filling {
    fn drop(&mut self) {
        (self.0).0.filling.store(false, Ordering::Release);
        (self.0).0.filled.notify_waiters();
    }
}

/// The longest a call that finds its plugin's spare being made waits for
/// it, rather than making its own instance. A spare being made is most of
/// the way there (it began as the call before answered), so the wait is
/// shorter than making an instance; should the fill be held up (no free
/// slot), the call makes its own after this.
pub(crate) const SPARE_WAIT: Duration = Duration::from_millis(3);

impl Prepared {
    /// The code it was made of.
    pub(crate) fn code(&self) -> &Arc<Code> {
        &self.code
    }
}

/// A spare a call has taken, until the call runs in it. One the call never
/// runs in (the call was refused as busy, or its caller went away while it
/// waited for a slot) goes back to its plugin for the next call, or, if
/// another spare is there or being made by then, is torn down on a guest
/// thread: never on the caller's thread, which serves HTTP.
pub(crate) struct Taken {
    prepared: Option<Prepared>,
    spare: Spare,
    guests: tokio::runtime::Handle,
}

impl Taken {
    fn new(prepared: Prepared, spare: &Spare, guests: tokio::runtime::Handle) -> Taken {
        Taken {
            prepared: Some(prepared),
            spare: spare.clone(),
            guests,
        }
    }

    /// The spare, for the call to run in.
    pub(crate) fn use_it(mut self) -> Prepared {
        (self.spare.0).used.store(true, Ordering::Relaxed);
        self.prepared
            .take()
            .expect("a taken spare is used once, then dropped")
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let Some(prepared) = self.prepared.take() else {
            return;
        };
        let slot = &self.spare.0;
        let mut ready = slot.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.is_none() && !slot.filling.load(Ordering::Acquire) {
            *ready = Some(prepared);
        } else {
            drop(ready);
            self.guests.spawn_blocking(move || drop(prepared));
        }
    }
}

impl Spare {
    /// The prepared instance, if there is one of `code` with `grants`,
    /// for a call to take before it is scheduled. One of replaced code or
    /// older grants is torn down on a guest thread (`guests`).
    pub(crate) fn take(
        &self,
        code: &Code,
        grants: &Arc<Grants>,
        guests: tokio::runtime::Handle,
    ) -> Option<Taken> {
        let prepared = self
            .0
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        if std::ptr::eq(Arc::as_ptr(&prepared.code), code) && Arc::ptr_eq(&prepared.grants, grants)
        {
            Some(Taken::new(prepared, self, guests))
        } else {
            guests.spawn_blocking(move || drop(prepared));
            None
        }
    }

    /// Waits, at most `bound`, for the spare being made, if one is: true
    /// if one was, and its fill has ended (filled or not) since.
    pub(crate) async fn wait_while_filling(&self, bound: Duration) -> bool {
        let notified = self.0.filled.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.0.filling.load(Ordering::Acquire) {
            return false;
        }
        tokio::time::timeout(bound, notified).await.is_ok()
    }

    /// The right to fill this spare: `None` while it is full or another
    /// call fills it.
    pub(crate) fn start_filling(&self) -> Option<Filling> {
        if self
            .0
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
            || self.0.filling.swap(true, Ordering::AcqRel)
        {
            return None;
        }
        Some(Filling(self.clone()))
    }

    /// The prepared instance, taken out, if there is one.
    pub(crate) fn take_prepared(&self) -> Option<Prepared> {
        self.0
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Drops the prepared instance, if there is one (the plugin's version
    /// no longer serves).
    pub(crate) fn clear(&self) {
        let taken = self
            .0
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(taken);
    }

    /// Whether this plugin's spares are warmed (see [`SpareSlot::cold`]).
    pub(crate) fn warms(&self) -> bool {
        !self.0.cold.load(Ordering::Relaxed)
    }

    /// Its spares are made without warming from now on.
    pub(crate) fn stop_warming(&self) {
        self.0.cold.store(true, Ordering::Relaxed);
    }

    /// Keeps `instance` for the next call, in the room `kept` claimed.
    pub(crate) fn fill(
        &self,
        kept: Kept,
        store: Store<Sandbox>,
        instance: Plugin,
        code: Arc<Code>,
        grants: Arc<Grants>,
    ) {
        *self.0.ready.lock().unwrap_or_else(|e| e.into_inner()) = Some(Prepared {
            store,
            instance,
            code,
            grants,
            made: Instant::now(),
            _kept: kept,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_no_call_has_had_time_to_take_keeps_its_place_from_a_plugin_never_served_by_one() {
        let young = Place::Unused(UNUSED_SPARES_KEPT_FOR / 4);
        assert!(!young.gives_way_to(false));
        assert!(!Place::BeingMade.gives_way_to(false));
        // One whose calls have run in its spares takes the place.
        assert!(young.gives_way_to(true));
        assert!(Place::BeingMade.gives_way_to(true));
    }

    #[test]
    fn a_spare_unused_for_long_or_already_taken_gives_way_to_any_plugin() {
        for used in [false, true] {
            assert!(Place::Unused(UNUSED_SPARES_KEPT_FOR).gives_way_to(used));
            assert!(Place::Taken.gives_way_to(used));
        }
    }
}
