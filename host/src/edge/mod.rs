//! The access edge: everything between a socket and a front, and the one
//! place that decides who may reach what.
//!
//! - [`listener`]: the HTTP accept loop and its transport limits; [`body`]:
//!   every request body's clock; [`linger`]: a refused request's unread
//!   body drained, so the client reads the refusal instead of a reset;
//!   [`holds`]: what each person holds of the connections and streams.
//! - [`auth`]: who is asking (tokens, roles), the one place a token is
//!   checked; [`oauth`]: access tokens from an issuer, asked only by
//!   `auth`.
//! - [`guard`]: Host/Origin and other sites' checks and the caller's
//!   identity, before any route; [`cors`]: preflights and headers for the
//!   browser origins allowed.
//! - [`responses`]: the one place an envelope (or a JSON-RPC refusal)
//!   becomes an HTTP response, and what every answer gets last.
//! - [`outer`]: the one layer around every route: a listed origin's
//!   preflight, lingering close, the finish, then the CORS marks.

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod cors;
pub(crate) mod guard;
pub(crate) mod holds;
pub(crate) mod linger;
pub(crate) mod listener;
pub(crate) mod oauth;
pub(crate) mod outer;
pub(crate) mod responses;
