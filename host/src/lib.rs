//! toolhost: serve WebAssembly component plugins as tools over REST and MCP.
//!
//! A call flows one way, from a front to the runtime:
//!
//! ```text
//!  commands/  the CLI: each subcommand owns its flags, builds the rest
//!     │         (`new` and `dev` are the plugin author's, in Rust, Python
//!     │         or JavaScript: scaffold, then rebuild on save and read the
//!     │         load result back over REST)
//!  server     serve in-process: HTTP (REST + MCP) and MCP over stdio
//!     │
//!  front/     HTTP listener → guard → rest | openapi | mcp (http, stdio) | cgi
//!     │         (protocol in, envelope out; never a wasmtime type)
//!  call/      invoke: look up → validate arguments → call → normalize
//!     │         into the one envelope; errors: the one code table
//!  registry/  the live set of plugins: loader, tools, portability
//!     │         (schema warnings), policy, watcher
//!     │
//!  runtime/   wasmtime: compile (Winch baseline first for large components,
//!               Cranelift behind) + cache, sandbox, WIT imports, call threads
//!               (knows nothing of HTTP or JSON-RPC)
//! ```
//!
//! The binary (`main.rs`) parses the command line and runs
//! [`commands::Cli`]; a program that embeds the server builds a
//! [`registry::Registry`] and calls [`server::run`]. The benchmark harness
//! is a crate of its own (`bench/`) built on this library; the plugin SDKs
//! (`sdk/rust`, `sdk/python`, `sdk/js`) are guest-side and share nothing
//! with it but the WIT contract.

pub mod call;
pub mod commands;
mod front;
pub mod registry;
pub mod runtime;
pub mod server;
