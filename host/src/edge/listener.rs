//! The HTTP server under REST and MCP: accepts connections and serves the
//! router on each, with the transport limits `axum::serve` does not offer.
//!
//! - TCP_NODELAY on every accepted socket. A response often goes out in
//!   more than one write (headers then body, SSE events); with Nagle's
//!   algorithm the second small write waits for the client's delayed ACK,
//!   about 40 ms per call on an MCP session.
//! - A header-read timeout (`--header-timeout-ms`, default 10 s): a client
//!   must send a request's whole header within it, and a keep-alive
//!   connection that sends no next request is closed after it. A response
//!   in progress, such as an SSE stream, is not affected. One timer per
//!   connection keeps it ([`header_watchdog`]), armed for when the
//!   connection's idle time would run out and looked at only when it
//!   fires: hyper's own timer was made and dropped on every request.
//! - A connection cap (`--max-connections`, default 1024), so idle or slow
//!   clients cannot take every file descriptor. At the cap, the oldest
//!   connection with no request in flight (an answered keep-alive one, or
//!   one that has sent no whole request yet, silent or slow) is closed to
//!   make room, as nginx does; when every one has a request in flight a new
//!   connection waits up to 500 ms for any slot to come back, then takes
//!   one of the reserve past the cap (`holds.rs`: for the probes, admins
//!   and people with nothing else in flight), and only then gets a 503
//!   BUSY envelope and is closed. Each request carries a [`Ticket`] for
//!   the guard to count it for its person (`--max-connections-per-person`)
//!   until its answer is sent whole.
//! - Every request body on a clock (`body.rs`): a pause past the header
//!   timeout, or the whole past `--body-timeout-secs`, ends it with 408,
//!   with a token or without, so a trickling client holds its slot no
//!   longer than that.
//! - Graceful shutdown: on the shutdown signal it stops accepting, and open
//!   connections get a short grace period to finish.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use futures_util::future::BoxFuture;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::body::{BodyLimits, timed};
use crate::edge::holds::{Holds, Ticket, reserve_of};
use crate::edge::outer::{Outer, outer};

/// How long open connections may take to finish once shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long a connection at the cap waits for a slot (the one an evicted
/// idle connection gives back, or any other) before it is refused.
const EVICTION_WAIT: Duration = Duration::from_millis(500);

/// How many connections at the cap may wait for a slot at once; past it
/// they are refused at once.
const MAX_WAITING: usize = 64;

/// One open connection, as eviction sees it.
struct Open {
    activity: Arc<Activity>,
    evict: CancellationToken,
}

/// A connection's requests, as eviction and its header watchdog see them.
struct Activity {
    /// When the connection opened: `idle_since` counts from it.
    opened: Instant,
    /// Answers not sent whole yet (an SSE stream counts until it ends) and
    /// request bodies not ended yet (one drained after its answer counts).
    in_flight: AtomicUsize,
    /// When the connection last had nothing in flight, in milliseconds
    /// since `opened`: 0, or when its last answer or body ended.
    idle_since: AtomicU64,
    /// Its answer has been sent whole, and only its request's body is
    /// still coming (drained for a lingering close, or never read): at the
    /// cap it may be closed as an idle one is.
    draining: std::sync::atomic::AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            draining: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Idle, or only a body left to drain after its answer.
    fn may_close(&self) -> bool {
        self.is_idle() || self.draining.load(Ordering::Acquire)
    }

    /// When the connection went idle, if it is.
    fn idle_since(&self) -> Option<Instant> {
        self.is_idle()
            .then(|| self.opened + Duration::from_millis(self.idle_since.load(Ordering::Acquire)))
    }
}

/// The open connections, oldest first (ids only grow).
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Open>>,
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the oldest connection with no request in flight (idle
    /// keep-alive, or not yet through its first request), or, with none,
    /// the oldest whose answer was sent and whose body is still coming (a
    /// refused slow body draining), if there is one.
    fn evict_oldest_idle(&self) {
        let open = self.lock();
        let candidates = || open.values().filter(|c| !c.evict.is_cancelled());
        let chosen = candidates()
            .find(|connection| connection.activity.is_idle())
            .or_else(|| candidates().find(|connection| connection.activity.may_close()));
        if let Some(connection) = chosen {
            connection.evict.cancel();
        }
    }
}

/// Counts an answer until it has been sent whole, or a request body until
/// it has ended (or either is dropped).
struct InFlight {
    activity: Arc<Activity>,
    /// An answer (not a body): when it ends with its body still coming,
    /// the connection is draining.
    answer: bool,
}

impl InFlight {
    fn answer(activity: &Arc<Activity>) -> InFlight {
        activity.draining.store(false, Ordering::Release);
        Self::start(activity, true)
    }

    fn body(activity: &Arc<Activity>) -> InFlight {
        Self::start(activity, false)
    }

    fn start(activity: &Arc<Activity>, answer: bool) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight {
            activity: activity.clone(),
            answer,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The time first: a watchdog that sees no request in flight sees
        // when the last one ended.
        let idle = self.activity.opened.elapsed().as_millis() as u64;
        self.activity.idle_since.store(idle, Ordering::Release);
        let left = self.activity.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if self.answer && left > 0 {
            self.activity.draining.store(true, Ordering::Release);
        }
    }
}

/// Ends when `activity`'s connection has had no request in flight for
/// `timeout`: it sent no whole header in that time (the first request's,
/// or the next one's on a keep-alive connection). One timer, re-armed only
/// when it fires: for when the idle time would run out, or, with a request
/// in flight, `timeout` later to look again.
async fn header_watchdog(activity: &Activity, timeout: Duration) {
    let mut deadline = activity.opened + timeout;
    loop {
        tokio::time::sleep_until(deadline).await;
        let now = Instant::now();
        deadline = match activity.idle_since() {
            Some(since) if since + timeout <= now => return,
            Some(since) => since + timeout,
            None => now + timeout,
        };
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) header_timeout: Duration,
    pub(crate) max_connections: usize,
    /// How long a request body may take in all.
    pub(crate) body_timeout: Duration,
}

/// What the listener counts: the connections open now (`/metrics` reads
/// it), and what each person holds of them.
pub(crate) struct Counts {
    pub(crate) open_connections: Arc<AtomicUsize>,
    pub(crate) holds: Arc<Holds>,
}

/// A route answered before the router, for the one request the router's
/// work is a large share of: it hands back the requests it does not take.
/// Each request through the router builds its path parameters, clones a
/// boxed route and the guard's boxed service, and boxes their futures; a
/// tool call taken here is boxed once.
pub(crate) type Shortcut =
    Box<dyn Fn(Request) -> Result<BoxFuture<'static, Response>, Request> + Send + Sync>;

/// Serves `app` on `listener` until `shutdown` is cancelled, with the
/// requests `shortcut` takes answered by it instead.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shortcut: Shortcut,
    outer: Outer,
    limits: ConnectionLimits,
    Counts {
        open_connections,
        holds,
    }: Counts,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let server = Arc::new(Server {
        open_connections,
        slots: Arc::new(tokio::sync::Semaphore::new(limits.max_connections)),
        reserve: Arc::new(tokio::sync::Semaphore::new(reserve_of(
            limits.max_connections,
        ))),
        holds,
        waiting: Arc::new(tokio::sync::Semaphore::new(MAX_WAITING)),
        connections: Connections::default(),
        builder: {
            // No `header_read_timeout`: [`header_watchdog`] keeps it.
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.keep_alive(true).header_read_timeout(None);
            builder
        },
        app,
        shortcut,
        outer,
        limits,
        shutdown: shutdown.clone(),
    });
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer.ip()),
                Err(error) => {
                    // Out of descriptors, say: back off instead of spinning.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        if let Ok(slot) = server.slots.clone().try_acquire_owned() {
            tasks.spawn(server.clone().serve_connection(stream, peer, slot, false));
            continue;
        }
        // At the cap: make room by closing the oldest idle keep-alive
        // connection, then wait (briefly, off the accept loop) for the slot
        // it gives back. With none idle, wait all the same: a connection
        // whose client has just read its last answer may not have given
        // its slot back yet, and refusing would be a race lost, not a full
        // server.
        let wait = server.waiting.clone().try_acquire_owned();
        match wait {
            Ok(wait) => {
                server.connections.evict_oldest_idle();
                let server = server.clone();
                tasks.spawn(async move {
                    let slot =
                        tokio::time::timeout(EVICTION_WAIT, server.slots.clone().acquire_owned())
                            .await;
                    drop(wait);
                    match slot {
                        Ok(Ok(slot)) => server.serve_connection(stream, peer, slot, false).await,
                        _ => match server.reserve.clone().try_acquire_owned() {
                            Ok(slot) => server.serve_connection(stream, peer, slot, true).await,
                            Err(_) => refuse(stream, server.limits.max_connections).await,
                        },
                    }
                });
            }
            Err(_) => {
                tokio::spawn(refuse(stream, limits.max_connections));
            }
        }
    }
    drop(listener);
    tasks.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::info!("closing connections still open after the grace period");
    }
    Ok(())
}

/// What every connection task shares.
struct Server {
    /// How many connections are open now (`/metrics` reads it).
    open_connections: Arc<AtomicUsize>,
    slots: Arc<tokio::sync::Semaphore>,
    /// The connections past the cap, for the probes, admins and people
    /// with nothing in flight (`holds.rs`).
    reserve: Arc<tokio::sync::Semaphore>,
    /// What each person holds; every request's [`Ticket`] counts in it.
    holds: Arc<Holds>,
    waiting: Arc<tokio::sync::Semaphore>,
    connections: Connections,
    builder: hyper::server::conn::http1::Builder,
    app: Router,
    shortcut: Shortcut,
    /// What every request passes first and every answer last (`outer.rs`).
    outer: Outer,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
}

impl Server {
    /// Serves one connection from `peer` on its slot (one of the reserve
    /// when `reserve`) until it ends; it is closed once idle when it is
    /// evicted or the server shuts down.
    async fn serve_connection(
        self: Arc<Self>,
        stream: TcpStream,
        peer: std::net::IpAddr,
        slot: tokio::sync::OwnedSemaphorePermit,
        reserve: bool,
    ) {
        let id = self.connections.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        // Cancelled by eviction or, as the server's child, by shutdown: the
        // connection waits on one token of its own. Each poll of a token's
        // `cancelled()` takes that token's lock, and the connection is
        // polled on every read and write; the server's token is every
        // connection's.
        let evict = self.shutdown.child_token();
        self.open_connections.fetch_add(1, Ordering::Relaxed);
        self.connections.lock().insert(
            id,
            Open {
                activity: activity.clone(),
                evict: evict.clone(),
            },
        );
        let server = self.clone();
        let requests = activity.clone();
        let body_limits = BodyLimits {
            pause: self.limits.header_timeout,
            whole: self.limits.body_timeout,
        };
        let service = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            // A request is in flight until its answer has been sent whole
            // and its body has ended: a body still coming after the answer
            // (drained for a lingering close, say) is not an idle
            // connection's silence.
            let guard = InFlight::answer(&requests);
            let mut request =
                request.map(|body| timed(body, body_limits, || InFlight::body(&requests)));
            let ticket = Ticket::new(server.holds.clone(), peer, reserve);
            request.extensions_mut().insert(ticket.clone());
            let server = server.clone();
            async move {
                let response = outer(&server.outer, request, |request| async {
                    match (server.shortcut)(request) {
                        Ok(answer) => with_length(answer.await),
                        Err(request) => {
                            match tower::ServiceExt::oneshot(server.app.clone(), request).await {
                                Ok(response) => response,
                                Err(never) => match never {},
                            }
                        }
                    }
                })
                .await;
                // Counted until the body has been sent whole (or dropped),
                // for the connection and for the person the guard found.
                let held = ticket.take();
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                        let _counted = (&guard, &held);
                        frame
                    }))
                }))
            }
        });
        let connection = self
            .builder
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        tokio::pin!(connection);
        tokio::select! {
            biased;
            _ = connection.as_mut() => {}
            () = evict.cancelled() => {
                if !self.shutdown.is_cancelled() {
                    tracing::debug!("closing an idle keep-alive connection to make room");
                }
                // Answered, its body still coming: closed at once, not
                // after the drain.
                if !activity.is_idle() && activity.may_close() {
                    return self.close(id, slot);
                }
                connection.as_mut().graceful_shutdown();
                // hyper closes a connection with half a header only once
                // the header is whole: the timer still runs.
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = header_watchdog(&activity, self.limits.header_timeout) => {}
                }
            }
            () = header_watchdog(&activity, self.limits.header_timeout) => {
                // Dropped: closed at once, as hyper's own timeout did.
                tracing::debug!("closing a connection that sent no whole request header in time");
            }
        }
        self.close(id, slot);
    }

    /// Forgets connection `id` and gives its slot back.
    fn close(&self, id: u64, slot: tokio::sync::OwnedSemaphorePermit) {
        self.connections.lock().remove(&id);
        self.open_connections.fetch_sub(1, Ordering::Relaxed);
        drop(slot);
    }
}

/// `Content-Length` from a body of known size, as axum's routes set it: the
/// listener's own wrapping of the body hides its size from hyper, which
/// would send it chunked.
fn with_length(mut response: Response) -> Response {
    if let Some(length) = hyper::body::Body::size_hint(response.body()).exact()
        && !response
            .headers()
            .contains_key(http::header::CONTENT_LENGTH)
    {
        response
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, length.into());
    }
    response
}

/// Answers a connection past the cap with 503 and closes it, without
/// parsing its request. What the client sent is read and dropped (briefly,
/// and bounded) before closing: closing a socket with unread data makes the
/// kernel send a reset, and the client would see that instead of the 503.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let envelope = Envelope::host_error(
        ErrorCode::Busy,
        format!("the server already has its maximum of {max_connections} connections open"),
        Some(serde_json::json!({ "maxConnections": max_connections, "retryAfterMs": 1000 })),
    );
    let body =
        serde_json::to_string(&crate::edge::responses::http_body(&envelope)).unwrap_or_default();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                read => drained += read,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
