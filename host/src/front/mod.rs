//! The fronts: each turns one protocol into calls on the shared call path
//! (`call::invoke`) and the envelope it returns back into that protocol.
//! None of them touches a wasmtime type.
//!
//! - [`listener`]: the HTTP accept loop and its transport limits; [`body`]:
//!   every request body's clock.
//! - [`auth`]: who is asking (tokens, roles); the one place a token is checked.
//! - [`cors`]: preflights and headers for the browser origins allowed.
//! - [`guard`]: Host/Origin checks and the caller's identity, before any route.
//! - [`linger`]: a refused request's unread body is drained, so the client
//!   reads the refusal instead of a reset connection.
//! - [`http`]: the one place an envelope becomes an HTTP response.
//! - [`rest`] and [`openapi`]: `POST /tools/{name}` (and `GET` for a
//!   read-only tool, its arguments from the query: [`query`]) and
//!   discovery; [`lists`]: the tool lists, made once per registry change;
//!   [`resources`]: resources and prompts over REST.
//! - [`ui`]: the dashboard at `/`, its assets embedded in the binary.
//! - [`events`]: `GET /events`, load outcomes and call summaries as SSE.
//! - [`mcp`]: the MCP handler, served over Streamable HTTP and stdio.
//! - [`cgi`]: one CGI/1.1 request through the REST router.

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod cgi;
pub(crate) mod cors;
pub(crate) mod events;
pub(crate) mod guard;
pub(crate) mod http;
pub(crate) mod linger;
pub(crate) mod listener;
pub(crate) mod lists;
pub(crate) mod mcp;
pub(crate) mod metrics;
pub(crate) mod oauth;
pub(crate) mod openapi;
pub(crate) mod publish;
pub(crate) mod query;
pub(crate) mod resources;
pub(crate) mod rest;
pub(crate) mod trace;
pub(crate) mod ui;
