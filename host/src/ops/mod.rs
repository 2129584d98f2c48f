//! Operations: what the host tells whoever runs it, read from what it
//! already keeps (it counts nothing of its own).
//!
//! - [`metrics`]: `GET /metrics` for Prometheus.
//! - [`trace`]: a request's span at the front edge, continuing an
//!   incoming W3C `traceparent`.
//! - [`feed`]: `GET /events`, load outcomes and call summaries as SSE, for
//!   the dashboard and any other client.

pub(crate) mod feed;
pub(crate) mod metrics;
pub(crate) mod trace;
