//! When an MCP session ends for want of use: after `--session-idle-secs`
//! with no request on it, unless a client is listening on its GET stream.
//! A client that only listens (an open GET stream, nothing else, as an
//! agent waiting for `list_changed` does) keeps its session for as long as
//! the stream is open; rmcp's own idle timer counts only messages, and
//! would close such a session under the listener (the TypeScript SDK then
//! gets -32001 and misses every later notification). The stream itself
//! carries an SSE keep-alive comment every 15 s (rmcp's default), below
//! common proxy timeouts.
//!
//! Sessions are looked at only when one could have expired: the reaper
//! sleeps until the earliest deadline, or until the first session opens,
//! so an idle server with no sessions does nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What is known of one session's use.
struct Use {
    /// When the last request on it arrived, or its last stream closed.
    last: Instant,
    /// GET streams open on it now.
    listening: usize,
}

/// The use of every open session, and the task that ends idle ones.
pub(crate) struct Sessions {
    idle: Duration,
    uses: Mutex<HashMap<String, Use>>,
    changed: tokio::sync::Notify,
}

/// Held while a GET stream is open on a session; dropped with the stream.
pub(crate) struct Listening {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut uses = self.sessions.lock();
        if let Some(session) = uses.get_mut(&self.id) {
            session.listening = session.listening.saturating_sub(1);
            session.last = Instant::now();
        }
        drop(uses);
        self.sessions.changed.notify_one();
    }
}

impl Sessions {
    /// Starts the reaper for `manager`'s sessions; it ends at `shutdown`.
    pub(crate) fn start(
        manager: Arc<LocalSessionManager>,
        idle: Duration,
        shutdown: CancellationToken,
    ) -> Arc<Sessions> {
        let sessions = Arc::new(Sessions {
            idle,
            uses: Mutex::new(HashMap::new()),
            changed: tokio::sync::Notify::new(),
        });
        tokio::spawn(reap(sessions.clone(), manager, shutdown));
        sessions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Use>> {
        self.uses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request arrived on session `id` (or opened it).
    pub(crate) fn used(&self, id: &str) {
        let mut uses = self.lock();
        let new = !uses.contains_key(id);
        let session = uses.entry(id.to_string()).or_insert(Use {
            last: Instant::now(),
            listening: 0,
        });
        session.last = Instant::now();
        drop(uses);
        if new {
            self.changed.notify_one();
        }
    }

    /// A GET stream opened on session `id`; it counts until the returned
    /// guard is dropped.
    pub(crate) fn listening(self: &Arc<Self>, id: &str) -> Listening {
        self.used(id);
        if let Some(session) = self.lock().get_mut(id) {
            session.listening += 1;
        }
        Listening {
            sessions: self.clone(),
            id: id.to_string(),
        }
    }

    /// The session was ended by its client.
    pub(crate) fn ended(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The sessions past their deadline, and the earliest deadline of the
    /// others that could expire.
    fn due(&self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let uses = self.lock();
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, session) in uses.iter().filter(|(_, s)| s.listening == 0) {
            let deadline = session.last + self.idle;
            if deadline <= now {
                expired.push(id.clone());
            } else {
                next = Some(next.map_or(deadline, |next| next.min(deadline)));
            }
        }
        (expired, next)
    }
}

/// Ends idle sessions as they expire, until the server shuts down.
async fn reap(live: Arc<Sessions>, manager: Arc<LocalSessionManager>, shutdown: CancellationToken) {
    loop {
        let (expired, next) = live.due(Instant::now());
        for id in expired {
            live.ended(&id);
            let _ = manager.close_session(&id.clone().into()).await;
            tracing::debug!(session = %id, "MCP session ended: idle");
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
            let mut uses = live.lock();
            uses.retain(|id, _| open.contains(id));
            for id in open {
                uses.entry(id).or_insert(Use {
                    last: Instant::now(),
                    listening: 0,
                });
            }
        }
        let changed = live.changed.notified();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = changed => {}
            () = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}
