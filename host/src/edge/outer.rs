//! The one step every HTTP request passes first and every answer last,
//! in this order: a listed origin's CORS preflight is answered at once
//! (`cors.rs`); anything else goes on with its body shared, so that what
//! the handler left unread is drained after the answer (`linger.rs`);
//! every answer is finished (`responses.rs`: a wrong method as an
//! envelope, `nosniff`); and a listed origin's answer is marked for CORS.
//!
//! Not a layer: the listener calls [`outer`] around the router on each
//! request. A `from_fn` layer costs a boxed service and a boxed future per
//! request, and `Router::layer` wraps each route, not the router.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use super::cors::{self, CorsOrigins};
use super::{linger, responses};

/// What the outer step needs: the browser origins allowed, and the most a
/// refused request's body may be drained of.
pub(crate) struct Outer {
    pub(crate) cors_origins: Arc<CorsOrigins>,
    pub(crate) drain_limit: u64,
}

/// Answers `request`, with `next` (the router) for anything that is not a
/// listed origin's preflight.
pub(crate) async fn outer<Next, Answer>(outer: &Outer, request: Request, next: Next) -> Response
where
    Next: FnOnce(Request) -> Answer,
    Answer: Future<Output = Response>,
{
    let origin = outer.cors_origins.listed_origin(request.headers());
    let method = request.method().clone();
    let uri = request.uri().clone();
    let mut response = if origin.is_some() && cors::is_preflight(&request) {
        cors::preflight()
    } else {
        linger::drain_unread(outer.drain_limit, request, next).await
    };
    // Finished first, so that a 405 made into an envelope there is marked
    // for a listed origin too, and its browser can read it.
    response = responses::finish(response, &method, uri.path());
    if let Some(origin) = origin {
        cors::mark(&mut response, origin);
    }
    response
}
