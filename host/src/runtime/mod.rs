//! The WebAssembly runtime: turns component bytes into a [`CompiledPlugin`],
//! and runs its `list-tools` and `call-tool` exports inside limits.
//!
//! It owns every wasmtime type. Nothing here knows of HTTP, JSON-RPC or the
//! result envelope: it answers with the plugin's own values
//! ([`PluginOutput`], [`PluginError`]) or with a [`CallFailure`].
//!
//! Design, and why:
//! - One [`Engine`](wasmtime::Engine) per compiler, so compiled code and settings are shared;
//!   large components get baseline code first (see [`compiler`]).
//! - A plugin is compiled once and pre-instantiated (imports resolved once);
//!   every call then instantiates it in a fresh `Store`, so no state leaks
//!   between calls and a trap ends only the call that trapped.
//! - Guest code runs on the async workers that serve HTTP for one short
//!   slice at most (a small plugin's first, in which most calls end);
//!   the rest runs on threads of its own: see [`executor`], which also
//!   bounds calls by `max_calls` and sizes the instance pool from it.
//! - Deadlines use epoch interruption: a ticker thread advances the epoch
//!   while calls run, and a running call checks its deadline (and whether
//!   its caller is still there) at each tick. A plugin blocked inside a
//!   host call (sleeping, say) does not run wasm, so an outer timer covers
//!   that case too.
//! - Memory is capped per call, over every memory and table of the
//!   instance together, by a `ResourceLimiter`; how many core instances,
//!   memories and tables one component may have is checked when it loads.
//!
//! This file is the facade: it defines nothing, and names what the rest of
//! the crate may use. [`Runtime`] and all of its methods live in
//! `engine.rs` (compiling, the executor's slots, the call path:
//! `list-tools`, `call-tool`, stores made ready, run on the executor);
//! `compiled.rs` holds [`CompiledPlugin`] and [`Description`]; `outcome.rs`
//! settles a finished call's store into the runtime's own types. The
//! other parts are files of their own, and none of them reaches back up:
//! - `bindings.rs`: the contract's generated bindings; `exports.rs`: a
//!   component's exports, each found on its own; `asks.rs`:
//!   `read-resource`, `get-prompt` and `complete` on the call path;
//! - `compiler.rs`: both compilers, the tier-up from baseline to optimised
//!   code, and the optimiser (given the compilers and the cache, not the
//!   runtime); `cache.rs`: compiled code on disk;
//! - `executor.rs`: the guest threads and call slots; `pool.rs`: the
//!   instance pool's size; `allocator.rs`: the process allocator's tuning;
//! - `sandbox.rs`: one call's store data and the host side of every
//!   import; `grants.rs` (with [`Limits`]), `memory_cap.rs`,
//!   `log_capture.rs`, `client.rs`: what it holds;
//! - `failure.rs`: what went wrong, as types; `usage.rs`: what a call
//!   used (CPU time, fuel, peak memory, which code);
//! - `outbound.rs`: the `http` import's requests (the language
//!   runtimes' outbound HTTP) under the allowlist and the call's limits;
//! - `warm.rs`: instances kept between calls, for plugins whose policy
//!   opts in (`reuse_instance`);

mod allocator;
mod asks;
mod bindings;
mod cache;
mod client;
mod compiled;
mod compiler;
#[cfg(test)]
mod compiler_tests;
mod engine;
mod executor;
mod exports;
mod failure;
mod grants;
mod log_capture;
mod memory_cap;
mod outbound;
mod outcome;
mod pool;
mod sandbox;
mod snapshot;
mod usage;
mod warm;

pub use self::allocator::configure_allocator;
pub(crate) use self::allocator::release_free_memory;
pub use self::client::{
    AskError, CallClient, ClientChannel, ELICIT, InputRequest, LogLevel, NotAResult, ROOTS, SAMPLE,
};
pub use self::compiled::{CompiledPlugin, Description};
pub use self::compiler::{Tier, TierUp};
pub use self::engine::Runtime;
pub(crate) use self::executor::QUEUE_WAIT;
pub use self::failure::{CallFailure, CompileError};
pub use self::grants::OutboundLimits;
pub(crate) use self::grants::{BadOrigin, DirGrant, OriginPattern};
pub use self::grants::{Grants, Limits, SourceFile};
pub use self::outbound::OutboundUsage;
#[cfg(test)]
pub(crate) use self::outcome::logged_at;
pub use self::outcome::{Printed, ToolRun};
pub use self::usage::CallUsage;

/// The plugin's own values, as the contract (`wit/plugin.wit`) defines them.
/// They are plain data (strings, vectors, options), generated from the WIT.
pub use self::bindings::exports::toolhost::plugin0_1_0::tools::{
    Annotations, ContentBlock, Output as PluginOutput, ResourceBody, Tool as DeclaredTool,
    ToolError as PluginError,
};

pub use self::asks::{Answer, Ask};
/// What 0.2.0's optional exports declare (`wit/plugin.wit`), as plain data.
pub use self::bindings::completion::{Completions, Reference as CompletionRef};
pub use self::bindings::prompts::{
    Message as PromptMessage, Prompt as DeclaredPrompt, PromptArgument, PromptResult, Role,
};
pub use self::bindings::resources::{
    Contents as ResourceContents, Resource as DeclaredResource,
    ResourceTemplate as DeclaredTemplate,
};
pub use self::bindings::tool_details::{
    Audience, Detail as DeclaredDetail, TaskSupport as DeclaredTaskSupport,
};
pub use self::bindings::views::{Csp as DeclaredCsp, View as DeclaredView};
