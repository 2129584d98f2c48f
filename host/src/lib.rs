//! toolhost: serve WebAssembly component plugins as tools over REST and MCP.
//!
//! A call flows one way, from a front to the runtime:
//!
//! ```text
//!  commands/  the CLI: each subcommand owns its flags and opens a Host
//!     │         (`new` and `dev` are the plugin author's, in Rust, Python
//!     │         or JavaScript: scaffold, then rebuild on save and wait for
//!     │         the load outcome)
//!  host       the front door: HostConfig → Host (runtime, registry,
//!     │         watch), its load events, call, check, serve
//!  server     the fronts assembled: HTTP (REST + MCP), MCP over stdio, CGI
//!     │
//!  front/     HTTP listener → rest | openapi | mcp (http, stdio) | cgi,
//!     │         each router behind the guard (protocol in, envelope out;
//!     │         never a wasmtime type)
//!  call/      invoke: look up → validate arguments → call → normalize
//!     │         into the one envelope, in one tracing span per call;
//!     │         errors: the one code table
//!  registry/  the live set of plugins: one load path (a generation per
//!     │         file), load events, reports, loader, tools, portability
//!     │         (schema warnings), policy, watcher
//!     │
//!  runtime/   wasmtime: compile (Winch baseline first for large components,
//!               Cranelift behind) + cache, sandbox, WIT imports, call threads
//!               (knows nothing of HTTP or JSON-RPC)
//! ```
//!
//! The binary (`main.rs`) parses the command line and runs
//! [`commands::Cli`]. A program that embeds the server opens a [`Host`]
//! from a [`HostConfig`] and serves it; hot reload comes with it
//! (`docs/architecture.md` has the whole map). The benchmark harness is a
//! crate of its own (`bench/`) built on this library; the plugin SDKs
//! (`sdk/rust`, `sdk/python`, `sdk/js`) are guest-side and share nothing
//! with it but the WIT contract.

pub mod call;
pub mod commands;
mod front;
mod host;
pub mod registry;
pub mod runtime;
pub mod server;

pub use host::{Host, HostConfig, default_cache_dir};
