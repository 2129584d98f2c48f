//! The protocol fronts: each turns one protocol into calls on the shared
//! call path (`call::invoke`) and the envelope it returns back into that
//! protocol. None of them touches a wasmtime type. Who may reach them is
//! the access edge's (`edge/`); what they report for operators is
//! `ops/`'s.
//!
//! - [`rest`] and [`openapi`]: `POST /tools/{name}` (and `GET` for a
//!   read-only tool, its arguments from the query: [`query`]) and
//!   discovery; [`lists`]: the tool lists, made once per registry change;
//!   [`resources`]: resources and prompts over REST; [`rest_rounds`]: a
//!   plugin's requests for input answered over REST, and tasks
//!   (`Prefer: respond-async`, `/tasks/{id}`).
//! - [`plugin_routes`]: `PUT`, `GET`, `DELETE /plugins/...`: publishing,
//!   with [`uploads`] (turns, bodies, refusals) and [`source_routes`]
//!   (source the server builds); `GET /publishes`, the room's view.
//! - [`approval_routes`]: admins' approvals and refusals of held
//!   versions, and `GET /audit`.
//! - [`skill_routes`]: `GET`, `PUT`, `DELETE /skills/...`: skills
//!   listed, published, removed and approved.
//! - [`ui`]: the dashboard at `/`, its assets embedded in the binary;
//!   [`view_frame`]: the frame a tool's view runs in there.
//! - [`mcp`]: the MCP handler, served over Streamable HTTP and stdio.
//! - [`cgi`]: one CGI/1.1 request through the REST router.

pub(crate) mod approval_routes;
pub(crate) mod cgi;
pub(crate) mod lists;
pub(crate) mod mcp;
pub(crate) mod openapi;
mod openapi_rounds;
pub(crate) mod plugin_routes;
pub(crate) mod query;
pub(crate) mod resources;
pub(crate) mod rest;
pub(crate) mod rest_rounds;
pub(crate) mod skill_routes;
pub(crate) mod source_routes;
pub(crate) mod ui;
pub(crate) mod uploads;
pub(crate) mod view_frame;
