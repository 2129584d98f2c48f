//! Who builds when: at most `slots` builds at once over everyone (one per
//! core by default), one at a time per person, in the order they came
//! (tokio's locks and semaphores are fair). A person has at most one
//! build waiting: a newer source from them replaces the one that waits,
//! which is answered as replaced and never runs.
//!
//! A build past its first slice gives its slot to the next in line
//! (`Builds::run_in_slot` lets it go) and goes on beside it, at the
//! lowest CPU priority (`child.rs`): however many endless loops at import
//! there are, no build waits longer than one slice behind them. What bounds builds in overtime
//! is their people (one build at a time each) and each build's own limits
//! (wall clock, memory, disk).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The turn a build holds while it runs: its person's lane and its place
/// (a slot here, given back once past its first slice, or what another
/// replica made of it: `room.rs`).
pub(crate) struct Turn<P = Option<OwnedSemaphorePermit>> {
    lane: OwnedMutexGuard<()>,
    place: P,
}

impl<P> Turn<P> {
    /// The lane (held until the build ends) and the place.
    pub(crate) fn split(self) -> (OwnedMutexGuard<()>, P) {
        (self.lane, self.place)
    }
}

/// A build that waited was replaced by a newer one from the same person.
#[derive(Debug)]
pub(crate) struct Replaced;

pub(crate) struct Queue {
    slots: Arc<Semaphore>,
    lanes: Mutex<HashMap<String, Lane>>,
    next: std::sync::atomic::AtomicU64,
}

/// One person's builds: the lock the running one holds, and the one that
/// waits (its ticket and how to tell it it was replaced).
#[derive(Default)]
struct Lane {
    running: Arc<tokio::sync::Mutex<()>>,
    waiting: Option<(u64, CancellationToken)>,
}

impl Queue {
    pub(crate) fn new(slots: usize) -> Queue {
        Queue {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            lanes: Mutex::default(),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Waits for `person`'s turn to build, in a slot here; `Err` when a
    /// newer build of theirs replaced this one while it waited. `on_lane`
    /// is called once the person's lane is this build's and it starts
    /// waiting for a slot (from then on it is served in the order of that
    /// moment).
    #[cfg(test)]
    pub(crate) async fn turn(
        &self,
        person: &str,
        on_lane: impl FnOnce(),
    ) -> Result<Turn, Replaced> {
        self.turn_with(person, || async {
            on_lane();
            Some(self.slot().await)
        })
        .await
    }

    /// Waits for `person`'s lane, then for the place `place` finds (a
    /// slot here or elsewhere); `Err` when a newer build of theirs
    /// replaced this one before it had both (what `place` was doing is
    /// dropped).
    pub(crate) async fn turn_with<P, F>(
        &self,
        person: &str,
        place: impl FnOnce() -> F,
    ) -> Result<Turn<P>, Replaced>
    where
        F: std::future::Future<Output = P>,
    {
        let ticket = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let replaced = CancellationToken::new();
        let running = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let lane = lanes.entry(person.to_string()).or_default();
            if let Some((_, older)) = lane.waiting.replace((ticket, replaced.clone())) {
                older.cancel();
            }
            lane.running.clone()
        };
        let turn = async {
            let lane = running.lock_owned().await;
            let place = place().await;
            Turn { lane, place }
        };
        let outcome = tokio::select! {
            turn = turn => Ok(turn),
            () = replaced.cancelled() => Err(Replaced),
        };
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lane) = lanes.get_mut(person) {
            if lane
                .waiting
                .as_ref()
                .is_some_and(|(waiting, _)| *waiting == ticket)
            {
                lane.waiting = None;
            }
            // Nobody's builds: the lane goes (the map stays as small as the
            // builds in progress).
            if lane.waiting.is_none() && Arc::strong_count(&lane.running) == 1 && outcome.is_err() {
                lanes.remove(person);
            }
        }
        outcome
    }

    /// A slot here, once one is free (in the order asked).
    pub(crate) async fn slot(&self) -> OwnedSemaphorePermit {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .expect("the build slots are never closed")
    }

    /// A slot here, if one is free now.
    pub(crate) fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// Gives `turn`'s slot to the next in line (its build goes on beside
    /// it); `true` the first time.
    #[cfg(test)]
    pub(crate) fn overtime(&self, turn: &mut Turn) -> bool {
        turn.place.take().is_some()
    }

    /// Forgets the lanes of people with no build running or waiting.
    pub(crate) fn tidy(&self) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        lanes.retain(|_, lane| lane.waiting.is_some() || Arc::strong_count(&lane.running) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_build_per_person_and_a_newer_one_replaces_the_one_that_waits() {
        let queue = Arc::new(Queue::new(2));
        let first = queue.turn("ada", || {}).await.unwrap();
        // Ada's second waits for her first; her third replaces it.
        let second = tokio::spawn({
            let queue = queue.clone();
            async move { queue.turn("ada", || {}).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let third = tokio::spawn({
            let queue = queue.clone();
            async move { queue.turn("ada", || {}).await.map(|_| ()) }
        });
        assert!(
            second.await.unwrap().is_err(),
            "the waiting one is replaced"
        );
        // Bob builds beside ada: two slots.
        let bob = tokio::time::timeout(Duration::from_secs(1), queue.turn("bob", || {}))
            .await
            .expect("bob is not held up by ada")
            .unwrap();
        // Carol waits for a slot.
        let carol = tokio::spawn({
            let queue = queue.clone();
            async move { queue.turn("carol", || {}).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!carol.is_finished());
        drop(bob);
        carol.await.unwrap().unwrap();
        drop(first);
        third.await.unwrap().unwrap();
        queue.tidy();
        assert!(queue.lanes.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn builds_past_their_slice_give_their_slots_to_the_next() {
        let queue = Arc::new(Queue::new(2));
        let mut ada = queue.turn("ada", || {}).await.unwrap();
        let mut bob = queue.turn("bob", || {}).await.unwrap();
        let carol = tokio::spawn({
            let queue = queue.clone();
            async move { queue.turn("carol", || {}).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        assert!(!carol.is_finished());
        assert!(queue.overtime(&mut ada));
        assert!(!queue.overtime(&mut ada), "once");
        carol.await.unwrap().unwrap();
        assert!(queue.overtime(&mut bob));
        // However many builds are past their slice, the next gets a slot.
        let mut dave = queue.turn("dave", || {}).await.unwrap();
        assert!(queue.overtime(&mut dave));
        let mut erin = tokio::time::timeout(Duration::from_secs(1), queue.turn("erin", || {}))
            .await
            .expect("erin waited behind three builds past their slice")
            .unwrap();
        assert!(queue.overtime(&mut erin));
        tokio::time::timeout(Duration::from_secs(1), queue.turn("frank", || {}))
            .await
            .expect("frank waited behind four builds past their slice")
            .unwrap();
        drop((ada, bob, dave, erin));
    }
}
