//! The WebAssembly runtime: turns component bytes into a [`CompiledPlugin`],
//! and runs its `list-tools` and `call-tool` exports inside limits.
//!
//! It owns every wasmtime type. Nothing here knows of HTTP, JSON-RPC or the
//! result envelope: it answers with the plugin's own values
//! ([`PluginOutput`], [`PluginError`]) or with a [`CallFailure`].
//!
//! Design, and why:
//! - One [`Engine`] per process, so compiled code and settings are shared.
//! - A plugin is compiled once and pre-instantiated (imports resolved once);
//!   every call then instantiates it in a fresh `Store`, so no state leaks
//!   between calls and a trap ends only the call that trapped.
//! - Deadlines use epoch interruption: a ticker thread advances the epoch,
//!   and a running call checks its own deadline at each tick, yielding to
//!   the async runtime in between so CPU-bound plugins share the threads.
//!   A plugin blocked inside a host call (sleeping, say) does not run wasm,
//!   so an outer timer covers that case too.
//! - Memory is capped per call by a `ResourceLimiter`.

mod cache;
mod client;
mod grants;
mod sandbox;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store, Trap, UpdateDeadline};

use self::cache::ArtifactCache;
pub use self::client::{CallClient, ClientChannel, LogLevel};
pub use self::grants::{DirGrant, Grants, OriginPattern};
use self::sandbox::Sandbox;

mod bindings {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit",
        imports: { default: async },
        exports: { default: async },
    });
}

use bindings::{Plugin, PluginPre};

/// The plugin's own values, as the contract (`wit/plugin.wit`) defines them.
/// They are plain data (strings, vectors, options), generated from the WIT.
pub use bindings::exports::toolhost::plugin::tools::{
    Annotations, ContentBlock, Output as PluginOutput, ResourceBody, Tool as ToolSpec,
    ToolError as PluginError,
};

/// How often the epoch advances: the granularity of deadlines, and how long
/// a CPU-bound plugin runs before it yields its thread.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits applied to every call of every plugin.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    pub memory_bytes: usize,
}

/// Why a call did not produce the plugin's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    /// It ran past its deadline.
    Timeout(Duration),
    /// It used up its instruction budget (fuel).
    OutOfFuel { fuel: u64 },
    /// It returned values the component model refuses to lift (a string
    /// that is not UTF-8).
    InvalidOutput(String),
    /// It tried to grow memory past the cap.
    OutOfMemory { cap_bytes: usize },
    /// It trapped. `reason` is wasmtime's description of the trap;
    /// `stderr` the tail of what the plugin printed (a panic message, say).
    Trapped { reason: String, stderr: String },
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Timeout(limit) => write!(f, "ran past its {limit:?} deadline"),
            CallFailure::OutOfFuel { fuel } => write!(f, "used up its budget of {fuel} fuel"),
            CallFailure::InvalidOutput(reason) => write!(f, "returned an invalid result: {reason}"),
            CallFailure::OutOfMemory { cap_bytes } => {
                write!(f, "tried to use more than its {cap_bytes}-byte memory cap")
            }
            CallFailure::Trapped { reason, .. } => write!(f, "trapped: {reason}"),
        }
    }
}

/// A component compiled and linked, ready to be instantiated per call.
pub struct CompiledPlugin {
    /// The plugin's name, to tag its log output.
    name: Arc<str>,
    pre: PluginPre<Sandbox>,
    /// Whether the compiled code came from the on-disk cache.
    pub from_cache: bool,
}

pub struct Runtime {
    engine: Engine,
    linker: Linker<Sandbox>,
    cache: Option<ArtifactCache>,
    limits: Limits,
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker. `cache_dir` of `None`
    /// disables the on-disk compile cache.
    pub fn new(limits: Limits, cache_dir: Option<PathBuf>) -> anyhow::Result<Arc<Self>> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Fuel is metered for every plugin so that a policy can cap it; a
        // plugin without a fuel limit gets an effectively endless supply.
        config.consume_fuel(true);
        // Every call instantiates afresh, so instantiation is the hot path:
        // the pooling allocator reuses pre-reserved slots (memories, tables,
        // fiber stacks) and resets memories copy-on-write, instead of an
        // mmap/munmap per call that also serialises on the kernel's lock.
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool_config()));
        config.wasm_component_model(true);
        let engine = Engine::new(&config).map_err(anyhow::Error::from)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(anyhow::Error::from)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)?;
        Plugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |sandbox| sandbox)
            .map_err(anyhow::Error::from)?;

        let cache = match cache_dir {
            Some(dir) => Some(ArtifactCache::open(&dir, &engine)?),
            None => None,
        };
        spawn_epoch_ticker(&engine);
        Ok(Arc::new(Runtime {
            engine,
            linker,
            cache,
            limits,
        }))
    }

    /// Compiles (or loads from the cache) and links a component. Blocking
    /// and CPU-heavy: call it off the async runtime's worker threads.
    /// The error is a sentence saying exactly why the file is not a plugin.
    pub fn compile(
        &self,
        name: &str,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<CompiledPlugin, String> {
        describe_header(wasm)?;
        let cached = self
            .cache
            .as_ref()
            .and_then(|cache| cache.load(&self.engine, content_hash));
        let from_cache = cached.is_some();
        let component = match cached {
            Some(component) => component,
            None => {
                let compiled = match &self.cache {
                    Some(cache) => cache.compile_and_store(&self.engine, content_hash, wasm),
                    None => Component::from_binary(&self.engine, wasm),
                };
                compiled.map_err(|e| format!("invalid component: {}", root_cause(&e)))?
            }
        };
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| {
            format!(
                "the component needs an import toolhost does not provide: {}",
                root_cause(&e)
            )
        })?;
        let pre = PluginPre::new(instance_pre).map_err(|e| {
            format!(
                "the component does not implement the toolhost:plugin/tools@0.1.0 \
                 interface (see wit/plugin.wit): {}",
                root_cause(&e)
            )
        })?;
        Ok(CompiledPlugin {
            name: name.into(),
            pre,
            from_cache,
        })
    }

    /// The grants of a plugin without a policy: nothing, default limits.
    pub fn no_grants(&self) -> Grants {
        Grants::none(self.limits)
    }

    /// Runs `list-tools` in a fresh instance, with no grants: describing
    /// tools needs nothing from outside.
    pub async fn list_tools(&self, plugin: &CompiledPlugin) -> Result<Vec<ToolSpec>, CallFailure> {
        let grants = Arc::new(self.no_grants());
        let mut store = self.new_store(plugin, &grants, None)?;
        let outcome = tokio::time::timeout(self.limits.timeout, async {
            let instance = plugin.pre.instantiate_async(&mut store).await?;
            instance
                .toolhost_plugin_tools()
                .call_list_tools(&mut store)
                .await
        })
        .await;
        settle(plugin, &grants, store, outcome)
    }

    /// Runs `call-tool` in a fresh instance with the plugin's grants.
    /// `arguments` is JSON text; `client` is the client behind the call, if
    /// there is one.
    pub async fn call_tool(
        &self,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        tool: &str,
        arguments: &str,
        client: CallClient,
    ) -> Result<Result<PluginOutput, PluginError>, CallFailure> {
        let mut store = self.new_store(plugin, grants, client)?;
        let outcome = tokio::time::timeout(grants.limits.timeout, async {
            let instance: Plugin = plugin.pre.instantiate_async(&mut store).await?;
            instance
                .toolhost_plugin_tools()
                .call_call_tool(&mut store, tool, arguments)
                .await
        })
        .await;
        settle(plugin, grants, store, outcome)
    }

    /// A store for one call: fresh sandbox, memory cap, fuel, and a deadline
    /// that is checked at every epoch tick.
    fn new_store(
        &self,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        client: CallClient,
    ) -> Result<Store<Sandbox>, CallFailure> {
        let sandbox = Sandbox::new(plugin.name.clone(), grants.clone(), client).map_err(|e| {
            CallFailure::Trapped {
                reason: format!("a granted directory cannot be opened: {e}"),
                stderr: String::new(),
            }
        })?;
        let mut store = Store::new(&self.engine, sandbox);
        store.limiter(|sandbox| &mut sandbox.limiter);
        let _ = store.set_fuel(grants.fuel.unwrap_or(u64::MAX));
        let deadline = Instant::now() + grants.limits.timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        Ok(store)
    }
}

/// Logs what the plugin printed and turns wasmtime's outcome into ours.
fn settle<T>(
    plugin: &CompiledPlugin,
    grants: &Grants,
    store: Store<Sandbox>,
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, CallFailure> {
    let sandbox = store.into_data();
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
            fuel: grants.fuel.unwrap_or(u64::MAX),
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

/// Slots for concurrent instances. A call needs one component instance and a
/// few core instances, memories and tables; beyond these totals a call fails
/// to instantiate rather than exhausting the host.
const POOL_INSTANCES: u32 = 1000;

/// How much of each pooled memory, table and stack is reset in place (and
/// stays mapped) between calls; the rest is returned to the kernel.
const KEEP_RESIDENT: usize = 2 * 1024 * 1024;

fn pool_config() -> wasmtime::PoolingAllocationConfig {
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(4 * POOL_INSTANCES)
        .total_memories(2 * POOL_INSTANCES)
        .total_tables(4 * POOL_INSTANCES)
        .total_stacks(POOL_INSTANCES)
        // Reset what a call touched by writing zeros rather than by
        // madvise(DONTNEED): giving pages back to the kernel costs a TLB
        // shootdown on every core per call (perf: smp_call_function_many_cond
        // under decommit_pages), which capped two callers below one.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .async_stack_keep_resident(KEEP_RESIDENT)
        // Without PAGEMAP_SCAN (Linux 6.7+; off by default in wasmtime 48)
        // that reset writes the whole kept-resident region on every call:
        // for a Rust plugin, its 1 MiB stack although a call touches a few
        // pages of it. gdb on the bench showed a 1 MiB and a 56 KiB memset
        // per call, half of all samples; with the scan only the pages the
        // call dirtied are written back. Older kernels keep the memset.
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// Checks the 8-byte preamble first, because wasmtime's own error for a core
/// module or a random file is less helpful than a sentence naming the fix.
fn describe_header(wasm: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: [u8; 4] = [1, 0, 0, 0];
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        return Err(format!(
            "not a WebAssembly file ({} bytes, no \\0asm header)",
            wasm.len()
        ));
    }
    if wasm[4..8] == CORE_MODULE {
        return Err("a core WebAssembly module, not a component: build it for \
                    wasm32-wasip2, or wrap it with `wasm-tools component new`"
            .into());
    }
    Ok(())
}

fn root_cause(error: &wasmtime::Error) -> String {
    let trap = error.downcast_ref::<Trap>().map(|trap| trap.to_string());
    trap.unwrap_or_else(|| error.root_cause().to_string())
}

fn tail(text: &str, max_bytes: usize) -> String {
    let start = text.len().saturating_sub(max_bytes);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].trim().to_string()
}

fn log_output(plugin: &str, stream: &str, (text, dropped): &(String, usize)) {
    for line in text.lines() {
        tracing::info!(target: "toolhost::plugin", plugin, stream, "{line}");
    }
    if *dropped > 0 {
        tracing::warn!(target: "toolhost::plugin", plugin, stream, dropped, "output over the log limit was dropped");
    }
}

/// Advances the engine's epoch forever. It holds only a weak reference, so
/// it stops once the engine is gone (tests build many engines).
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("toolhost-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch thread");
}
