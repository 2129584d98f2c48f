//! Lingering close: a request refused before its body was read (a wrong
//! token on a `PUT` of a component, a bad name, an unknown route) still
//! has its body read and thrown away, within bounds, after the answer is
//! sent. Without it the server closes a socket the client is still writing
//! to, the kernel resets it, and the client sees "broken pipe" instead of
//! the 401 or 400 that explains what went wrong; nginx does the same
//! (`lingering_close`). Nothing read this way is kept or looked at.
//!
//! Bounds: a body larger than any route accepts (`limit`: the larger of
//! `--max-body-bytes` and `--max-plugin-mib`) is not drained, the
//! connection closes as for a 413; draining stops after [`LINGER`] or
//! `limit` bytes, whichever comes first.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// How long a refused body may take to drain.
const LINGER: Duration = Duration::from_secs(10);

/// Runs the rest of the request (`next`), handing the handler a body it
/// shares with this function, and drains what the handler left unread
/// once it has answered.
pub(crate) async fn drain_unread<Next, Answer>(limit: u64, request: Request, next: Next) -> Response
where
    Next: FnOnce(Request) -> Answer,
    Answer: Future<Output = Response>,
{
    let declared = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    let chunked = request
        .headers()
        .contains_key(http::header::TRANSFER_ENCODING);
    if (declared.unwrap_or(0) == 0 && !chunked) || declared.is_some_and(|n| n > limit) {
        return next(request).await;
    }
    let (parts, body) = request.into_parts();
    let shared = Arc::new(Mutex::new(Some(body)));
    let response = next(Request::from_parts(
        parts,
        Body::new(Shared(shared.clone())),
    ))
    .await;
    // Only when the handler has let go of the body: one still streaming it
    // (in a task of its own) is reading it anyway.
    if Arc::strong_count(&shared) == 1 {
        let left = shared.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(body) = left.filter(|body| !body.is_end_stream()) {
            tokio::spawn(drain(body, limit));
        }
    }
    response
}

/// Reads and drops `body` until it ends, or the bounds are reached.
async fn drain(mut body: Body, limit: u64) {
    let read_all = async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |data| data.len() as u64);
            if read > limit {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, read_all).await;
}

/// The request body, readable by the handler and, once it is done, by
/// [`drain_unread`].
struct Shared(Arc<Mutex<Option<Body>>>);

impl HttpBody for Shared {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut body = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let body = self.0.lock().unwrap_or_else(|e| e.into_inner());
        body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let body = self.0.lock().unwrap_or_else(|e| e.into_inner());
        body.as_ref().map(HttpBody::size_hint).unwrap_or_default()
    }
}
