//! The two compilers, and how a plugin moves from one to the other.
//!
//! Cranelift, wasmtime's optimising compiler, makes the fastest code but
//! needs seconds per megabyte on this class of machine: an 18 MB
//! componentize-py component took 7.9 s on 2 cores before its first
//! answer. Winch, the baseline compiler, translates in one pass, about
//! five times faster (1.6 s for the same component), into code that runs
//! slower wherever the guest itself computes.
//!
//! So a component of [`BASELINE_FROM_BYTES`] or more whose optimised code
//! is not in the cache is compiled by Winch first and serves at once. In a
//! server ([`TierUp::InBackground`]) its first call queues it for Cranelift
//! on one background thread at the lowest priority, so that neither calls
//! nor other plugins' loads wait for it, and a plugin nobody calls costs
//! nothing more: an idle server stays idle after its loads (optimising
//! every large plugin right after start-up kept both cores busy for
//! ~10 s with the two large examples). The optimised code replaces the
//! baseline code between calls (a call in flight finishes on the code it
//! started with), goes to the cache, and the baseline entry is removed. A
//! restart then finds optimised code. Short-lived commands (`call`,
//! `check`, `cgi`) keep the baseline code and its cache entry.
//!
//! The optimiser starts a plugin [`SETTLE`] after its first call, and skips
//! it if it was removed or replaced meanwhile: a compile cannot be stopped
//! once started, and holds hundreds of MB while it runs (CPython's
//! interpreter loop), so a plugin dropped, tried once and replaced (a
//! workshop's or `toolhost dev`'s edit loop) had each version compiled in
//! vain, and the server's memory stayed at the compile's peak for seconds
//! after the plugin was gone (bench: +98 MiB 0.5 s after removing the
//! componentize-py echo; +6 MiB once the compile had ended).
//!
//! Smaller components compile with Cranelift directly while a server
//! starts (or in a short-lived command): ~0.1 s for a Rust plugin, and no
//! one waits for one plugin among its folder. Once the server has started
//! (`Runtime::started`), a plugin loaded is one someone just dropped or
//! published and is waiting for, so it too gets Winch first (about a third
//! of Cranelift's time: 171 KiB echo, 50 against 150 ms with `wasmtime
//! compile`; beside 1,000 plugins Cranelift took 216 ms of a 364 ms drop).
//! Its optimised code costs a fraction of a second, so it is queued at
//! once rather than at its first call, and still waits [`SETTLE`], so a
//! version replaced within seconds (an edit loop) is never optimised. Past
//! [`QUEUE_BUDGET_BYTES`] of queued components, loads come as a batch (a
//! script copying a folder in, a rescan), and a small one compiles
//! optimised directly again. A component Winch cannot compile (a proposal
//! it lacks) goes to Cranelift too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::allocator::{release_free_memory, release_mapped_file_pages};
use super::cache::{ArtifactCache, Image};
use super::executor::lower_thread_priority;
use super::exports::{self, PluginPre};
use super::failure::{CompileError, root_cause};
use super::sandbox::Sandbox;

/// From this size on, a component is compiled by the baseline compiler
/// first. A Rust plugin is 0.1–0.3 MB; a Python or JavaScript one 1–20 MB.
pub(crate) const BASELINE_FROM_BYTES: usize = 1024 * 1024;

/// The priority of the thread that optimises in the background: the
/// lowest, below guest calls (see `executor.rs`).
const OPTIMIZER_NICE: i32 = 19;

/// How long after its first call a plugin waits before it is optimised
/// (see the module's notes).
pub(crate) const SETTLE: Duration = Duration::from_secs(3);

/// Which compiler made a plugin's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Winch: fast to compile.
    Baseline,
    /// Cranelift: fast to run.
    Optimized,
}

impl Tier {
    /// The code's name in a call's accounting and the metrics' `code`
    /// label: `baseline` or `optimised` (`/plugins` keeps serde's
    /// `optimized`).
    pub fn code_name(self) -> &'static str {
        match self {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimised",
        }
    }
}

/// Whether baseline code is replaced by optimised code in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierUp {
    /// A server: it lives long enough for the optimised code to pay off.
    InBackground,
    /// A short-lived command: the baseline code is all it will use.
    Never,
}

/// One compiler and the engine its code runs on.
pub(crate) struct Compiler {
    pub(crate) tier: Tier,
    pub(crate) engine: Engine,
    /// The engine's settings without its pool, for the short-lived
    /// engines that compile (see [`Compiler::precompile`]).
    compile_config: Config,
    linker: Linker<Sandbox>,
}

impl Compiler {
    /// `config` holds the settings both tiers share; `pooled` adds the
    /// instance pool to it.
    pub(crate) fn new(
        tier: Tier,
        mut config: Config,
        pooled: impl FnOnce(&mut Config),
    ) -> anyhow::Result<Self> {
        if tier == Tier::Baseline {
            config.strategy(wasmtime::Strategy::Winch);
        }
        let compile_config = config.clone();
        pooled(&mut config);
        let engine = Engine::new(&config).map_err(anyhow::Error::from)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(anyhow::Error::from)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)?;
        exports::add_to_linker(&mut linker).map_err(anyhow::Error::from)?;
        Ok(Compiler {
            tier,
            engine,
            compile_config,
            linker,
        })
    }

    /// Compiles `wasm` to native code on a short-lived engine with this
    /// engine's settings. Cranelift keeps its per-thread compile contexts
    /// in the engine for reuse, sized by the largest function it has ever
    /// compiled: tens of MiB after a componentize-py component, kept for
    /// the life of the engine. A throwaway engine takes them along when it
    /// is dropped, so memory returns to its baseline once such a plugin is
    /// gone (measured: +67 MiB after removal before, see README).
    pub(crate) fn precompile(&self, wasm: &[u8]) -> Result<Vec<u8>, CompileError> {
        Engine::new(&self.compile_config)
            .and_then(|engine| engine.precompile_component(wasm))
            .map_err(|e| CompileError::Invalid(root_cause(&e)))
    }

    /// Compiles `wasm` as [`Compiler::precompile`] does and links it, on
    /// threads of its own ([`on_own_threads`]): with a cache, the artifact
    /// is written into its new entry as it is emitted, and served from
    /// there, mapped ([`ArtifactCache::compile_into`]); in memory
    /// otherwise, or if the entry cannot be written.
    pub(crate) fn compile_and_link(
        &self,
        wasm: &[u8],
        cache: Option<&ArtifactCache>,
        content_hash: &str,
    ) -> Result<Code, CompileError> {
        on_own_threads(|| self.compile_and_link_here(wasm, cache, content_hash))
    }

    /// [`Compiler::compile_and_link`] on the current thread pool (the
    /// optimiser's, at its priority).
    fn compile_and_link_here(
        &self,
        wasm: &[u8],
        cache: Option<&ArtifactCache>,
        content_hash: &str,
    ) -> Result<Code, CompileError> {
        if let Some(cache) = cache {
            let into_entry = |out: &mut (dyn std::io::Write + Send)| {
                Engine::new(&self.compile_config)
                    .and_then(|engine| engine.precompile_component_to(wasm, out))
                    .map(drop)
                    .map_err(|e| CompileError::Invalid(root_cause(&e)))
            };
            if let Some((component, image)) =
                cache.compile_into(&self.engine, content_hash, into_entry)?
            {
                return self.link(&component, image);
            }
        }
        self.link_artifact(&self.precompile(wasm)?)
    }

    /// Loads an artifact made by [`Compiler::precompile`] and links it.
    pub(crate) fn link_artifact(&self, artifact: &[u8]) -> Result<Code, CompileError> {
        // SAFETY: `artifact` was produced by `precompile`, by an engine with
        // this engine's exact settings, in this process.
        let component = unsafe { Component::deserialize(&self.engine, artifact) }
            .map_err(|e| CompileError::Invalid(root_cause(&e)))?;
        self.link(&component, Image::InMemory)
    }

    /// Resolves a component's imports once, for every call to come.
    pub(crate) fn link(&self, component: &Component, image: Image) -> Result<Code, CompileError> {
        let instance_pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| CompileError::MissingImport(root_cause(&e)))?;
        let pre =
            PluginPre::new(instance_pre).map_err(|e| CompileError::NotAPlugin(root_cause(&e)))?;
        Ok(Code {
            pre,
            tier: self.tier,
            image,
        })
    }
}

/// A plugin's code, linked and ready to instantiate.
pub(crate) struct Code {
    pub(crate) pre: PluginPre,
    pub(crate) tier: Tier,
    image: Image,
}

impl Code {
    /// Lets go of the pages of a mapped image this process has touched
    /// (describing a plugin runs its code), so that the code of a plugin
    /// not called since is the page cache's, not counted in this process
    /// and reclaimable; a call reads what it runs back from the page cache.
    /// Measured at 1,000 plugins: ~270 of 467 MiB of an idle server.
    pub(crate) fn release_resident(&self) {
        if self.image == Image::Mapped {
            let range = self.pre.instance_pre().component().image_range();
            release_mapped_file_pages(range.start, range.end.addr() - range.start.addr());
        }
    }
}

/// Where a plugin's current code lives: swapped from baseline to
/// optimised in place, so the registry never changes for it.
pub(crate) type CodeCell = Arc<ArcSwap<Code>>;

/// What both the runtime and the background optimiser need: the two
/// compilers and the on-disk cache, and who to tell when optimised code
/// starts serving. The optimiser holds it weakly, so it ends with the
/// runtime.
pub(crate) struct Tiers {
    pub(crate) optimized: Compiler,
    pub(crate) baseline: Compiler,
    pub(crate) cache: Option<ArtifactCache>,
    /// The name of each plugin whose optimised code now serves.
    pub(crate) optimised: tokio::sync::broadcast::Sender<(Arc<str>, std::time::Duration)>,
}

impl Tiers {
    pub(crate) fn new(
        optimized: Compiler,
        baseline: Compiler,
        cache: Option<ArtifactCache>,
    ) -> Self {
        Tiers {
            optimized,
            baseline,
            cache,
            optimised: tokio::sync::broadcast::Sender::new(64),
        }
    }
}

/// A plugin on baseline code that has not been queued for optimising yet:
/// its bytes, until its first call takes them to the optimiser.
pub(crate) struct Pending {
    /// Set by the first call: every later call checks only this.
    queued: AtomicBool,
    wasm: Mutex<Option<Vec<u8>>>,
    content_hash: String,
}

impl Pending {
    pub(crate) fn new(wasm: &[u8], content_hash: &str) -> Arc<Pending> {
        Arc::new(Pending {
            queued: AtomicBool::new(false),
            wasm: Mutex::new(Some(wasm.to_vec())),
            content_hash: content_hash.to_string(),
        })
    }
}

/// The most bytes of components the optimiser's queue holds before a
/// small plugin loaded into a running server compiles optimised directly
/// instead: past it, loads come as a batch (a script copying a folder in,
/// a rescan), not one person waiting, and each queued job holds a copy of
/// its component until its turn, one at a time at the lowest priority.
pub(crate) const QUEUE_BUDGET_BYTES: usize = 32 << 20;

/// One component waiting for its optimised code.
struct Job {
    name: Arc<str>,
    wasm: Queued,
    content_hash: String,
    /// Gone when the plugin was removed or replaced before its turn.
    target: Weak<ArcSwap<Code>>,
    /// When its first call queued it.
    queued: Instant,
}

/// A queued component's bytes, counted in the queue's total until the job
/// is done or skipped.
struct Queued {
    wasm: Vec<u8>,
    total: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.total.fetch_sub(self.wasm.len(), Ordering::Relaxed);
    }
}

/// The background optimiser: one thread, started on first use, working
/// through its queue one component at a time.
#[derive(Default)]
pub(crate) struct Optimizer {
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    /// The bytes of the components queued now.
    queued_bytes: Arc<AtomicUsize>,
}

impl Optimizer {
    /// Whether `bytes` more fit in the queue under [`QUEUE_BUDGET_BYTES`].
    pub(crate) fn has_room_for(&self, bytes: usize) -> bool {
        self.queued_bytes.load(Ordering::Relaxed) + bytes <= QUEUE_BUDGET_BYTES
    }

    /// Queues a pending plugin to be compiled by Cranelift and put into
    /// `target`, once: later calls find its bytes gone.
    pub(crate) fn enqueue(
        &self,
        tiers: &Arc<Tiers>,
        name: &Arc<str>,
        pending: &Pending,
        target: &CodeCell,
    ) {
        if pending.queued.swap(true, Ordering::Relaxed) {
            return;
        }
        let Some(wasm) = pending
            .wasm
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        self.queued_bytes.fetch_add(wasm.len(), Ordering::Relaxed);
        let job = Job {
            name: name.clone(),
            wasm: Queued {
                wasm,
                total: self.queued_bytes.clone(),
            },
            content_hash: pending.content_hash.clone(),
            target: Arc::downgrade(target),
            queued: Instant::now(),
        };
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let sender = queue.get_or_insert_with(|| {
            let (sender, jobs) = mpsc::channel();
            let tiers = Arc::downgrade(tiers);
            let spawned = std::thread::Builder::new()
                .name("toolhost-optimize".into())
                .spawn(move || optimize_all(tiers, jobs));
            if let Err(error) = spawned {
                tracing::warn!(%error, "cannot start the optimiser; plugins on baseline code keep it");
            }
            sender
        });
        // A closed queue (the thread could not start) keeps baseline code.
        let _ = sender.send(job);
    }
}

fn optimize_all(tiers: Weak<Tiers>, jobs: mpsc::Receiver<Job>) {
    lower_thread_priority(OPTIMIZER_NICE);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("toolhost-optimize-{i}"))
        .start_handler(|_| lower_thread_priority(OPTIMIZER_NICE))
        .build();
    let pool = match pool {
        Ok(pool) => pool,
        Err(error) => {
            tracing::warn!(%error, "cannot start the optimiser's threads; plugins on baseline code keep it");
            return;
        }
    };
    for job in jobs {
        std::thread::sleep((job.queued + SETTLE).saturating_duration_since(Instant::now()));
        if job.target.strong_count() == 0 {
            continue;
        }
        let Some(tiers) = tiers.upgrade() else {
            return;
        };
        let started = Instant::now();
        let optimized = &tiers.optimized;
        let outcome = pool.install(|| -> Result<Option<Code>, CompileError> {
            let code = optimized.compile_and_link_here(
                &job.wasm.wasm,
                tiers.cache.as_ref(),
                &job.content_hash,
            )?;
            // Replaced or removed while it compiled: its version's entries
            // are already forgotten, and the one just written goes too.
            if job.target.strong_count() == 0 {
                if let Some(cache) = &tiers.cache {
                    cache.remove(&optimized.engine, &job.content_hash);
                }
                return Ok(None);
            }
            Ok(Some(code))
        });
        match outcome {
            Ok(None) => {}
            Ok(Some(code)) => {
                if let Some(cache) = &tiers.cache {
                    cache.remove(&tiers.baseline.engine, &job.content_hash);
                }
                if let Some(target) = job.target.upgrade() {
                    target.store(Arc::new(code));
                    tracing::info!(plugin = %job.name, seconds = started.elapsed().as_secs_f64(), "optimised code now serves");
                    let _ = tiers.optimised.send((job.name.clone(), started.elapsed()));
                }
            }
            Err(error) => {
                tracing::warn!(plugin = %job.name, %error, "optimising failed; the baseline code keeps serving");
            }
        }
        drop(tiers);
        release_free_memory();
    }
}

/// Runs a load's compile on a thread pool of its own: wasmtime compiles
/// functions in parallel on the current rayon pool, and in a shared pool
/// a small plugin's functions would queue behind every function of a
/// large one compiling beside it. Made only when there is something to
/// compile: a load from the cache needs no threads (a warm restart of
/// 1,000 plugins started and ended 2,000 of them).
///
/// Inside [`ahead_of_time`], the pool's threads run at the optimiser's
/// priority.
pub(crate) fn on_own_threads<T: Send>(compile: impl FnOnce() -> T + Send) -> T {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let background = AHEAD.with(std::cell::Cell::get);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("toolhost-compile-{i}"))
        .start_handler(move |_| {
            if background {
                lower_thread_priority(OPTIMIZER_NICE);
            }
        })
        .build();
    match pool {
        Ok(pool) => pool.install(compile),
        Err(error) => {
            tracing::warn!(%error, "cannot start compiler threads; compiling on the shared ones");
            compile()
        }
    }
}

thread_local!(static AHEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

/// Runs `prepare` with whatever it compiles on threads of the lowest
/// priority, as the optimiser's: work for publishes to come (the language
/// runtimes compiled as a server starts) gives way to calls and to the
/// loads of plugins already published (guest threads run at nice 10: the
/// first source's load, on a fresh server, ran at a tenth of a core while
/// the JavaScript runtime compiled beside it). With nothing else to run,
/// it runs as fast.
pub(crate) fn ahead_of_time<T>(prepare: impl FnOnce() -> T) -> T {
    /// Puts the thread's mark back however `prepare` ends.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            AHEAD.with(|ahead| ahead.set(self.0));
        }
    }
    let _restore = Restore(AHEAD.with(|ahead| ahead.replace(true)));
    prepare()
}

/// Checks the 8-byte preamble first, because wasmtime's own error for a core
/// module or a random file is less helpful than a sentence naming the fix.
pub(crate) fn check_header(wasm: &[u8]) -> Result<(), CompileError> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: [u8; 4] = [1, 0, 0, 0];
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        return Err(CompileError::NotWasm { bytes: wasm.len() });
    }
    if wasm[4..8] == CORE_MODULE {
        return Err(CompileError::CoreModule);
    }
    Ok(())
}
