//! A request body's clock, for every request with a body, with a token or
//! without: a pause between two of its pieces longer than the header
//! timeout (`--header-timeout-ms`), or the whole body taking longer than
//! `--body-timeout-secs`, ends it with [`BodyTimeout`]. The listener wraps
//! every body in it ([`timed`]), so no route, authenticated or not, can be
//! held open by a client that trickles its body; what a handler that could
//! not read its body answers is [`unread`]'s (408 for the clock, 413 for
//! the size).
//!
//! The timers are made only when a body is slow to come: a body that
//! arrives with its header (nearly every call) never makes one.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;

/// The clock ran out on a request body.
#[derive(Debug)]
pub(crate) struct BodyTimeout {
    /// What ran out: a pause, or the whole.
    pause: bool,
    limit: Duration,
}

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pause {
            write!(
                f,
                "the request body stopped coming for {} ms (--header-timeout-ms)",
                self.limit.as_millis()
            )
        } else {
            write!(
                f,
                "the request body took longer than {} s to arrive (--body-timeout-secs)",
                self.limit.as_secs()
            )
        }
    }
}

impl std::error::Error for BodyTimeout {}

/// How long a body may pause, and take in all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) pause: Duration,
    pub(crate) whole: Duration,
}

/// `body` on its clock, which starts now. For a body still to come,
/// `hold()` is made and kept until the body has ended or is dropped (the
/// listener counts the body as a request in flight with it).
pub(crate) fn timed<H>(
    body: Incoming,
    limits: BodyLimits,
    hold: impl FnOnce() -> H,
) -> axum::body::Body
where
    H: Send + Unpin + 'static,
{
    if body.is_end_stream() {
        return axum::body::Body::new(body);
    }
    axum::body::Body::new(Timed {
        inner: body,
        limits,
        deadline: Instant::now() + limits.whole,
        timer: None,
        expired: false,
        held: Some(hold()),
    })
}

struct Timed<H> {
    inner: Incoming,
    limits: BodyLimits,
    deadline: Instant,
    /// Set while the body is waited for: the earlier of the pause's end and
    /// the deadline.
    timer: Option<Pin<Box<Sleep>>>,
    expired: bool,
    /// Let go of once the body has ended.
    held: Option<H>,
}

impl<H: Unpin> HttpBody for Timed<H> {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.expired {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                self.timer = None;
                if !matches!(frame, Some(Ok(_))) || self.inner.is_end_stream() {
                    self.held = None;
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let now = Instant::now();
                let pause_ends = now + self.limits.pause;
                let (limits, deadline) = (self.limits, self.deadline);
                let timer = self.timer.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(pause_ends.min(deadline)))
                });
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.expired = true;
                self.held = None;
                let pause = Instant::now() < deadline;
                let limit = if pause { limits.pause } else { limits.whole };
                Poll::Ready(Some(Err(Box::new(BodyTimeout { pause, limit }))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.expired || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a body's read failed on its clock, through any wrapping.
pub(crate) fn timed_out<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a BodyTimeout> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(timeout) = error.downcast_ref::<BodyTimeout>() {
            return Some(timeout);
        }
        next = error.source();
    }
    None
}

/// What a handler answers when it could not read a body of at most `limit`
/// bytes: 408 REQUEST_TIMEOUT when its clock ran out, else 413.
pub(crate) fn unread(error: &axum::Error, limit: usize) -> Envelope {
    match timed_out(error) {
        Some(timeout) => Envelope::host_error(
            ErrorCode::RequestTimeout,
            timeout.to_string(),
            Some(serde_json::json!({ "limitMs": timeout.limit.as_millis() as u64 })),
        ),
        None => Envelope::payload_too_large(limit),
    }
}

/// A JSON body of at most `limit` bytes as an arguments object (empty:
/// none); a larger one is refused before it is read whole.
pub(crate) async fn read_arguments(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    limit: usize,
) -> Result<serde_json::Map<String, serde_json::Value>, Envelope> {
    let declared_length = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared_length.is_some_and(|length| length > limit as u64) {
        return Err(Envelope::payload_too_large(limit));
    }
    let body = axum::body::to_bytes(body, limit)
        .await
        .map_err(|error| unread(&error, limit))?;
    crate::call::invoke::parse_arguments(&body)
}
