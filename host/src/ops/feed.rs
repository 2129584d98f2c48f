//! `GET /events`: what happens on the server, as server-sent events, for
//! the dashboard and any other client (`curl -N`, an `EventSource`).
//!
//! - First a `snapshot` event: the `/plugins` report as it is now, and a
//!   `calls` event with the activity so far.
//! - Then one event per load outcome, named by its kind (`compiling`,
//!   `loaded`, `replaced`, `rejected`, `removed`, `optimised`), with
//!   `{kind, plugin, report}` as data and an `id`: `N-TOKEN`, where `N`
//!   counts the events this client was sent (1, 2, 3...: it counts only
//!   what it sees, so it tells nothing of plugins hidden from it) and
//!   `TOKEN` names the server's place in its feed by a keyed hash no client
//!   can read back.
//! - A `calls` event every [`SUMMARY_EVERY`] when calls were made since the
//!   last one: each tool's calls by outcome and its recent p50/p95, from
//!   the call ledger (the one count every reader shares). It has no `id`,
//!   so it never moves a client's `Last-Event-ID`.
//! - A reconnecting client that sends `Last-Event-ID` gets the load events
//!   it missed from the last [`KEPT`], its count going on (or a fresh
//!   `snapshot` when it missed more, or the server restarted).
//! - A `build` event for each stage of a source build (`queued`,
//!   `building`, `built`, `failed`: `{plugin, person, language, stage,
//!   seconds, error, line, position, estimateSeconds, publish}`; the error,
//!   line and publish number only for the listener's own plugins, and
//!   admins), then a `line` event: the build line now (`waiting` and
//!   `building` count everyone's; `entries` are the builds the listener
//!   hears of). A plugin new and held for approval is heard of by its
//!   publisher and the admins only. No `id`: they are not replayed.
//! - A `publish` event for each publish's outcome as the room's view
//!   keeps it (`GET /publishes`' entries, filtered the same way).
//! - A `skills` event (`{}`) when a skills folder was read again: each
//!   listener reads what it sees of them from `GET /skills`.
//! - A keep-alive comment every 15 s, below common proxy timeouts.
//!
//! One person holds at most `--max-streams-per-person` streams, this one
//! and MCP's together (`edge/holds.rs`); one more gets 503 `BUSY`.
//!
//! As with `/plugins`, only admins (and everyone on an open server) see
//! server paths and other people's refusal reasons. A stream ends when its
//! listener's token is taken out of the tokens file, or their access
//! token expires. The feed keeps the last [`KEPT`] events from the moment the
//! server starts, whether anyone listens or not; with no client connected
//! it does nothing but that.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use futures_util::StreamExt;

use crate::builds::{BuildEvent, Builds};
use crate::call::Calls;
use crate::edge::auth::Authority;
use crate::edge::guard::Requester;
use crate::edge::holds::{Holds, Ticket};
use crate::publishing::publish::{Noted, Publishing};
use crate::registry::Registry;
use crate::registry::events::{LoadEvent, LoadEventKind};

/// How many load events are kept for clients that reconnect.
const KEPT: usize = 256;
/// How often a `calls` summary may be sent.
const SUMMARY_EVERY: Duration = Duration::from_secs(5);

/// One load event as the feed numbered it.
#[derive(Clone)]
struct Numbered {
    id: u64,
    event: LoadEvent,
}

/// The load events since the server started, numbered, the last [`KEPT`]
/// of them kept.
pub(crate) struct EventFeed {
    kept: Mutex<VecDeque<Numbered>>,
    live: broadcast::Sender<Numbered>,
    /// The key of the tokens that name places in the feed (random, per
    /// process): a client reads nothing from one.
    key: std::collections::hash_map::RandomState,
}

impl EventFeed {
    /// Starts numbering the registry's load events until `shutdown`.
    pub(crate) fn start(registry: &Registry, shutdown: CancellationToken) -> Arc<EventFeed> {
        let feed = Arc::new(EventFeed {
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
            live: broadcast::Sender::new(KEPT),
            key: std::collections::hash_map::RandomState::new(),
        });
        let mut events = registry.events();
        let writer = feed.clone();
        tokio::spawn(async move {
            let mut next = 1u64;
            loop {
                let event = tokio::select! {
                    event = events.recv() => event,
                    () = shutdown.cancelled() => return,
                };
                match event {
                    Ok(event) => {
                        let numbered = Numbered { id: next, event };
                        next += 1;
                        let mut kept = writer.kept.lock().unwrap_or_else(|e| e.into_inner());
                        if kept.len() == KEPT {
                            kept.pop_front();
                        }
                        kept.push_back(numbered.clone());
                        drop(kept);
                        let _ = writer.live.send(numbered);
                    }
                    // Missed ones are not numbered: a client that reconnects
                    // across the gap gets a snapshot, as for any gap.
                    Err(RecvError::Lagged(missed)) => next += missed,
                    Err(RecvError::Closed) => return,
                }
            }
        });
        feed
    }

    /// The kept events after `last`, if none after it was dropped; `None`
    /// when the client must start over from a snapshot.
    fn since(&self, last: u64) -> Option<Vec<Numbered>> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let newest = kept.back().map_or(0, |event| event.id);
        let oldest = kept.front().map_or(newest + 1, |event| event.id);
        if last > newest || last + 1 < oldest {
            return None;
        }
        Some(
            kept.iter()
                .filter(|event| event.id > last)
                .cloned()
                .collect(),
        )
    }

    /// The id of the newest event so far (0 before the first).
    fn newest(&self) -> u64 {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.back().map_or(0, |event| event.id)
    }

    /// The token that names place `id` (after event `id`) to clients.
    fn token(&self, id: u64) -> String {
        use std::hash::BuildHasher;
        format!("{:016x}", self.key.hash_one(id))
    }

    /// The place a client's `Last-Event-ID` (`N-TOKEN`) names, with its
    /// count: one still kept (or the start, `0`), else `None`.
    fn place_of(&self, last: &str) -> Option<(u64, u64)> {
        let last = last.trim();
        if last == "0" {
            return Some((0, 0));
        }
        let (count, token) = last.split_once('-')?;
        let count = count.parse::<u64>().ok()?;
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = kept.front().map_or(1, |event| event.id);
        std::iter::once(oldest - 1)
            .chain(kept.iter().map(|event| event.id))
            .find(|id| self.token(*id) == token)
            .map(|id| (id, count))
    }
}

#[derive(Clone)]
struct EventsState {
    registry: Arc<Registry>,
    /// The ledger the call summaries are read from.
    calls: Arc<Calls>,
    feed: Arc<EventFeed>,
    /// Whose build stages are told as `build` events.
    builds: Arc<Builds>,
    /// Whose publishes' outcomes are told as `publish` events.
    publishing: Arc<Publishing>,
    /// A stream ends when its listener's token is revoked.
    authority: Arc<Authority>,
    /// Each person's open streams (`--max-streams-per-person`).
    holds: Arc<Holds>,
}

pub(crate) fn router(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    feed: Arc<EventFeed>,
    builds: Arc<Builds>,
    publishing: Arc<Publishing>,
    authority: Arc<Authority>,
    holds: Arc<Holds>,
) -> Router {
    Router::new()
        .route("/events", get(events))
        .with_state(EventsState {
            registry,
            calls,
            feed,
            builds,
            publishing,
            authority,
            holds,
        })
}

/// What one stream has sent so far.
struct Stream {
    state: EventsState,
    /// Who listens: what they may see of the reports.
    viewer: Requester,
    live: broadcast::Receiver<Numbered>,
    /// Build stages as they happen (not kept: `GET /publishes` is the
    /// room's history).
    builds: broadcast::Receiver<BuildEvent>,
    /// Moves of the other replicas' build lines (a `line` event each).
    moves_elsewhere: tokio::sync::watch::Receiver<crate::builds::line::LineView>,
    /// Publishes' outcomes as they are noted (the room's view).
    noted: broadcast::Receiver<Noted>,
    /// Bumped when a skills folder was read again (a `skills` event).
    skills: tokio::sync::watch::Receiver<u64>,
    /// Events to send before listening (a replay, or a snapshot).
    queued: VecDeque<Event>,
    /// The id of the last load event sent (the feed's, never told).
    last_id: u64,
    /// How many events with an id this client was sent: its own count.
    count: u64,
    /// The ledger's version when the last summary was sent.
    summarised: u64,
    summaries: tokio::time::Interval,
}

async fn events(
    State(state): State<EventsState>,
    requester: Option<axum::Extension<Requester>>,
    ticket: Option<axum::Extension<Ticket>>,
    headers: HeaderMap,
) -> Response {
    let viewer = requester.map_or(Requester(None), |axum::Extension(requester)| requester);
    let open = match state
        .holds
        .stream(viewer.0.as_ref(), ticket.map(|ticket| ticket.peer))
    {
        Ok(open) => open,
        Err(refused) => return crate::edge::guard::busy(false, &refused),
    };
    // Listen first, then read what is kept: nothing falls in between, and
    // what arrives twice is skipped by id.
    let live = state.feed.live.subscribe();
    let builds = state.builds.events();
    let moves_elsewhere = state.builds.moves_elsewhere();
    let noted = state.publishing.noted_events();
    let asked = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| state.feed.place_of(value));
    let mut stream = Stream {
        viewer: viewer.clone(),
        live,
        builds,
        moves_elsewhere,
        noted,
        skills: state.registry.skills_changes(),
        queued: VecDeque::new(),
        last_id: 0,
        count: asked.map_or(0, |(_, count)| count),
        summarised: state.calls.ledger().version(),
        summaries: tokio::time::interval_at(
            tokio::time::Instant::now() + SUMMARY_EVERY,
            SUMMARY_EVERY,
        ),
        state,
    };
    match asked.and_then(|(last, _)| stream.state.feed.since(last).map(|missed| (last, missed))) {
        Some((last, missed)) => {
            stream.last_id = last;
            for numbered in missed {
                stream.queue_load_event(numbered);
            }
        }
        None => stream.queue_snapshot(),
    }
    let revoked = {
        let (authority, listener) = (stream.state.authority.clone(), viewer.0.clone());
        async move { authority.revoked(listener.as_ref()).await }
    };
    // The stream is counted for its person until it ends.
    let events = futures_util::stream::unfold((stream, open), |(mut stream, open)| async move {
        let event = stream.next().await?;
        Some((Ok::<_, Infallible>(event), (stream, open)))
    })
    .take_until(revoked);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

impl Stream {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some(event);
            }
            tokio::select! {
                received = self.live.recv() => match received {
                    Ok(numbered) if numbered.id > self.last_id => self.queue_load_event(numbered),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.queue_snapshot(),
                    Err(RecvError::Closed) => return None,
                },
                received = self.builds.recv() => match received {
                    Ok(mut build) => {
                        // Every move of the line is told to everyone (the
                        // positions behind it changed), after the stage
                        // itself to those who hear of its plugin's builds.
                        let known = self.known_if_held();
                        let line = self.line_event(known.as_ref());
                        if !self.refreshed_viewer().sees_build_of(&build.plugin, known.as_ref()) {
                            return Some(line);
                        }
                        if !self.viewer.sees_reasons_of(&build.plugin) {
                            build.error = None;
                            build.line = None;
                            build.publish = None;
                        }
                        self.queued.push_back(line);
                        return Some(
                            Event::default()
                                .event("build")
                                .data(serde_json::to_string(&build).unwrap_or_default()),
                        );
                    }
                    Err(RecvError::Lagged(_)) => {
                        let known = self.known_if_held();
                        return Some(self.line_event(known.as_ref()));
                    }
                    Err(RecvError::Closed) => return None,
                },
                moved = self.moves_elsewhere.changed() => {
                    // The builds (which tell) live as long as the server.
                    moved.ok()?;
                    let known = self.known_if_held();
                    return Some(self.line_event(known.as_ref()));
                }
                received = self.noted.recv() => match received {
                    Ok(noted) => {
                        let known = self.state.registry.plugins_report();
                        if let Some(noted) = self.refreshed_viewer().sees_noted(noted, &known) {
                            return Some(
                                Event::default()
                                    .event("publish")
                                    .data(serde_json::to_string(&noted).unwrap_or_default()),
                            );
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                changed = self.skills.changed() => {
                    changed.ok()?;
                    // Only that they changed: each reads its own `GET /skills`.
                    return Some(Event::default().event("skills").data("{}"));
                }
                _ = self.summaries.tick() => {
                    let version = self.state.calls.ledger().version();
                    if version != self.summarised {
                        self.summarised = version;
                        return Some(self.summary());
                    }
                }
            }
        }
    }

    /// The plugins report where approvals hold new versions (what a
    /// build's listener may hear of depends on it), else none.
    fn known_if_held(&self) -> Option<crate::registry::report::PluginsReport> {
        self.state
            .registry
            .approvals()
            .is_some()
            .then(|| self.state.registry.plugins_report())
    }

    /// The build line now, as this viewer may see it: everyone's counts,
    /// the entries of plugins whose builds they hear of (a `line` event).
    fn line_event(&mut self, known: Option<&crate::registry::report::PluginsReport>) -> Event {
        let line = self.state.builds.line();
        let viewer = self.refreshed_viewer();
        let line = line.seen_by(
            |id| viewer.sees_build_of(id, known),
            |id| viewer.sees_reasons_of(id),
        );
        Event::default()
            .event("line")
            .data(serde_json::to_string(&line).unwrap_or_default())
    }

    /// The viewer with their tool set as the tokens file says now (an
    /// edited set counts on an open stream too).
    fn refreshed_viewer(&mut self) -> &Requester {
        if let Some(identity) = self.viewer.0.as_mut() {
            identity.tools = self.state.authority.view_now(Some(identity));
        }
        &self.viewer
    }

    /// Queues one load event, replayed or live, unless the viewer does not
    /// see its plugin, or it tells of a version held for approval that is
    /// not theirs (what serves did not change for them).
    fn queue_load_event(&mut self, numbered: Numbered) {
        self.last_id = numbered.id;
        // With approvals, a version being compiled may be held: what is
        // not serving yet is its publisher's and the admins' to hear of.
        let approvals = self.state.registry.approvals().is_some();
        let viewer = self.refreshed_viewer();
        let not_yet = numbered.event.kind == LoadEventKind::Compiling
            && approvals
            && numbered.event.report.serving.is_none()
            && numbered.event.report.state != crate::registry::report::PluginState::Loaded;
        let held_elsewhere = (numbered.event.kind == LoadEventKind::Pending || not_yet)
            && !viewer.sees_reasons_of(&numbered.event.plugin);
        if viewer.hides(&numbered.event.report) || held_elsewhere {
            return;
        }
        let mut event = numbered.event;
        event.report = self.viewer.sees_plugin(event.report);
        let kind = event.kind.as_str();
        let data = serde_json::to_string(&event).unwrap_or_default();
        let id = self.next_id(numbered.id);
        self.queued
            .push_back(Event::default().id(id).event(kind).data(data));
    }

    /// The id this client is told for the feed's place `id`: its own count
    /// of events, and the place's token.
    fn next_id(&mut self, id: u64) -> String {
        self.count += 1;
        format!("{}-{}", self.count, self.state.feed.token(id))
    }

    fn queue_snapshot(&mut self) {
        self.queued.clear();
        self.last_id = self.state.feed.newest();
        let viewer = self.refreshed_viewer().clone();
        let report = viewer.sees(self.state.registry.plugins_report());
        let id = self.next_id(self.last_id);
        self.queued.push_back(
            Event::default()
                .id(id)
                .event("snapshot")
                .data(serde_json::to_string(&report).unwrap_or_default()),
        );
        // The activity so far, so that a new client need not wait for the
        // next summary.
        self.summarised = self.state.calls.ledger().version();
        let summary = self.summary();
        self.queued.push_back(summary);
    }

    fn summary(&mut self) -> Event {
        let mut tools = self.state.calls.ledger().activity();
        let viewer = self.refreshed_viewer().clone();
        tools.retain(|tool| viewer.sees_plugin_id(&tool.plugin));
        Event::default()
            .event("calls")
            .data(json!({ "tools": tools }).to_string())
    }
}
