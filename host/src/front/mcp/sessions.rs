//! Who holds each MCP session, and when it ends.
//!
//! - Ownership: a session answers only to the person whose token opened
//!   it; anyone else naming its id is told there is no such session (the
//!   same answer as for an id never given out). One person may hold
//!   `--max-sessions-per-person` sessions at once, so that one caller
//!   cannot take every session (`--max-sessions`) from the rest.
//! - Revocation: a session whose token is taken out of the tokens file is
//!   ended with its streams. (A session opened with an access token lives
//!   on when the token expires: its holder comes back with a fresh one,
//!   and the session answers to them by name.)
//! - Idleness: after `--session-idle-secs` with no request on it, unless a
//!   client is listening on its GET stream. A client that only listens (an
//!   open GET stream, nothing else, as an agent waiting for `list_changed`
//!   does) keeps its session for as long as the stream is open; rmcp's own
//!   idle timer counts only messages, and would close such a session under
//!   the listener (the TypeScript SDK then gets -32001 and misses every
//!   later notification). The stream itself carries an SSE keep-alive
//!   comment every 15 s (rmcp's default), below common proxy timeouts.
//!
//! Sessions are looked at only when one could have expired or the tokens
//! file changed: the reaper sleeps until the earliest deadline, or until
//! a session opens or the tokens change, so an idle server with no
//! sessions does nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::catalog_methods::CatalogLimits;
use crate::edge::auth::{Authority, Identity};

/// A person who already holds as many sessions as one person may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{person:?} already holds {held} MCP sessions, the most one person may \
     (--max-sessions-per-person {most}); close one (DELETE /mcp) or let it expire"
)]
pub(crate) struct SessionsFull {
    pub(crate) person: String,
    pub(crate) held: usize,
    pub(crate) most: usize,
}

/// The header that names a session, on every request after `initialize`.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// What is known of one session.
struct Session {
    /// When the last request on it arrived, or its last stream closed.
    last: Instant,
    /// GET streams open on it now.
    listening: usize,
    /// Who opened it (`None` on an open server).
    owner: Option<Identity>,
}

/// Every open session, and the task that ends idle and revoked ones.
pub(crate) struct Sessions {
    idle: Duration,
    max_per_person: usize,
    authority: Arc<Authority>,
    /// Subscriptions a session holds go back to its person when it ends.
    catalogs: Arc<CatalogLimits>,
    table: Mutex<Table>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Table {
    open: HashMap<String, Session>,
    /// `initialize` requests in progress, by person: counted against their
    /// share until the session they open is recorded (or they fail).
    opening: HashMap<String, usize>,
}

/// Held while a GET stream is open on a session; dropped with the stream.
pub(crate) struct Listening {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut table = self.sessions.lock();
        if let Some(session) = table.open.get_mut(&self.id) {
            session.listening = session.listening.saturating_sub(1);
            session.last = Instant::now();
        }
        drop(table);
        self.sessions.changed.notify_one();
    }
}

/// A person's `initialize` in progress: it holds one of their session
/// slots until [`Sessions::opened`] records the session, or it is dropped.
pub(crate) struct Opening {
    sessions: Arc<Sessions>,
    person: Option<String>,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let Some(person) = &self.person else { return };
        let mut table = self.sessions.lock();
        if let Some(count) = table.opening.get_mut(person) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                table.opening.remove(person);
            }
        }
    }
}

impl Sessions {
    /// Starts the reaper for `manager`'s sessions; it ends at `shutdown`.
    pub(crate) fn start(
        manager: Arc<LocalSessionManager>,
        idle: Duration,
        max_per_person: usize,
        authority: Arc<Authority>,
        catalogs: Arc<CatalogLimits>,
        shutdown: CancellationToken,
    ) -> Arc<Sessions> {
        let sessions = Arc::new(Sessions {
            idle,
            max_per_person,
            authority,
            catalogs,
            table: Mutex::new(Table::default()),
            changed: tokio::sync::Notify::new(),
        });
        tokio::spawn(reap(sessions.clone(), manager, shutdown));
        sessions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for `owner`'s new session, or the refusal when they hold
    /// their share already.
    pub(crate) fn open(
        self: &Arc<Self>,
        owner: Option<&Identity>,
    ) -> Result<Opening, SessionsFull> {
        let person = owner.map(|identity| identity.name.clone());
        if let Some(person) = &person {
            let mut table = self.lock();
            let held = table
                .open
                .values()
                .filter(|session| session.owner.as_ref().is_some_and(|o| o.name == *person))
                .count()
                + table.opening.get(person).copied().unwrap_or(0);
            if held >= self.max_per_person {
                return Err(SessionsFull {
                    person: person.clone(),
                    held,
                    most: self.max_per_person,
                });
            }
            *table.opening.entry(person.clone()).or_default() += 1;
        }
        Ok(Opening {
            sessions: self.clone(),
            person,
        })
    }

    /// Session `id` was opened by `owner` (its slot was `opening`).
    pub(crate) fn opened(&self, id: &str, owner: Option<Identity>, opening: Opening) {
        let mut table = self.lock();
        let session = table.open.entry(id.to_string()).or_insert(Session {
            last: Instant::now(),
            listening: 0,
            owner: None,
        });
        session.owner = owner;
        session.last = Instant::now();
        drop(table);
        drop(opening);
        self.changed.notify_one();
    }

    /// Whether session `id` is open and answers to `requester`: the person
    /// who opened it (anyone, on an open server).
    pub(crate) fn answers_to(&self, id: &str, requester: Option<&Identity>) -> bool {
        let table = self.lock();
        let Some(session) = table.open.get(id) else {
            // Not seen yet (rmcp opened it an instant ago): only an open
            // server lets anyone in.
            return requester.is_none();
        };
        match (&session.owner, requester) {
            (Some(owner), Some(requester)) => owner.name == requester.name,
            (None, None) => true,
            _ => false,
        }
    }

    /// A request arrived on session `id`.
    pub(crate) fn used(&self, id: &str) {
        if let Some(session) = self.lock().open.get_mut(id) {
            session.last = Instant::now();
        }
    }

    /// A GET stream opened on session `id`; it counts until the returned
    /// guard is dropped.
    pub(crate) fn listening(self: &Arc<Self>, id: &str) -> Listening {
        if let Some(session) = self.lock().open.get_mut(id) {
            session.last = Instant::now();
            session.listening += 1;
        }
        Listening {
            sessions: self.clone(),
            id: id.to_string(),
        }
    }

    /// The session was ended (by its client, idle or revoked): it holds
    /// its person's subscriptions no more, before the answer goes out.
    pub(crate) fn ended(&self, id: &str) {
        self.lock().open.remove(id);
        self.catalogs.session_ended(id);
    }

    /// The sessions to end now (idle past their deadline, or their token
    /// revoked), and the earliest moment another could be due.
    fn due(&self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let table = self.lock();
        let mut ending = Vec::new();
        let mut next: Option<Instant> = None;
        let mut sooner = |deadline: Instant| {
            next = Some(next.map_or(deadline, |next| next.min(deadline)));
        };
        for (id, session) in table.open.iter() {
            if session
                .owner
                .as_ref()
                .is_some_and(|owner| !self.authority.still_held(owner))
            {
                ending.push(id.clone());
                continue;
            }
            if session.listening > 0 {
                continue;
            }
            let deadline = session.last + self.idle;
            if deadline <= now {
                ending.push(id.clone());
            } else {
                sooner(deadline);
            }
        }
        (ending, next)
    }
}

/// Ends idle and revoked sessions as they come due, until the server
/// shuts down.
async fn reap(live: Arc<Sessions>, manager: Arc<LocalSessionManager>, shutdown: CancellationToken) {
    let mut tokens_changed = live.authority.changes();
    loop {
        let (ending, next) = live.due(Instant::now());
        for id in ending {
            live.ended(&id);
            let _ = manager.close_session(&id.clone().into()).await;
            tracing::debug!(session = %id, "MCP session ended: idle or its token revoked");
        }
        // Forget sessions their clients ended (DELETE, or rmcp on its own),
        // and adopt any open session not seen yet, so none outlives its
        // idle time unnoticed.
        let open: std::collections::HashSet<String> = manager
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        {
            let mut table = live.lock();
            table.open.retain(|id, _| open.contains(id));
            for id in open {
                table.open.entry(id).or_insert(Session {
                    last: Instant::now(),
                    listening: 0,
                    owner: None,
                });
            }
        }
        let changed = live.changed.notified();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = changed => {}
            () = async {
                // The authority keeps its sender for as long as it lives.
                if tokens_changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            } => {}
            () = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}
