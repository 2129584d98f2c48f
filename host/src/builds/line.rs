//! The room's line, as people see it: which builds wait (in the order they
//! came, which is the order the fair queue serves them) and which run, how
//! long each has been there, and an estimate of when each goes live from
//! the server's recent build times. The queue ([`super::queue`]) decides
//! who builds; this only tells.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// How many recent build times the estimate is made from.
const RECENT: usize = 20;

/// Where one build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Place {
    Queued,
    Building,
}

struct Entry {
    ticket: u64,
    plugin: String,
    person: String,
    language: &'static str,
    publish: Option<String>,
    place: Place,
    /// When it began to wait for a slot (its lane its own), in the order
    /// of such moments: the order the slots serve it in. `None` while it
    /// waits behind its own person's running build.
    slot_wait: Option<u64>,
    /// When it took its place (for the seconds shown).
    since: Instant,
    /// When it joined the line (RFC 3339).
    joined: SystemTime,
}

/// One build in the line, as told (and as another replica sharing the
/// store reads it, `publishing/shared_line.rs`: a field a newer replica
/// adds is ignored, not a reason to drop its line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LineEntry {
    pub(crate) plugin: String,
    pub(crate) by: String,
    pub(crate) language: String,
    pub(crate) stage: Place,
    /// Queued: 1 is next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) position: Option<usize>,
    /// How long it has waited (queued) or built (building).
    pub(crate) seconds: f64,
    /// About how long until it is live, from the recent build times
    /// (none before the first build ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimate_seconds: Option<f64>,
    /// When it joined the line.
    pub(crate) since: String,
    /// The publisher's own number for the publish, if they sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) publish: Option<String>,
}

/// The whole line at one moment: the counts are everyone's; the entries
/// are filtered to what a viewer sees before they are sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LineView {
    pub(crate) waiting: usize,
    pub(crate) building: usize,
    /// The median of the recent build times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) typical_build_seconds: Option<f64>,
    pub(crate) entries: Vec<LineEntry>,
}

impl LineView {
    /// This line and the lines of other replicas (`elsewhere`): the counts
    /// added; the entries of each replica's line after this one's, building
    /// ones first, then queued ones in the order they joined. A position is
    /// in its own replica's line (each replica's slots serve its own).
    pub(crate) fn with(mut self, elsewhere: &LineView) -> LineView {
        if elsewhere.entries.is_empty() && elsewhere.waiting == 0 && elsewhere.building == 0 {
            return self;
        }
        self.waiting = self.waiting.saturating_add(elsewhere.waiting);
        self.building = self.building.saturating_add(elsewhere.building);
        self.entries.extend(elsewhere.entries.iter().cloned());
        self.entries.sort_by(|a, b| {
            (a.stage != Place::Building)
                .cmp(&(b.stage != Place::Building))
                .then_with(|| a.since.cmp(&b.since))
        });
        self
    }

    /// The line as one viewer may see it: the counts stay everyone's; the
    /// entries are those of plugins `sees` admits, and a publish's own
    /// number only where `owns` (it is the publisher's).
    pub(crate) fn seen_by(
        mut self,
        sees: impl Fn(&str) -> bool,
        owns: impl Fn(&str) -> bool,
    ) -> LineView {
        self.entries.retain(|entry| sees(&entry.plugin));
        for entry in &mut self.entries {
            if !owns(&entry.plugin) {
                entry.publish = None;
            }
        }
        self
    }
}

/// What one build is told when it joins or moves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    pub(crate) position: Option<usize>,
    pub(crate) estimate_seconds: Option<f64>,
    /// It waits behind another build of its own person's (running, or
    /// holding their lane): its place moves once that one is done.
    pub(crate) behind_own: bool,
}

pub(crate) struct Line {
    slots: usize,
    next: std::sync::atomic::AtomicU64,
    /// The order in which builds begin to wait for a slot.
    slot_order: std::sync::atomic::AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    recent: VecDeque<f64>,
}

/// What joins the line.
pub(crate) struct Joining<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) person: &'a str,
    pub(crate) language: &'static str,
    pub(crate) publish: Option<&'a str>,
}

impl Line {
    pub(crate) fn new(slots: usize) -> Line {
        Line {
            slots: slots.max(1),
            next: std::sync::atomic::AtomicU64::new(0),
            slot_order: std::sync::atomic::AtomicU64::new(0),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A build joins the line at its end, queued: its ticket, and where
    /// it stands.
    pub(crate) fn join(&self, joining: Joining<'_>) -> (u64, Standing) {
        let ticket = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut state = self.state();
        // A person has at most one build waiting: this one replaces the
        // one that waited (the queue answers it as replaced), from now.
        state
            .entries
            .retain(|entry| !(entry.person == joining.person && entry.place == Place::Queued));
        state.entries.push(Entry {
            ticket,
            plugin: joining.plugin.to_string(),
            person: joining.person.to_string(),
            language: joining.language,
            publish: joining.publish.map(str::to_string),
            place: Place::Queued,
            slot_wait: None,
            since: Instant::now(),
            joined: SystemTime::now(),
        });
        (ticket, self.standing(&state, ticket))
    }

    /// Build `ticket` now waits for a slot (its person's lane is free).
    pub(crate) fn waiting_for_slot(&self, ticket: u64) -> Standing {
        let order = self
            .slot_order
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut state = self.state();
        if let Some(entry) = state.entries.iter_mut().find(|e| e.ticket == ticket) {
            entry.slot_wait = Some(order);
        }
        self.standing(&state, ticket)
    }

    /// Build `ticket` got its turn.
    pub(crate) fn building(&self, ticket: u64) -> Standing {
        let mut state = self.state();
        if let Some(entry) = state.entries.iter_mut().find(|e| e.ticket == ticket) {
            entry.place = Place::Building;
            entry.since = Instant::now();
        }
        self.standing(&state, ticket)
    }

    /// Build `ticket` left the line; `took` is how long it built, when it
    /// ran to an end (a build time for the estimates).
    pub(crate) fn leave(&self, ticket: u64, took: Option<Duration>) {
        let mut state = self.state();
        state.entries.retain(|e| e.ticket != ticket);
        if let Some(took) = took {
            if state.recent.len() == RECENT {
                state.recent.pop_front();
            }
            state.recent.push_back(took.as_secs_f64());
        }
    }

    /// The line now.
    pub(crate) fn view(&self) -> LineView {
        let state = self.state();
        let typical = typical(&state.recent);
        let places = places(&state.entries);
        let entries = state
            .entries
            .iter()
            .map(|entry| {
                let position = places.get(&entry.ticket).copied();
                LineEntry {
                    plugin: entry.plugin.clone(),
                    by: entry.person.clone(),
                    language: entry.language.to_string(),
                    stage: entry.place,
                    position,
                    seconds: round(entry.since.elapsed().as_secs_f64()),
                    estimate_seconds: self.estimate(typical, position, entry.since.elapsed()),
                    since: humantime::format_rfc3339_seconds(entry.joined).to_string(),
                    publish: entry.publish.clone(),
                }
            })
            .collect::<Vec<_>>();
        LineView {
            waiting: entries.iter().filter(|e| e.stage == Place::Queued).count(),
            building: entries
                .iter()
                .filter(|e| e.stage == Place::Building)
                .count(),
            typical_build_seconds: typical.map(round),
            entries,
        }
    }

    fn standing(&self, state: &State, ticket: u64) -> Standing {
        let typical = typical(&state.recent);
        let position = places(&state.entries).get(&ticket).copied();
        let elapsed = state
            .entries
            .iter()
            .find(|entry| entry.ticket == ticket)
            .map_or(Duration::ZERO, |entry| entry.since.elapsed());
        let person = state
            .entries
            .iter()
            .find(|entry| entry.ticket == ticket)
            .map(|entry| entry.person.as_str());
        let behind_own = state.entries.iter().any(|entry| {
            entry.ticket != ticket
                && Some(entry.person.as_str()) == person
                && (entry.place == Place::Building || entry.slot_wait.is_some())
        });
        Standing {
            position,
            estimate_seconds: self.estimate(typical, position, elapsed),
            behind_own,
        }
    }

    /// Until live: a queued build waits for the builds ahead of it to pass
    /// through the slots (a typical build each, `slots` at a time), then
    /// builds; a running one has what is left of a typical build.
    fn estimate(
        &self,
        typical: Option<f64>,
        position: Option<usize>,
        elapsed: Duration,
    ) -> Option<f64> {
        let typical = typical?;
        Some(round(match position {
            Some(position) => typical * (position.div_ceil(self.slots) as f64 + 1.0),
            None => (typical - elapsed.as_secs_f64()).max(0.0),
        }))
    }
}

/// Each queued build's place (1 is next), as the queue serves them: those
/// waiting for a slot in the order they began to (the slots are fair),
/// then those still behind their own person's running build (one build at
/// a time per person), in the order they came.
fn places(entries: &[Entry]) -> std::collections::HashMap<u64, usize> {
    let mut queued: Vec<&Entry> = entries
        .iter()
        .filter(|entry| entry.place == Place::Queued)
        .collect();
    queued.sort_by_key(|entry| (entry.slot_wait.is_none(), entry.slot_wait, entry.ticket));
    queued
        .iter()
        .enumerate()
        .map(|(at, entry)| (entry.ticket, at + 1))
        .collect()
}

/// The median of the recent build times.
fn typical(recent: &VecDeque<f64>) -> Option<f64> {
    if recent.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = recent.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    Some(sorted[sorted.len() / 2])
}

fn round(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Joins the line, its lane free (it waits for a slot at once).
    fn join(line: &Line, ticket: u64, person: &str) -> Standing {
        let standing = join_behind(line, ticket, person);
        assert!(standing.position.is_some());
        line.waiting_for_slot(ticket)
    }

    /// Joins the line behind its own person's running build.
    fn join_behind(line: &Line, ticket: u64, person: &str) -> Standing {
        let (joined, standing) = line.join(Joining {
            plugin: &format!("{person}/tool"),
            person,
            language: "python",
            publish: None,
        });
        assert_eq!(joined, ticket);
        standing
    }

    #[test]
    fn another_replicas_line_is_added_building_first_then_by_arrival() {
        let here = Line::new(1);
        join(&here, 0, "ada");
        here.building(0);
        join(&here, 1, "bob");
        let there = Line::new(1);
        join(&there, 0, "cy");
        there.building(0);
        join(&there, 1, "dee");
        let mut elsewhere = there.view();
        // As another replica tells it: read back from its JSON.
        elsewhere = serde_json::from_str(&serde_json::to_string(&elsewhere).unwrap()).unwrap();
        elsewhere.entries[1].since = "0000-01-01T00:00:00Z".into();
        let room = here.view().with(&elsewhere);
        assert_eq!((room.waiting, room.building), (2, 2));
        let order: Vec<(&str, Place)> = room
            .entries
            .iter()
            .map(|entry| (entry.by.as_str(), entry.stage))
            .collect();
        assert_eq!(
            order[2],
            ("dee", Place::Queued),
            "the earliest queued first"
        );
        assert!(
            order[..2]
                .iter()
                .all(|(_, stage)| *stage == Place::Building)
        );
        assert_eq!(here.view().with(&LineView::default()).entries.len(), 2);
    }

    #[test]
    fn positions_count_the_queued_ahead_and_estimates_follow_the_recent_builds() {
        let line = Line::new(2);
        assert_eq!(join(&line, 0, "ada").position, Some(1));
        assert_eq!(join(&line, 1, "bob").position, Some(2));
        assert_eq!(join(&line, 2, "cy").position, Some(3));
        assert!(
            join(&line, 3, "dee").estimate_seconds.is_none(),
            "no build ended yet"
        );
        assert_eq!(line.building(0).position, None);
        line.leave(0, Some(Duration::from_secs(10)));
        let view = line.view();
        assert_eq!((view.waiting, view.building), (3, 0));
        let positions: Vec<_> = view.entries.iter().map(|e| e.position).collect();
        assert_eq!(positions, [Some(1), Some(2), Some(3)]);
        // Two slots: the third in line waits for two rounds, then builds.
        assert_eq!(view.entries[2].estimate_seconds, Some(30.0));
        assert_eq!(view.entries[0].estimate_seconds, Some(20.0));
        assert_eq!(view.typical_build_seconds, Some(10.0));
        line.building(1);
        let view = line.view();
        assert_eq!((view.waiting, view.building), (2, 1));
        assert_eq!(view.entries[1].position, Some(1));
        line.leave(1, None);
        line.leave(2, None);
        line.leave(3, None);
        assert!(line.view().entries.is_empty());
    }

    #[test]
    fn a_build_behind_its_own_persons_running_one_lets_the_others_go_first() {
        let line = Line::new(1);
        join(&line, 0, "ada");
        line.building(0);
        // Ada's next one came first, but waits for her running one.
        assert_eq!(join_behind(&line, 1, "ada").position, Some(1));
        assert_eq!(join(&line, 2, "bob").position, Some(1));
        assert_eq!(join(&line, 3, "cy").position, Some(2));
        let places = |line: &Line| -> Vec<(String, Option<usize>)> {
            line.view()
                .entries
                .iter()
                .map(|e| (e.by.clone(), e.position))
                .collect()
        };
        assert_eq!(places(&line)[1], ("ada".to_string(), Some(3)));
        // Ada's first ends; bob builds; her next begins to wait for a
        // slot only now, behind cy, who was waiting already.
        line.leave(0, None);
        line.building(2);
        line.waiting_for_slot(1);
        assert_eq!(
            places(&line),
            [
                ("ada".to_string(), Some(2)),
                ("bob".to_string(), None),
                ("cy".to_string(), Some(1))
            ]
        );
    }
}
