//! The one layer every HTTP request passes first and every answer last,
//! in this order: a listed origin's CORS preflight is answered at once
//! (`cors.rs`); anything else goes on with its body shared, so that what
//! the handler left unread is drained after the answer (`linger.rs`);
//! every answer is finished (`responses.rs`: a wrong method as an
//! envelope, `nosniff`); and a listed origin's answer is marked for CORS.
//!
//! One layer, not three: each `from_fn` layer costs a boxed service and a
//! boxed future per request, on every call (#40).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::cors::{self, CorsOrigins};
use super::{linger, responses};

/// What the outer layer needs: the browser origins allowed, and the most a
/// refused request's body may be drained of.
pub(crate) struct Outer {
    pub(crate) cors_origins: Arc<CorsOrigins>,
    pub(crate) drain_limit: u64,
}

/// The layer (`axum::middleware::from_fn_with_state`).
pub(crate) async fn outer(
    State(outer): State<Arc<Outer>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let origin = outer.cors_origins.listed_origin(request.headers());
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
