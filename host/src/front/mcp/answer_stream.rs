//! How the fast path (`fast/`) sends a stateless answer: JSON when the
//! call ends before the plugin says anything, otherwise an SSE stream of
//! what the plugin logs, then the result, as rmcp's one-shot service
//! streams it; and the stateless request's client that collects those
//! log messages.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use rmcp::model::LoggingLevel;
use serde_json::json;
use tokio::sync::Notify;

use crate::runtime::{AskError, ClientChannel, ELICIT, LogLevel, SAMPLE};

use super::session_client::severity;

/// A JSON answer, its one header written once (a `String`'s own answer
/// would say `text/plain` first).
pub(super) fn json_response(message: String) -> Response {
    let mut response = Response::new(Body::from(message));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) type Call = Pin<Box<dyn std::future::Future<Output = String> + Send>>;

/// JSON if the call ends before the plugin sends anything; otherwise an
/// SSE stream of what it sends, then the result. The call runs inside the
/// response's body from then on, so a client that goes away cancels it.
/// Only a stream holds on to `shutdown` (a clone takes the token's lock).
pub(super) async fn respond(
    mut call: Call,
    notes: Arc<StatelessClient>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Response {
    let first = tokio::select! {
        biased;
        done = &mut call => match notes.take() {
            Some(note) => {
                let mut messages = vec![note];
                while let Some(note) = notes.take() {
                    messages.push(note);
                }
                messages.push(done);
                return sse(futures_util::stream::iter(messages).boxed(), shutdown.clone());
            }
            None => {
                let mut response = json_response(done);
                if notes.bad_request.load(std::sync::atomic::Ordering::Relaxed) {
                    *response.status_mut() = axum::http::StatusCode::BAD_REQUEST;
                }
                return response;
            }
        },
        note = notes.next() => note,
    };
    let rest = futures_util::stream::unfold(
        (Some(call), notes, VecDeque::new()),
        |(mut call, notes, mut tail)| async move {
            loop {
                if let Some(next) = tail.pop_front() {
                    return Some((next, (call, notes, tail)));
                }
                let running = call.as_mut()?;
                tokio::select! {
                    biased;
                    note = notes.next() => return Some((note, (call, notes, tail))),
                    done = running => {
                        // What the plugin sent before it returned comes first.
                        while let Some(note) = notes.take() {
                            tail.push_back(note);
                        }
                        tail.push_back(done);
                        call = None;
                    }
                }
            }
        },
    );
    sse(
        futures_util::stream::once(async move { first })
            .chain(rest)
            .boxed(),
        shutdown.clone(),
    )
}

/// How long a stream stays silent before a keep-alive comment, as rmcp's.
const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The stream as rmcp sends one: no proxy buffering, an empty comment
/// after 15 s without a message (a plugin that logs, then works on),
/// ended at shutdown.
fn sse(
    messages: futures_util::stream::BoxStream<'static, String>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Response {
    let messages = messages.take_until(shutdown.cancelled_owned()).boxed();
    let events = futures_util::stream::unfold(messages, |mut messages| async move {
        let event = tokio::select! {
            message = messages.next() => axum::body::Bytes::from(format!("data: {}\n\n", message?)),
            () = tokio::time::sleep(SSE_KEEP_ALIVE) => axum::body::Bytes::from_static(b":\n\n"),
        };
        Some((Ok::<_, std::convert::Infallible>(event), messages))
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A stateless request's client: log messages at rmcp's default level
/// (info) go to the answer's stream; there is no progress token (a request
/// with one goes to rmcp), and no client to ask for sampling or
/// elicitation, as on rmcp's stateless path. The messages wait in a queue
/// of its own (one allocation per call, where a channel takes three: most
/// calls send none).
#[derive(Default)]
pub(super) struct StatelessClient {
    notes: Mutex<VecDeque<String>>,
    sent: Notify,
    /// The answer is an error the transport sends with HTTP 400 (-32021).
    bad_request: std::sync::atomic::AtomicBool,
}

impl StatelessClient {
    /// Sends the answer with HTTP 400, if it goes as JSON.
    pub(super) fn answer_with_bad_request(&self) {
        self.bad_request
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn send(&self, note: String) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(note);
        self.sent.notify_one();
    }

    /// The next message, if one waits.
    fn take(&self) -> Option<String> {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    /// The next message, once there is one (`notify_one` keeps a wake-up
    /// for a sender that comes between `take` and the wait).
    async fn next(&self) -> String {
        loop {
            if let Some(note) = self.take() {
                return note;
            }
            self.sent.notified().await;
        }
    }
}

#[wasmtime_wasi::async_trait]
impl ClientChannel for StatelessClient {
    async fn log(&self, level: LogLevel, message: String) {
        let level = super::session_client::logging_level(level);
        if severity(level) < severity(LoggingLevel::Info) {
            return;
        }
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": { "level": level, "data": message },
        });
        self.send(note.to_string());
    }

    async fn progress(&self, _progress: f64, _total: Option<f64>, _message: Option<String>) {}

    async fn create_message(&self, _params: String) -> Result<String, AskError> {
        Err(AskError::Unsupported(SAMPLE.into()))
    }

    async fn elicit(&self, _params: String) -> Result<String, AskError> {
        Err(AskError::Unsupported(ELICIT.into()))
    }
}
