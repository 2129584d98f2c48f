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
//! rest of the crate may name); the parts are files of their own, and none
//! of them reaches back up into this one:
//! - `bindings.rs`: the plugin world's generated bindings;
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
mod bindings;
mod cache;
mod client;
mod compiler;
mod executor;
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
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::{Config, Store, Trap, UpdateDeadline};

pub use self::allocator::configure_allocator;
pub(crate) use self::allocator::release_free_memory;
use self::bindings::Plugin;
use self::cache::ArtifactCache;
pub use self::client::{CallClient, ClientChannel, LogLevel};
use self::compiler::{BASELINE_FROM_BYTES, CodeCell, Compiler, Optimizer, Pending, Tiers};
pub use self::compiler::{Tier, TierUp};
pub(crate) use self::executor::QUEUE_WAIT;
use self::executor::{Cancel, Executor, Refusal};
pub use self::failure::{CallFailure, CompileError};
use self::failure::{root_cause, tail};
pub(crate) use self::grants::{DirGrant, OriginPattern};
pub use self::grants::{Grants, Limits};
use self::sandbox::Sandbox;
pub use self::usage::CallUsage;
use self::warm::{KeptInstances, Shelf};

/// The plugin's own values, as the contract (`wit/plugin.wit`) defines them.
/// They are plain data (strings, vectors, options), generated from the WIT.
pub use self::bindings::exports::toolhost::plugin::tools::{
    Annotations, ContentBlock, Output as PluginOutput, ResourceBody, Tool as DeclaredTool,
    ToolError as PluginError,
};

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

    /// Runs `list-tools` in a fresh instance, with no grants: describing
    /// tools needs nothing from outside. It runs on the executor like a
    /// call, under the same limits.
    pub(crate) async fn list_tools(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
    ) -> Result<Vec<DeclaredTool>, CallFailure> {
        let grants = Arc::new(self.no_grants());
        let (runtime, plugin) = (self.clone(), plugin.clone());
        let inline = plugin.inline;
        self.run(inline, move |cancel| async move {
            let code = plugin.code.load_full();
            let mut store = runtime.new_store(&plugin, &code, &grants, None, cancel)?;
            let outcome = tokio::time::timeout(grants.limits.timeout, async {
                let instance = code.pre.instantiate_async(&mut store).await?;
                instance
                    .toolhost_plugin_tools()
                    .call_list_tools(&mut store)
                    .await
            })
            .await;
            settle(&plugin, &grants, &mut store, outcome)
        })
        .await
        .map(|(tools, _cpu)| tools)
    }

    /// Runs `call-tool` in a fresh instance with the plugin's grants.
    /// `arguments` is JSON text; `client` is the client behind the call, if
    /// there is one.
    pub async fn call_tool(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        tool: &str,
        arguments: String,
        client: CallClient,
    ) -> (
        Result<Result<PluginOutput, PluginError>, CallFailure>,
        Option<CallUsage>,
    ) {
        if let Some(pending) = &plugin.pending {
            self.optimizer
                .enqueue(&self.tiers, &plugin.name, pending, &plugin.code);
        }
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        let tool = tool.to_string();
        // The call's span (if the caller opened one) goes with it to the
        // guest thread, so what the plugin prints is logged inside it.
        let span = tracing::Span::current();
        let inline = plugin.inline;
        let ran = self
            .run(inline, move |cancel| {
                async move {
                    let code = plugin.code.load_full();
                    // A kept instance (policy opt-in, `warm.rs`), made ready
                    // for this call, or a fresh store.
                    let warm = grants.reuse_instance.and_then(|_| plugin.shelf.take(&code));
                    let (mut store, kept, served) = match warm {
                        Some(warm) => {
                            let mut store = warm.store;
                            runtime.ready_store(&mut store, &grants, client, cancel);
                            (store, Some(warm.instance), warm.calls)
                        }
                        None => (
                            runtime.new_store(&plugin, &code, &grants, client, cancel)?,
                            None,
                            0,
                        ),
                    };
                    let outcome = tokio::time::timeout(grants.limits.timeout, async {
                        let instance: Plugin = match kept {
                            Some(instance) => instance,
                            None => {
                                code.pre
                                    .instantiate_async(&mut store)
                                    .instrument(tracing::debug_span!("instantiate"))
                                    .await?
                            }
                        };
                        let answer = instance
                            .toolhost_plugin_tools()
                            .call_call_tool(&mut store, &tool, &arguments)
                            .instrument(tracing::debug_span!("guest"))
                            .await?;
                        Ok((answer, instance))
                    })
                    .await;
                    let usage = CallUsage {
                        cpu: Duration::ZERO,
                        fuel: grants
                            .fuel_budget()
                            .saturating_sub(store.get_fuel().unwrap_or(0)),
                        peak_memory_bytes: store.data().limiter.peak_bytes as u64,
                        tier: code.tier,
                    };
                    let (outcome, instance) = match outcome {
                        Ok(Ok((answer, instance))) => (Ok(Ok(answer)), Some(instance)),
                        Ok(Err(error)) => (Ok(Err(error)), None),
                        Err(elapsed) => (Err(elapsed), None),
                    };
                    let settled = settle(&plugin, &grants, &mut store, outcome);
                    // Only an instance whose call ended well is handed on.
                    if let (Some(reuse), Some(instance), Ok(_)) =
                        (grants.reuse_instance, instance, &settled)
                        && served + 1 < reuse
                    {
                        plugin
                            .shelf
                            .put(&runtime.kept, store, instance, code.clone(), served + 1);
                    }
                    Ok((settled, usage))
                }
                .instrument(span)
            })
            .await;
        match ran {
            Ok(((outcome, usage), cpu)) => (outcome, Some(CallUsage { cpu, ..usage })),
            Err(failure) => (Err(failure), None),
        }
    }

    /// A receiver that hears the name of each plugin (as given to
    /// [`Runtime::compile`]) whose optimised code has just started serving,
    /// with how long that code took to compile.
    pub(crate) fn optimised(&self) -> tokio::sync::broadcast::Receiver<(Arc<str>, Duration)> {
        self.tiers.optimised.subscribe()
    }

    /// Runs one job on the executor (`inline`: see [`Executor::run`]) and
    /// folds its refusals into failures; with its output, the CPU time it
    /// took.
    async fn run<T, F, Fut>(&self, inline: bool, job: F) -> Result<(T, Duration), CallFailure>
    where
        F: FnOnce(Cancel) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallFailure>> + Send + 'static,
        T: Send + 'static,
    {
        match self.executor.run(inline, job).await {
            Ok((outcome, cpu)) => outcome.map(|output| (output, cpu)),
            Err(Refusal::Busy { max_calls }) => Err(CallFailure::Busy { max_calls }),
            Err(Refusal::Panicked(reason)) => Err(CallFailure::Host(format!(
                "the host failed while running the call: {reason}"
            ))),
        }
    }

    /// A store for one call: fresh sandbox, memory budget, fuel, and a
    /// deadline that is checked at every epoch tick, together with whether
    /// the caller is still waiting.
    fn new_store(
        &self,
        plugin: &CompiledPlugin,
        code: &compiler::Code,
        grants: &Arc<Grants>,
        client: CallClient,
        cancel: Cancel,
    ) -> Result<Store<Sandbox>, CallFailure> {
        let sandbox = Sandbox::new(plugin.name.clone(), grants.clone(), client)
            .map_err(|e| CallFailure::Host(format!("a granted directory cannot be opened: {e}")))?;
        let mut store = Store::new(code.pre.instance_pre().engine(), sandbox);
        store.limiter(|sandbox| &mut sandbox.limiter);
        let _ = store.set_fuel(grants.fuel_budget());
        // Yield every slice, so that a call started on its caller's thread
        // moves to a guest thread if it runs on (see `executor`).
        let _ = store.fuel_async_yield_interval(Some(executor::SLICE_FUEL));
        Self::set_deadline(&mut store, grants.limits.timeout, cancel);
        Ok(store)
    }

    /// The call's deadline, checked at every epoch tick together with
    /// whether its caller is still waiting.
    fn set_deadline(store: &mut Store<Sandbox>, timeout: Duration, cancel: Cancel) {
        let deadline = Instant::now() + timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if cancel.is_set() || Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
    }

    /// A kept store made ready for one more call: this call's client, fuel,
    /// deadline and cancellation, and its peak memory counted from now.
    fn ready_store(
        &self,
        store: &mut Store<Sandbox>,
        grants: &Arc<Grants>,
        client: CallClient,
        cancel: Cancel,
    ) {
        let sandbox = store.data_mut();
        sandbox.client = client;
        sandbox.limiter.start_call();
        let _ = store.set_fuel(grants.fuel_budget());
        Self::set_deadline(store, grants.limits.timeout, cancel);
    }
}

/// Logs what the plugin printed and turns wasmtime's outcome into ours.
fn settle<T>(
    plugin: &CompiledPlugin,
    grants: &Grants,
    store: &mut Store<Sandbox>,
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, CallFailure> {
    let sandbox = store.data_mut();
    log_output(&plugin.name, "stdout", &sandbox.stdout.take());
    let stderr = sandbox.stderr.take();
    log_output(&plugin.name, "stderr", &stderr);
    let error = match outcome {
        Ok(Ok(value)) => return Ok(value),
        Err(_elapsed) => return Err(CallFailure::Timeout(grants.limits.timeout)),
        Ok(Err(error)) => error,
    };
    Err(match error.downcast_ref::<Trap>() {
        _ if sandbox.limiter.refused => CallFailure::OutOfMemory {
            cap_bytes: grants.limits.memory_bytes,
        },
        Some(Trap::Interrupt) => CallFailure::Timeout(grants.limits.timeout),
        Some(Trap::OutOfFuel) => CallFailure::OutOfFuel {
            fuel: grants.fuel_budget(),
        },
        None if error.downcast_ref::<std::str::Utf8Error>().is_some() => {
            CallFailure::InvalidOutput(format!(
                "a string is not valid UTF-8 ({})",
                root_cause(&error)
            ))
        }
        _ => CallFailure::Trapped {
            reason: root_cause(&error),
            stderr: tail(&stderr.0, 1024),
        },
    })
}

fn log_output(plugin: &str, stream: &str, (text, dropped): &(String, usize)) {
    for line in text.lines() {
        tracing::info!(target: "toolhost::plugin", plugin, stream, "{line}");
    }
    if *dropped > 0 {
        tracing::warn!(target: "toolhost::plugin", plugin, stream, dropped, "output over the log limit was dropped");
    }
}
