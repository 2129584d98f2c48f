//! [`Runtime`], the one type that runs wasm, with all of its methods: the
//! engines and compilers (a component compiled, from the cache or not, and
//! tiered up), the executor's slots, and the call path (the listings,
//! `call-tool` and the 0.2.0 asks in an instance, fresh or kept by a policy
//! that opts in: `warm.rs`; each store made ready with its deadline, fuel
//! and memory budget, run on the executor, its outcome settled in
//! `outcome.rs`).

mod images;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::{Config, Store, UpdateDeadline};

use super::asks::{Answer, Ask};
use super::cache::ArtifactCache;
use super::client::CallClient;
use super::compiled::{CompiledPlugin, Description, PluginParts};
use super::compiler::{
    self, BASELINE_FROM_BYTES, Compiler, Optimizer, Pending, Tier, TierUp, Tiers,
};
use super::executor::{self, Cancel, Executor, Refusal};
use super::exports::Plugin;
use super::failure::{CallFailure, CompileError};
use super::grants::{Grants, Limits};
use super::outcome::{Printed, ToolRun, settle, usage_of};
use super::pool;
use super::sandbox::Sandbox;
use super::snapshot::{
    self,
    image::{Image, ImageError, ImageStore},
};
use super::usage::CallUsage;
use super::warm::{Filling, KeptInstances, SPARE_WAIT, Shelf, Spare, Taken};

pub struct Runtime {
    /// Both compilers and the cache, shared with the optimiser.
    tiers: Arc<Tiers>,
    tier_up: TierUp,
    /// Set once the start-up loads are done ([`Runtime::started`]): from
    /// then on each load is a plugin someone dropped or published and is
    /// waiting for.
    started: std::sync::atomic::AtomicBool,
    optimizer: Optimizer,
    limits: Limits,
    executor: Executor,
    /// How many instances are kept between calls, over every plugin.
    kept: KeptInstances,
    /// Calls served by a spare instance made ahead (`warm.rs`).
    spares_used: std::sync::atomic::AtomicU64,
    /// The code of every component served now, by content hash: a second
    /// plugin of the same bytes (thirty Python sources on the one Python
    /// runtime, the same component in two namespaces) shares its code,
    /// compiled and held once, tiered up once.
    live: std::sync::Mutex<std::collections::HashMap<String, LiveCode>>,
    /// One compile per content hash at a time: thirty sources published at
    /// once wait for the one compile of their runtime, then share it.
    compiling: std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::Mutex<()>>>>,
    /// Code held for the runtime's life whether a plugin serves on it or
    /// not: the language runtimes, compiled at start-up
    /// ([`Runtime::keep_compiled`]), so that the first source published is
    /// live as fast as the thirtieth.
    held: std::sync::Mutex<Vec<CompiledPlugin>>,
    /// What all sources' images hold, each run once, and its bound
    /// (`snapshot/`).
    images: Arc<ImageStore>,
}

/// A component's code as [`Runtime::compile`] shares it: the code, whether
/// a call may start inline, and the tier-up it waits for, if any.
type LiveCode = (
    std::sync::Weak<arc_swap::ArcSwap<compiler::Code>>,
    bool,
    Option<std::sync::Weak<Pending>>,
);

impl Runtime {
    /// Builds the engine and the executor. `cache_dir` of `None` disables
    /// the on-disk compile cache; `max_calls` is how many calls (and
    /// load-time tool listings) run guest code at once; `tier_up` says
    /// whether baseline code is optimised in the background.
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
        let tiers = Arc::new(Tiers::new(optimized, baseline, cache));
        // Both engines' pools: images may be mapped in either's slots.
        let images = ImageStore::new(snapshot::IMAGES_MAX_BYTES, 4 * max_calls.max(1));
        let mut replaced = tiers.optimised.subscribe();
        let layers = Arc::downgrade(&images);
        executor.guests().spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            while let Ok(_) | Err(RecvError::Lagged(_)) = replaced.recv().await {
                let Some(images) = layers.upgrade() else {
                    return;
                };
                images.layers.code_replaced();
            }
        });
        Ok(Arc::new(Runtime {
            tiers,
            tier_up,
            started: Default::default(),
            optimizer: Optimizer::default(),
            limits,
            executor,
            kept: KeptInstances::new(max_calls.max(1)),
            spares_used: Default::default(),
            live: Default::default(),
            compiling: Default::default(),
            held: Default::default(),
            images,
        }))
    }

    /// Compiles (or loads from the cache) a component that plugins will
    /// share, and holds its code for the runtime's life: each plugin of
    /// these bytes then starts on it at once; a runtime that gives images
    /// has a fresh instance's memory read too (`engine/images.rs`).
    /// Blocking, like [`Runtime::compile`].
    #[tracing::instrument(level = "info", skip(self, wasm, content_hash))]
    pub(crate) fn keep_compiled(
        self: &Arc<Self>,
        name: &str,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<(), CompileError> {
        let started = std::time::Instant::now();
        let compiled = compiler::ahead_of_time(|| self.compile_runtime(name, wasm, content_hash))?;
        self.read_fresh_ahead(&compiled);
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            from_cache = compiled.from_cache,
            "compiled ahead of its first plugin"
        );
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(compiled);
        Ok(())
    }

    /// [`Runtime::compile`] for a language runtime: the runtime rewritten
    /// once so that its sources' images can be taken and laid
    /// (`snapshot/`), or as it is if it cannot be (said once, in the log).
    pub(crate) fn compile_runtime(
        self: &Arc<Self>,
        name: &str,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<CompiledPlugin, CompileError> {
        match snapshot::rewritten(wasm, content_hash) {
            Some(rewritten) => self.compile(name, &rewritten.wasm, &rewritten.hash),
            None => self.compile(name, wasm, content_hash),
        }
    }

    /// Compiles (or loads from the cache) and links a component: optimised
    /// code from the cache if there is some, else baseline code first for a
    /// large component, and for any component a running server loads after
    /// its start, else optimised code (see [`compiler`]). Blocking and
    /// CPU-heavy: call it off the async runtime's worker threads.
    pub(crate) fn compile(
        self: &Arc<Self>,
        name: &str,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<CompiledPlugin, CompileError> {
        let name: Arc<str> = name.into();
        if let Some(shared) = self.shared(&name, content_hash) {
            return Ok(shared);
        }
        let turn = {
            let mut compiling = self.compiling.lock().unwrap_or_else(|e| e.into_inner());
            compiling.retain(|_, turn| Arc::strong_count(turn) > 1);
            compiling
                .entry(content_hash.to_string())
                .or_default()
                .clone()
        };
        let _turn = turn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = self.shared(&name, content_hash) {
            return Ok(shared);
        }
        let compiled = self.compile_afresh(name, wasm, content_hash)?;
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|_, (code, _, _)| code.strong_count() > 0);
        live.insert(
            content_hash.to_string(),
            (
                Arc::downgrade(&compiled.code),
                compiled.inline,
                compiled.pending.as_ref().map(Arc::downgrade),
            ),
        );
        Ok(compiled)
    }

    /// A plugin on the code another plugin of the same bytes serves on,
    /// if one does: its own spare and shelf, the code shared.
    fn shared(&self, name: &Arc<str>, content_hash: &str) -> Option<CompiledPlugin> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let (code, inline, pending) = live.get(content_hash)?;
        let code = code.upgrade()?;
        Some(CompiledPlugin::new(PluginParts {
            name: name.clone(),
            code,
            pending: pending.as_ref().and_then(std::sync::Weak::upgrade),
            from_cache: true,
            inline: *inline,
            shelf: Shelf::default(),
            spare: Spare::default(),
            image: Default::default(),
        }))
    }

    fn compile_afresh(
        self: &Arc<Self>,
        name: Arc<str>,
        wasm: &[u8],
        content_hash: &str,
    ) -> Result<CompiledPlugin, CompileError> {
        compiler::check_header(wasm)?;
        let tiers = &self.tiers;
        let cached = |compiler: &Compiler| {
            let cache = tiers.cache.as_ref()?;
            let (component, image) = cache.load(&compiler.engine, content_hash)?;
            Some(compiler.link(&component, image))
        };
        let compiled = |compiler: &Compiler| {
            compiler.compile_and_link(wasm, tiers.cache.as_ref(), content_hash)
        };
        let large = wasm.len() >= BASELINE_FROM_BYTES;
        let plugin = |code: compiler::Code, from_cache| PluginParts {
            name: name.clone(),
            code: Arc::new(arc_swap::ArcSwap::from_pointee(code)),
            pending: None,
            from_cache,
            inline: !large,
            shelf: Shelf::default(),
            spare: Spare::default(),
            image: Default::default(),
        };
        if let Some(code) = cached(&tiers.optimized) {
            return Ok(CompiledPlugin::new(plugin(code?, true)));
        }
        let tier_up = self.tier_up == TierUp::InBackground;
        // A small component on baseline code is queued for the optimiser
        // at once while the queue has room; it gets baseline code first
        // only then, and only once someone waits for it (after start-up).
        let queue_at_once = !large && tier_up && self.optimizer.has_room_for(wasm.len());
        let baseline_first =
            large || (queue_at_once && self.started.load(std::sync::atomic::Ordering::Acquire));
        // Baseline code in the cache serves whatever the size (a small
        // plugin dropped into a server restarted before its optimised code
        // was made); it is compiled afresh only for the cases above.
        let baseline = match cached(&tiers.baseline) {
            Some(code) => Some(code.map(|code| (code, true))),
            None if baseline_first => Some(compiled(&tiers.baseline).map(|code| (code, false))),
            None => None,
        };
        if let Some(baseline) = baseline {
            match baseline {
                Ok((code, from_cache)) => {
                    let mut plugin = plugin(code, from_cache);
                    if tier_up {
                        let pending = Pending::new(wasm, content_hash);
                        if queue_at_once {
                            // A small component's optimised code costs a
                            // fraction of a second: it is queued now, not
                            // at its first call (so its calls need not
                            // look), and still waits `SETTLE`.
                            self.optimizer.enqueue(tiers, &name, &pending, &plugin.code);
                        } else {
                            plugin.pending = Some(pending);
                        }
                    }
                    return Ok(CompiledPlugin::new(plugin));
                }
                Err(error) => {
                    tracing::info!(plugin = %name, %error, "the baseline compiler cannot take this component; optimising now");
                }
            }
        }
        Ok(CompiledPlugin::new(plugin(
            compiled(&tiers.optimized)?,
            false,
        )))
    }

    /// Says that the start-up loads are done: from now on, a component
    /// not in the cache is compiled by the baseline compiler first
    /// whatever its size, because someone who just dropped or published
    /// it is waiting for its first answer (`compiler.rs`). A short-lived
    /// command never calls this.
    pub(crate) fn started(&self) {
        self.started
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// A plugin that has just started serving with `grants`, alone (the
    /// registry says so for a drop, a publish or a policy edit: someone
    /// calls it next): a large one gets its first spare now, so that its
    /// first call finds one (`warm.rs`). Plugins loaded while the server
    /// starts get theirs after a first call, as every plugin's later
    /// spares. A rescan reloads file by file, so each changed plugin gets
    /// one if a slot is free then, within the spares' room (half the
    /// pool); spares are never evicted. Never for a version that does not
    /// serve: one held for approval or waiting for a name runs no code
    /// with its grants.
    pub(crate) fn loaded(self: &Arc<Self>, plugin: &CompiledPlugin, grants: &Arc<Grants>) {
        if self.started.load(std::sync::atomic::Ordering::Acquire) {
            self.refill(plugin, grants, false);
        }
    }

    /// Its code was replaced by optimised code: the spare made of the old
    /// code goes now (torn down on a guest thread), not at its next call,
    /// so that the old code's memory goes with the last of them.
    pub(crate) fn code_replaced(&self, plugin: &CompiledPlugin) {
        if let Some(spare) = plugin.spare.take_prepared() {
            self.executor.guests().spawn_blocking(move || drop(spare));
        }
    }

    /// A version that no longer serves (replaced, displaced, waiting for a
    /// name): its spare and kept instances go now, not with its last
    /// clone (a waiting version is held for as long as it waits). A call
    /// of it still running may leave one more behind, which goes with the
    /// version, or when it serves again and is replaced.
    pub(crate) fn unserved(&self, plugin: &CompiledPlugin) {
        plugin.spare.clear();
        plugin.shelf.clear();
        plugin.image.clear();
    }

    /// The grants of a plugin without a policy: nothing, default limits.
    pub(crate) fn no_grants(&self) -> Grants {
        Grants::none(self.limits)
    }

    /// How many calls run guest code at once.
    pub(crate) fn max_calls(&self) -> usize {
        self.executor.max_calls()
    }

    /// How many calls a spare instance made ahead has served.
    pub(crate) fn spares_used(&self) -> u64 {
        self.spares_used.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many unused pool slots have been trimmed (`executor.rs`).
    pub(crate) fn slots_trimmed(&self) -> u64 {
        self.executor.slots_trimmed()
    }

    /// How many instances are held between calls now, over every plugin
    /// (`warm.rs`).
    pub(crate) fn instances_held(&self) -> usize {
        self.kept.held()
    }

    /// The bytes all sources' images hold now, pieces shared by several
    /// images once (`snapshot/`).
    pub(crate) fn image_bytes(&self) -> usize {
        self.images.held()
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

impl Runtime {
    /// Runs `list-tools`, and the listings of whichever of `resources` and
    /// `prompts` the component exports, in one fresh instance with no
    /// grants but a language runtime's source (a version may be held for
    /// approval or wait for a name: it runs no code with its grants), on
    /// the executor like a call, under the same limits. A source whose
    /// grants (`grants`, those it will serve with) give nothing more has
    /// its image taken from that same instance, if its module ran long
    /// (`engine/images.rs`): a publish runs the module once, and its first
    /// call starts from the image. A large plugin whose serving grants are
    /// those very grants keeps that instance as its first spare (`warm.rs`).
    pub(crate) async fn describe(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        serving: &Arc<Grants>,
    ) -> Result<Description, CallFailure> {
        // Never ahead of a call waiting for a slot, as a spare.
        let wants_image = serving.give_nothing()
            && self.calls_waiting() == 0
            && self.wants_image(plugin, serving);
        // Grants that give nothing, with the default limits, are what it is
        // described with anyway: then the instance that described it is one
        // it may serve in, and a large plugin loaded in a running server
        // keeps it as its first spare (`warm.rs`) rather than making
        // another as it starts serving.
        let alike = serving.alike_to_none(&self.limits);
        let grants = match alike {
            true => serving.clone(),
            false => Arc::new(Grants {
                source: serving.source.clone(),
                ..self.no_grants()
            }),
        };
        let keep = alike
            && !plugin.inline
            && serving.reuse_instance.is_none()
            && self.started.load(std::sync::atomic::Ordering::Acquire);
        let serving = serving.clone();
        let (runtime, plugin) = (self.clone(), plugin.clone());
        let (job_plugin, job_serving) = (plugin.clone(), serving.clone());
        let started = Instant::now();
        let inline = plugin.inline;
        let described = self
            .run(inline, move |cancel| async move {
                let (plugin, serving) = (job_plugin, job_serving);
                let code = plugin.code.load_full();
                let funcs = code.pre.state().copied().filter(|_| wants_image);
                // The image is for the grants it serves with, which give
                // the module nothing more than these.
                let taking = |funcs| images::Taking {
                    plugin: &plugin,
                    code: &code,
                    funcs,
                    grants: &serving,
                    cancel: &cancel,
                };
                let fresh = match &funcs {
                    Some(funcs) => tokio::time::timeout(
                        grants.limits.timeout,
                        runtime.fresh_pages(&taking(funcs)),
                    )
                    .await
                    .ok()
                    .and_then(Result::ok),
                    None => None,
                };
                let mut store = runtime.new_store(&plugin, &code, &grants, None, cancel.clone())?;
                let module_started = Instant::now();
                let outcome = tokio::time::timeout(grants.limits.timeout, async {
                    let instance = code.pre.instantiate_async(&mut store).await?;
                    let tools = code.pre.list_tools(&mut store, &instance).await?;
                    let mut description = Description {
                        tools,
                        provides: code.pre.provides(),
                        ..Description::default()
                    };
                    if let Some(resources) = code.pre.resources(&mut store, &instance)? {
                        description.resources = resources.call_list_resources(&mut store).await?;
                        description.templates = resources.call_list_templates(&mut store).await?;
                    }
                    if let Some(prompts) = code.pre.prompts(&mut store, &instance)? {
                        description.prompts = prompts.call_list_prompts(&mut store).await?;
                    }
                    if let Some(views) = code.pre.views(&mut store, &instance)? {
                        description.views = views.call_list_views(&mut store).await?;
                    }
                    if let Some(details) = code.pre.tool_details(&mut store, &instance)? {
                        description.details = details.call_list_tool_details(&mut store).await?;
                    }
                    Ok((description, instance))
                })
                .await;
                let module_ran = module_started.elapsed();
                let (settled, mut printed) = settle(
                    &plugin.name,
                    &grants,
                    grants.limits.timeout,
                    &mut store,
                    outcome,
                );
                printed.log();
                let (description, instance) = match settled {
                    Ok(described) => described,
                    Err(failure) => {
                        drop(store);
                        plugin.release_resident(&code);
                        return Err(failure);
                    }
                };
                // Its state now is the module's, and nothing of a caller's.
                // A module that ran long is imaged now, before the version
                // serves; a quick one serves at once, and is imaged (or
                // found not worth it) once its calls have paid for it.
                let image = match (&funcs, &fresh) {
                    (Some(funcs), Some(fresh)) if module_ran >= images::TAKE_AT_LOAD_FROM => Some(
                        tokio::time::timeout(
                            grants.limits.timeout,
                            Image::take(
                                funcs,
                                &runtime.images,
                                (&mut store, instance.instance()),
                                fresh,
                            ),
                        )
                        .await
                        .unwrap_or(Err(ImageError::PastDeadline)),
                    ),
                    _ => None,
                };
                match (image.is_none() && keep, plugin.spare.start_filling()) {
                    (true, Some(filling)) => runtime.keep_as_spare(
                        &plugin,
                        filling,
                        store,
                        instance,
                        code.clone(),
                        grants.clone(),
                    ),
                    _ => drop(store),
                }
                let image = match (image, &funcs) {
                    (Some(Ok(image)), Some(funcs)) => Some(
                        tokio::time::timeout(
                            grants.limits.timeout,
                            runtime.verified(&taking(funcs), image, module_ran),
                        )
                        .await
                        .unwrap_or(Err(ImageError::PastDeadline)),
                    ),
                    (Some(Err(declined)), _) => Some(Err(declined)),
                    (_, _) => None,
                };
                plugin.release_resident(&code);
                Ok((description, image, module_ran))
            })
            .await;
        match described {
            Ok(((description, image, module_ran), _cpu)) => {
                plugin.image.module_ran(module_ran);
                if wants_image {
                    // No image here (a quick module, or the runtime's fresh
                    // memory could not be read): a refill after a call
                    // tries again, once the calls have paid for it.
                    self.image_taken(&plugin, &serving, image, started);
                }
                Ok(description)
            }
            Err(failure) => {
                if wants_image {
                    plugin.image.taken(&serving, None);
                }
                Err(failure)
            }
        }
    }

    /// Runs `call-tool` in a fresh instance with the plugin's grants.
    /// `arguments` is JSON text; `client` is the client behind the call, if
    /// there is one. What the plugin printed comes back for the caller to
    /// log in the call's span, which it may make only then.
    pub async fn call_tool(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        tool: &str,
        arguments: String,
        client: CallClient,
    ) -> ToolRun {
        self.call_tool_until(plugin, grants, tool, arguments, client, None)
            .await
    }

    /// As [`Self::call_tool`], with `task_deadline`, a task's own deadline
    /// when the call is a task's run (the grants' call deadline still
    /// holds if it is longer).
    pub(crate) async fn call_tool_until(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        tool: &str,
        arguments: String,
        client: CallClient,
        task_deadline: Option<Duration>,
    ) -> ToolRun {
        let timeout = task_deadline.map_or(grants.limits.timeout, |task| {
            task.max(grants.limits.timeout)
        });
        if let Some(pending) = &plugin.pending {
            self.optimizer
                .enqueue(&self.tiers, &plugin.name, pending, &plugin.code);
        }
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        let tool = tool.to_string();
        // The caller's span (a tool call's, when debug logs or traces
        // made it up front) goes with the call to the guest thread.
        let span = tracing::Span::current();
        // A large plugin's spare made ahead (`warm.rs`) is taken before the
        // call is scheduled: with one, nothing is left to instantiate, so
        // the call's first slice runs where its caller is, as a small
        // plugin's does. Without that, a call that needs a few hundred
        // microseconds of guest code paid two thread wake-ups more than
        // the guest code took on a machine otherwise idle (a workshop's
        // pace). A spare of replaced code or older grants is torn down on
        // a guest thread, and the call goes there to make its own.
        // One being made, when the call comes (a caller right behind its
        // last call), is waited for: it is ready sooner than an instance
        // the call would make.
        let spare = match grants.reuse_instance {
            None if !plugin.inline => {
                let take = || {
                    plugin
                        .spare
                        .take(&plugin.code.load(), &grants, self.executor.guests())
                };
                match take() {
                    Some(taken) => Some(taken),
                    None if plugin.spare.wait_while_filling(SPARE_WAIT).await => take(),
                    None => None,
                }
            }
            _ => None,
        };
        let inline = plugin.inline || spare.is_some();
        let ran = self
            .run(inline, move |cancel| {
                async move {
                    // The code the spare was made of, or the code served
                    // now; then a kept instance (policy opt-in,
                    // `warm.rs`) or the spare, made ready for this call,
                    // or a fresh store. A large plugin's next spare is made
                    // after this call has answered.
                    let spare = spare.map(Taken::use_it);
                    let code = match &spare {
                        Some(prepared) => prepared.code().clone(),
                        None => plugin.code.load_full(),
                    };
                    let warm = grants.reuse_instance.and_then(|_| plugin.shelf.take(&code));
                    let (mut store, kept, served) = match (warm, spare) {
                        (Some(warm), _) => {
                            let mut store = warm.store;
                            runtime.ready_store(&mut store, &grants, timeout, client, cancel);
                            (store, Some(warm.instance), warm.calls)
                        }
                        (None, Some(prepared)) => {
                            runtime
                                .spares_used
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let mut store = prepared.store;
                            runtime.ready_store(&mut store, &grants, timeout, client, cancel);
                            (store, Some(prepared.instance), 0)
                        }
                        (None, None) => (
                            runtime.new_store_until(
                                &plugin, &code, &grants, timeout, client, cancel,
                            )?,
                            None,
                            0,
                        ),
                    };
                    let warm = kept.is_some();
                    let outcome = tokio::time::timeout(timeout, async {
                        let instance: Plugin = match kept {
                            Some(instance) => instance,
                            None => {
                                Self::fresh_instance(&plugin, &code, &grants, &mut store).await?
                            }
                        };
                        let answer = instance
                            .call_tool(&mut store, &tool, &arguments)
                            .instrument(tracing::debug_span!("guest"))
                            .await?;
                        Ok((answer, instance))
                    })
                    .await;
                    let usage = CallUsage {
                        warm,
                        ..usage_of(&store, &grants, &code)
                    };
                    let (outcome, instance) = match outcome {
                        Ok(Ok((answer, instance))) => (Ok(Ok(answer)), Some(instance)),
                        Ok(Err(error)) => (Ok(Err(error)), None),
                        Err(elapsed) => (Err(elapsed), None),
                    };
                    let (settled, printed) =
                        settle(&plugin.name, &grants, timeout, &mut store, outcome);
                    // Only an instance whose call ended well is handed on;
                    // a large one is torn down after the answer has gone.
                    match (grants.reuse_instance, instance, &settled) {
                        (Some(reuse), Some(instance), Ok(_)) if served + 1 < reuse => plugin
                            .shelf
                            .put(&runtime.kept, store, instance, code.clone(), served + 1),
                        _ if !plugin.inline => runtime.after_call(&plugin, &grants, store).await,
                        _ => {}
                    }
                    Ok((settled, usage, printed))
                }
                .instrument(span)
            })
            .await;
        match ran {
            Ok(((outcome, usage, printed), cpu)) => ToolRun {
                outcome,
                usage: Some(CallUsage { cpu, ..usage }),
                printed,
            },
            Err(failure) => ToolRun {
                outcome: Err(failure),
                usage: None,
                printed: Printed::default(),
            },
        }
    }

    /// Removes components' compiled code from the on-disk cache: versions
    /// no longer served (`cache.rs`). On a blocking thread when there is a
    /// runtime: it lists the cache folder.
    pub(crate) fn forget_compiled(&self, content_hashes: Vec<String>) {
        if content_hashes.is_empty() {
            return;
        }
        let Some(cache) = self.tiers.cache.clone() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || cache.forget(&content_hashes));
            }
            Err(_) => cache.forget(&content_hashes),
        }
    }

    /// Runs one job on the executor (`inline`: see [`Executor::run`]) and
    /// folds its refusals into failures; with its output, the CPU time it
    /// took.
    pub(super) async fn run<T, F, Fut>(
        &self,
        inline: bool,
        job: F,
    ) -> Result<(T, Duration), CallFailure>
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

    /// After a large plugin's call has answered, on guest threads and one
    /// after the other: its used store torn down (resetting a large
    /// instance's memory takes a fraction of a millisecond the caller need
    /// not wait for), then its next spare made. Not beside the call: the
    /// memory mappings of a second instance made at the same time slowed
    /// the call's own page faults more than the spare saved. With no room
    /// to hold the store past the call (`KeptInstances`), it is torn down
    /// before the answer, within the call's slot, and on a guest thread: a
    /// call that began where its caller is yields, and so moves there.
    async fn after_call(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        store: Store<Sandbox>,
    ) {
        let Some(room) = self.kept.claim() else {
            tokio::task::yield_now().await;
            drop(store);
            self.refill(plugin, grants, true);
            return;
        };
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        self.executor.guests().spawn(async move {
            let _ = tokio::task::spawn_blocking(move || {
                drop(store);
                drop(room);
            })
            .await;
            runtime.refill(&plugin, &grants, true);
        });
    }

    /// Makes `plugin`'s next spare instance (`warm.rs`) on the executor,
    /// after a call has answered (`after_call`) or as a plugin starts
    /// serving (`loaded`), unless the plugin is small (its instantiation
    /// costs microseconds), reuses instances by policy, or has a spare or
    /// one being made. The spare is instantiated, then warmed: it answers
    /// `list-tools` (no input, nothing of a caller's), so that an
    /// interpreter's first-use costs (function references made lazily,
    /// the copy-on-write faults of its heap) are paid here rather than by
    /// the call; what that printed is dropped. Best effort: with every
    /// slot busy, no room for a spare, or if instantiating fails, the next
    /// call makes its own instance. If warming fails, the plugin's spares
    /// are only instantiated from then on. After a call (`called`), a
    /// source's image is taken first once its calls have paid for it
    /// (`ImageSlot::called_and_paid`).
    fn refill(self: &Arc<Self>, plugin: &CompiledPlugin, grants: &Arc<Grants>, called: bool) {
        if plugin.inline || grants.reuse_instance.is_some() {
            return;
        }
        if called && plugin.image.called_and_paid() {
            self.take_image(plugin, grants);
        }
        // Only with a slot free now: a spare never queues ahead of a call.
        if self.calls_waiting() > 0 || self.calls_running() >= self.max_calls() {
            return;
        }
        let (Some(filling), Ok(handle)) = (
            plugin.spare.start_filling(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        let Some(room) = self
            .kept
            .claim_spare(&plugin.spare, &self.executor.guests())
        else {
            return;
        };
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        handle.spawn(async move {
            let maker = runtime.clone();
            let _ = runtime
                .run(false, move |cancel| async move {
                    let _filling = filling;
                    let code = plugin.code.load_full();
                    let mut store =
                        maker.new_store(&plugin, &code, &grants, None, cancel.clone())?;
                    let made = tokio::time::timeout(
                        grants.limits.timeout,
                        Self::fresh_instance(&plugin, &code, &grants, &mut store),
                    )
                    .await;
                    let Ok(Ok(instance)) = made else {
                        return Ok(());
                    };
                    if plugin.spare.warms() {
                        // The listing has a budget and a deadline of its own.
                        let _ = store.set_fuel(grants.fuel_budget());
                        Self::set_deadline(&mut store, grants.limits.timeout, cancel.clone());
                        let listed = tokio::time::timeout(
                            grants.limits.timeout,
                            code.pre.list_tools(&mut store, &instance),
                        )
                        .await;
                        match listed {
                            Ok(Ok(_)) => {}
                            // The server stops: nothing to learn.
                            _ if cancel.is_set() => return Ok(()),
                            failed => {
                                let error = match failed {
                                    Ok(Err(error)) => format!("{error:#}"),
                                    _ => "it ran past the deadline".to_string(),
                                };
                                tracing::warn!(
                                    plugin = %plugin.name,
                                    %error,
                                    "warming a spare instance failed: its spares are only instantiated from now on"
                                );
                                plugin.spare.stop_warming();
                                return Ok(());
                            }
                        }
                    }
                    // What making it printed is not the next call's output.
                    let sandbox = store.data_mut();
                    let _ = (sandbox.stdout.take(), sandbox.stderr.take());
                    plugin.spare.fill(room, store, instance, code, grants);
                    Ok(())
                })
                .await;
        });
    }

    /// Keeps the instance that described `plugin` as its spare, if the
    /// spares have room for it (`KeptInstances::claim_spare`); else it is
    /// torn down on a guest thread. What describing printed is not the
    /// next call's output.
    fn keep_as_spare(
        &self,
        plugin: &CompiledPlugin,
        filling: Filling,
        mut store: Store<Sandbox>,
        instance: Plugin,
        code: Arc<compiler::Code>,
        grants: Arc<Grants>,
    ) {
        let guests = self.executor.guests();
        let Some(room) = self.kept.claim_spare(&plugin.spare, &guests) else {
            guests.spawn_blocking(move || drop(store));
            return;
        };
        let sandbox = store.data_mut();
        let _ = (sandbox.stdout.take(), sandbox.stderr.take());
        plugin.spare.fill(room, store, instance, code, grants);
        drop(filling);
    }

    /// A store for one call: fresh sandbox, memory budget, fuel, and a
    /// deadline that is checked at every epoch tick, together with whether
    /// the caller is still waiting.
    pub(super) fn new_store(
        &self,
        plugin: &CompiledPlugin,
        code: &compiler::Code,
        grants: &Arc<Grants>,
        client: CallClient,
        cancel: Cancel,
    ) -> Result<Store<Sandbox>, CallFailure> {
        self.new_store_until(plugin, code, grants, grants.limits.timeout, client, cancel)
    }

    /// As [`Self::new_store`], for a call with its own deadline.
    fn new_store_until(
        &self,
        plugin: &CompiledPlugin,
        code: &compiler::Code,
        grants: &Arc<Grants>,
        timeout: Duration,
        client: CallClient,
        cancel: Cancel,
    ) -> Result<Store<Sandbox>, CallFailure> {
        let mut sandbox = Sandbox::new(plugin.name.clone(), grants.clone(), client)
            .map_err(|e| CallFailure::Host(format!("a granted directory cannot be opened: {e}")))?;
        sandbox.outbound.start_call(timeout);
        let mut store = Store::new(code.pre.instance_pre().engine(), sandbox);
        store.limiter(|sandbox| &mut sandbox.limiter);
        let _ = store.set_fuel(grants.fuel_budget());
        // Yield every slice, so that a call started on its caller's thread
        // moves to a guest thread if it runs on (see `executor`).
        let _ = store.fuel_async_yield_interval(Some(executor::SLICE_FUEL));
        Self::set_deadline(&mut store, timeout, cancel);
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
        timeout: Duration,
        client: CallClient,
        cancel: Cancel,
    ) {
        let sandbox = store.data_mut();
        sandbox.client = client;
        sandbox.limiter.start_call();
        // Outbound HTTP's deadline and counts are the call's, not the
        // instance's (a spare, or one kept between calls, was made before).
        sandbox.outbound.start_call(timeout);
        let _ = store.set_fuel(grants.fuel_budget());
        Self::set_deadline(store, timeout, cancel);
    }

    /// Runs `ask` (0.2.0's `read-resource`, `get-prompt`, `complete`) in
    /// a fresh instance of `plugin` with its grants and limits, on the
    /// executor like `call-tool`; a component without the export asked for
    /// fails as the host's fault (the registry only routes to exports a
    /// plugin declared). Instances are never kept for these: they are rare
    /// next to tool calls.
    pub async fn ask(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        ask: Ask,
        client: CallClient,
    ) -> (Result<Answer, CallFailure>, Option<CallUsage>) {
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        let span = tracing::Span::current();
        let inline = plugin.inline;
        let ran = self
            .run(inline, move |cancel| {
                let job = async move {
                    let code = plugin.code.load_full();
                    let mut store = runtime.new_store(&plugin, &code, &grants, client, cancel)?;
                    let missing = |what: &str| {
                        wasmtime::Error::msg(format!("the plugin does not export {what}"))
                    };
                    let outcome = tokio::time::timeout(grants.limits.timeout, async {
                        let instance =
                            Self::fresh_instance(&plugin, &code, &grants, &mut store).await?;
                        Ok(match ask {
                            Ask::ReadResource { uri } => {
                                let resources = code
                                    .pre
                                    .resources(&mut store, &instance)?
                                    .ok_or_else(|| missing("resources"))?;
                                Answer::Contents(
                                    resources.call_read_resource(&mut store, &uri).await?,
                                )
                            }
                            Ask::GetPrompt { name, arguments } => {
                                let prompts = code
                                    .pre
                                    .prompts(&mut store, &instance)?
                                    .ok_or_else(|| missing("prompts"))?;
                                Answer::Prompt(
                                    prompts
                                        .call_get_prompt(&mut store, &name, &arguments)
                                        .await?,
                                )
                            }
                            Ask::Complete {
                                reference,
                                argument,
                                value,
                                context,
                            } => {
                                let completion = code
                                    .pre
                                    .completion(&mut store, &instance)?
                                    .ok_or_else(|| missing("completion"))?;
                                Answer::Completions(
                                    completion
                                        .call_complete(
                                            &mut store, &reference, &argument, &value, &context,
                                        )
                                        .await?,
                                )
                            }
                        })
                    })
                    .await;
                    let usage = usage_of(&store, &grants, &code);
                    let (settled, mut printed) = settle(
                        &plugin.name,
                        &grants,
                        grants.limits.timeout,
                        &mut store,
                        outcome,
                    );
                    printed.log();
                    Ok((settled, usage))
                };
                tracing::Instrument::instrument(job, span)
            })
            .await;
        match ran {
            Ok(((outcome, usage), cpu)) => (outcome, Some(CallUsage { cpu, ..usage })),
            Err(failure) => (Err(failure), None),
        }
    }
}
