//! What task records may take of a store, per person and in all, and a
//! folder's count of what they take now (Redis keeps the same count in
//! Redis: `store.rs`): the bounds ([`Limits`]), which one a record would
//! pass ([`Bound`]), and whether an update may be refused ([`Growth`]).

use std::collections::{BTreeSet, HashMap};

/// How many task records one person may keep (each kept for a task's
/// lifetime, `ttl`): one more is refused.
pub(crate) const MAX_KEPT_PER_PERSON: usize = 512;
/// How many bytes one person's task records may take together, as
/// written (arguments, answers and results): 64 MiB, some thirty tasks
/// that echo a megabyte of arguments.
pub(crate) const MAX_BYTES_PER_PERSON: u64 = 64 * MIB;
/// How many bytes every task record of the store may take together: 1 GiB,
/// sixteen people at their bound.
pub(crate) const MAX_BYTES: u64 = 1024 * MIB;
const MIB: u64 = 1024 * 1024;

/// The bounds on what task records take of a store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) records_per_person: usize,
    pub(crate) bytes_per_person: u64,
    pub(crate) bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            records_per_person: MAX_KEPT_PER_PERSON,
            bytes_per_person: MAX_BYTES_PER_PERSON,
            bytes: MAX_BYTES,
        }
    }
}

/// Which bound a record would pass, with the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    RecordsPerPerson(usize),
    BytesPerPerson(u64),
    Bytes(u64),
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Bound::RecordsPerPerson(records) => write!(
                f,
                "you keep {records} tasks on this server, the most one person may; wait for them \
                 to expire (a task's lifetime after each was made)"
            ),
            Bound::BytesPerPerson(bytes) => write!(
                f,
                "your tasks would take more than {}, the most one person's task records may take \
                 together (arguments, answers and results); wait for them to expire, or send less",
                size(bytes)
            ),
            Bound::Bytes(bytes) => write!(
                f,
                "this server's task records would take more than {}, the most they may take in \
                 all; try again when some have expired",
                size(bytes)
            ),
        }
    }
}

/// A size as people read it: whole MiB when it is some, else bytes.
fn size(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Whether an update may be refused for what it adds to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Growth {
    /// What a tool or a client adds (a result, answers): refused past a
    /// bound, and nothing written.
    Bounded,
    /// What the server writes to end or cancel a task (a status, a short
    /// error): never refused, so that a task always ends.
    Free,
}

/// What a folder's records take (Redis keeps the same in Redis, counted
/// by the store's scripts).
#[derive(Default)]
pub(super) struct Usage {
    /// Each record counted, by id.
    records: HashMap<String, Counted>,
    /// The same, soonest to expire first.
    expiring: BTreeSet<(u64, String)>,
    people: HashMap<Option<String>, Held>,
    bytes: u64,
}

pub(super) struct Counted {
    owner: Option<String>,
    bytes: u64,
}

/// What one person's records take.
#[derive(Default)]
pub(super) struct Held {
    records: usize,
    bytes: u64,
}

impl Usage {
    /// Whether the record `id` is counted.
    pub(super) fn counts(&self, id: &str) -> bool {
        self.records.contains_key(id)
    }

    /// Gives back what the records expired by `now` took; their ids.
    pub(super) fn expire(&mut self, now: u64) -> Vec<String> {
        let mut gone = Vec::new();
        while self.expiring.first().is_some_and(|first| first.0 <= now) {
            let (_, id) = self.expiring.pop_first().expect("a first entry");
            if let Some(counted) = self.records.remove(&id) {
                self.bytes = self.bytes.saturating_sub(counted.bytes);
                if let Some(held) = self.people.get_mut(&counted.owner) {
                    held.records = held.records.saturating_sub(1);
                    held.bytes = held.bytes.saturating_sub(counted.bytes);
                    if held.records == 0 {
                        self.people.remove(&counted.owner);
                    }
                }
            }
            gone.push(id);
        }
        gone
    }

    /// Whether a new record of `bytes` for `owner` fits.
    pub(super) fn admits(
        &self,
        limits: &Limits,
        owner: &Option<String>,
        bytes: u64,
    ) -> Result<(), Bound> {
        let held = self.people.get(owner);
        if held.map_or(0, |held| held.records) >= limits.records_per_person {
            return Err(Bound::RecordsPerPerson(limits.records_per_person));
        }
        self.fits(limits, held, bytes)
    }

    /// Whether `more` bytes of `held`'s fit.
    fn fits(&self, limits: &Limits, held: Option<&Held>, more: u64) -> Result<(), Bound> {
        if held.map_or(0, |held| held.bytes).saturating_add(more) > limits.bytes_per_person {
            return Err(Bound::BytesPerPerson(limits.bytes_per_person));
        }
        if self.bytes.saturating_add(more) > limits.bytes {
            return Err(Bound::Bytes(limits.bytes));
        }
        Ok(())
    }

    pub(super) fn add(&mut self, id: &str, owner: Option<String>, bytes: u64, expires_ms: u64) {
        let held = self.people.entry(owner.clone()).or_default();
        held.records += 1;
        held.bytes += bytes;
        self.bytes += bytes;
        self.expiring.insert((expires_ms, id.to_string()));
        self.records
            .insert(id.to_string(), Counted { owner, bytes });
    }

    /// Whether the record `id` may become `bytes` long: within the bounds,
    /// for `Growth::Bounded`; always, if it is not counted (it expired).
    pub(super) fn resizes(
        &self,
        limits: &Limits,
        id: &str,
        bytes: u64,
        growth: Growth,
    ) -> Result<(), Bound> {
        let Some(counted) = self.records.get(id) else {
            return Ok(());
        };
        let more = bytes.saturating_sub(counted.bytes);
        if growth == Growth::Free || more == 0 {
            return Ok(());
        }
        self.fits(limits, self.people.get(&counted.owner), more)
    }

    pub(super) fn resize(&mut self, id: &str, bytes: u64) {
        let Some(counted) = self.records.get_mut(id) else {
            return;
        };
        let was = std::mem::replace(&mut counted.bytes, bytes);
        let held = self.people.entry(counted.owner.clone()).or_default();
        held.bytes = held.bytes.saturating_sub(was) + bytes;
        self.bytes = self.bytes.saturating_sub(was) + bytes;
    }
}
