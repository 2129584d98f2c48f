//! The WebAssembly runtime: turns component bytes into a [`CompiledPlugin`],
//! and runs its `list-tools` and `call-tool` exports inside limits.
//!
//! It owns every wasmtime type. Nothing here knows of HTTP, JSON-RPC or the
//! result envelope: it answers with the plugin's own values
//! ([`PluginOutput`], [`PluginError`]) or with a [`CallFailure`].
//!
//! Design, and why:
//! - One [`Engine`] per compiler, so compiled code and settings are shared;
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
//! This file is the facade ([`Runtime`], [`CompiledPlugin`] and what the
//! rest of the crate may name). `calls.rs` is the facade's other half: the
//! call path (`list-tools`, `call-tool`: stores made ready, run on the
//! executor, outcomes settled) as methods of the same [`Runtime`]. The
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
//! - `warm.rs`: instances kept between calls, for plugins whose policy
//!   opts in (`reuse_instance`).

mod allocator;
mod asks;
mod bindings;
mod cache;
mod calls;
mod client;
mod compiler;
mod executor;
mod exports;
mod failure;
mod grants;
mod log_capture;
mod memory_cap;
mod pool;
mod sandbox;
mod usage;
mod warm;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Config;

pub use self::allocator::configure_allocator;
pub(crate) use self::allocator::release_free_memory;
use self::cache::ArtifactCache;
pub use self::client::{CallClient, ClientChannel, LogLevel};
use self::compiler::{BASELINE_FROM_BYTES, CodeCell, Compiler, Optimizer, Pending, Tiers};
pub use self::compiler::{Tier, TierUp};
use self::executor::Executor;
pub(crate) use self::executor::QUEUE_WAIT;
pub use self::failure::{CallFailure, CompileError};
pub(crate) use self::grants::{DirGrant, OriginPattern};
pub use self::grants::{Grants, Limits};
pub use self::usage::CallUsage;
use self::warm::{KeptInstances, Shelf};

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
pub(crate) use self::exports::Provides;

/// Everything a plugin declares when it is loaded.
#[derive(Debug, Default)]
pub struct Description {
    pub tools: Vec<DeclaredTool>,
    pub resources: Vec<DeclaredResource>,
    pub templates: Vec<DeclaredTemplate>,
    pub prompts: Vec<DeclaredPrompt>,
    /// Which optional exports the component has.
    pub(crate) provides: Provides,
}

/// A component compiled and linked, ready to be instantiated per call.
/// Cloning it is cheap (the compiled code is shared).
#[derive(Clone)]
pub struct CompiledPlugin {
    /// The plugin's name, to tag its log output.
    name: Arc<str>,
    /// The current code: baseline, then optimised (see [`compiler`]).
    code: CodeCell,
    /// Set while baseline code waits for the first call to queue it for
    /// optimising.
    pending: Option<Arc<Pending>>,
    /// Whether the compiled code came from the on-disk cache.
    pub(crate) from_cache: bool,
    /// Whether a call's first slice may run on its caller's thread: small
    /// components only (see [`executor`]).
    inline: bool,
    /// Instances kept for the next call, if the policy opts in (`warm.rs`).
    shelf: Shelf,
}

impl CompiledPlugin {
    /// Which compiler made the code that serves now.
    pub(crate) fn tier(&self) -> Tier {
        self.code.load().tier
    }
}

pub struct Runtime {
    /// Both compilers and the cache, shared with the optimiser.
    tiers: Arc<Tiers>,
    tier_up: TierUp,
    optimizer: Optimizer,
    limits: Limits,
    executor: Executor,
    /// How many instances are kept between calls, over every plugin.
    kept: KeptInstances,
}

impl Runtime {
    /// Builds the engine and the executor. `cache_dir` of `None` disables
    /// the on-disk compile cache; `max_calls` is how many calls (and
    /// load-time tool listings) run guest code at once; `tier_up` says
    /// whether large plugins' baseline code is optimised in the background.
    pub fn new(
        limits: Limits,
        cache_dir: Option<PathBuf>,
        max_calls: usize,
        tier_up: TierUp,
    ) -> anyhow::Result<Arc<Self>> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Fuel is metered for every plugin so that a policy can cap it; a
        // plugin without a fuel limit gets an effectively endless supply.
        config.consume_fuel(true);
        // Every call instantiates afresh, so instantiation is the hot path:
        // the pooling allocator reuses pre-reserved slots (memories, tables,
        // fiber stacks) and resets memories copy-on-write, instead of an
        // mmap/munmap per call that also serialises on the kernel's lock.
        config.wasm_component_model(true);
        // The pool holds `max_calls` running calls' instances and as many
        // kept between calls (`warm.rs`), so neither can starve the other.
        let pooled = |config: &mut Config| {
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(
                pool::pool_config(2 * max_calls.max(1) as u32),
            ));
        };
        let optimized = Compiler::new(Tier::Optimized, config.clone(), pooled)?;
        let baseline = Compiler::new(Tier::Baseline, config, pooled)?;

        // The cache is an optimisation: a folder that cannot be used (a CGI
        // script running as a user without a home, a read-only disk) means
        // compiling every time, with one warning, never a failed call.
        let cache = cache_dir.and_then(|dir| match ArtifactCache::open(&dir) {
            Ok(cache) => Some(cache),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "compile cache disabled; every plugin is compiled afresh");
                None
            }
        });
        let executor = Executor::new(max_calls, &[&optimized.engine, &baseline.engine])?;
        Ok(Arc::new(Runtime {
            tiers: Arc::new(Tiers::new(optimized, baseline, cache)),
            tier_up,
            optimizer: Optimizer::default(),
            limits,
            executor,
            kept: KeptInstances::new(max_calls.max(1)),
        }))
    }

    /// Compiles (or loads from the cache) and links a component: optimised
    /// code from the cache if there is some, else baseline code first for a
    /// large component, else optimised code (see [`compiler`]). Blocking
    /// and CPU-heavy: call it off the async runtime's worker threads.
    pub(crate) fn compile(
        self: &Arc<Self>,
        name: &str,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<CompiledPlugin, CompileError> {
        compiler::check_header(wasm)?;
        let name: Arc<str> = name.into();
        let tiers = &self.tiers;
        let cached = |compiler: &Compiler| {
            let cache = tiers.cache.as_ref()?;
            let component = cache.load(&compiler.engine, content_hash)?;
            Some(compiler.link(&component))
        };
        let compiled = |compiler: &Compiler| {
            let artifact = compiler.precompile(wasm)?;
            if let Some(cache) = &tiers.cache {
                cache.store(&compiler.engine, content_hash, &artifact);
            }
            compiler.link_artifact(&artifact)
        };
        let plugin = |code: compiler::Code, from_cache| CompiledPlugin {
            name: name.clone(),
            code: Arc::new(arc_swap::ArcSwap::from_pointee(code)),
            pending: None,
            from_cache,
            inline: wasm.len() < BASELINE_FROM_BYTES,
            shelf: Shelf::default(),
        };
        if let Some(code) = cached(&tiers.optimized) {
            return Ok(plugin(code?, true));
        }
        if wasm.len() >= BASELINE_FROM_BYTES {
            let baseline = match cached(&tiers.baseline) {
                Some(code) => code.map(|code| (code, true)),
                None => compiled(&tiers.baseline).map(|code| (code, false)),
            };
            match baseline {
                Ok((code, from_cache)) => {
                    let mut plugin = plugin(code, from_cache);
                    if self.tier_up == TierUp::InBackground {
                        plugin.pending = Some(Pending::new(wasm, content_hash));
                    }
                    return Ok(plugin);
                }
                Err(error) => {
                    tracing::info!(plugin = %name, %error, "the baseline compiler cannot take this component; optimising now");
                }
            }
        }
        Ok(plugin(compiled(&tiers.optimized)?, false))
    }

    /// The grants of a plugin without a policy: nothing, default limits.
    pub(crate) fn no_grants(&self) -> Grants {
        Grants::none(self.limits)
    }

    /// How many calls run guest code at once.
    pub(crate) fn max_calls(&self) -> usize {
        self.executor.max_calls()
    }

    /// How many calls wait for a slot now.
    pub(crate) fn calls_waiting(&self) -> usize {
        self.executor.calls_waiting()
    }

    /// How many of the [`max_calls`](Self::max_calls) slots are taken now.
    pub(crate) fn calls_running(&self) -> usize {
        self.executor.slots_in_use()
    }

    /// A receiver that hears the name of each plugin (as given to
    /// [`Runtime::compile`]) whose optimised code has just started serving,
    /// with how long that code took to compile.
    pub(crate) fn optimised(&self) -> tokio::sync::broadcast::Receiver<(Arc<str>, Duration)> {
        self.tiers.optimised.subscribe()
    }
}
