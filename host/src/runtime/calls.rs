//! The call path inside the runtime: the listings and `call-tool` in an
//! instance (fresh, or kept by a policy that opts in: `warm.rs`), each
//! store made ready with its deadline, fuel and memory budget, run on the
//! executor, and wasmtime's outcome turned into the runtime's own types.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::compiler;
use super::executor::{self, Cancel, Refusal};
use super::exports::Plugin;
use super::failure::{root_cause, tail};
use super::sandbox::Sandbox;
use super::{
    Answer, Ask, CallClient, CallFailure, CallUsage, CompiledPlugin, Description, Grants,
    PluginError, PluginOutput, Runtime,
};

impl Runtime {
    /// Runs `list-tools`, and the listings of whichever of `resources` and
    /// `prompts` the component exports, in one fresh instance with no
    /// grants: describing itself needs nothing from outside. It runs on the
    /// executor like a call, under the same limits.
    pub(crate) async fn describe(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
    ) -> Result<Description, CallFailure> {
        let grants = Arc::new(self.no_grants());
        let (runtime, plugin) = (self.clone(), plugin.clone());
        let inline = plugin.inline;
        self.run(inline, move |cancel| async move {
            let code = plugin.code.load_full();
            let mut store = runtime.new_store(&plugin, &code, &grants, None, cancel)?;
            let outcome = tokio::time::timeout(grants.limits.timeout, async {
                let instance = code.pre.instantiate_async(&mut store).await?;
                let tools = instance
                    .toolhost_plugin_tools()
                    .call_list_tools(&mut store)
                    .await?;
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
                Ok(description)
            })
            .await;
            settle(&plugin, &grants, &mut store, outcome)
        })
        .await
        .map(|(description, _cpu)| description)
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
                    let usage = usage_of(&store, &grants, &code);
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
    ) -> (Result<Answer, CallFailure>, Option<CallUsage>) {
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        let span = tracing::Span::current();
        let inline = plugin.inline;
        let ran = self
            .run(inline, move |cancel| {
                let job = async move {
                    let code = plugin.code.load_full();
                    let mut store = runtime.new_store(&plugin, &code, &grants, None, cancel)?;
                    let missing = |what: &str| {
                        wasmtime::Error::msg(format!("the plugin does not export {what}"))
                    };
                    let outcome = tokio::time::timeout(grants.limits.timeout, async {
                        let instance = code.pre.instantiate_async(&mut store).await?;
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
                    Ok((settle(&plugin, &grants, &mut store, outcome), usage))
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

/// What a call used in `store`, but its CPU time (the executor measures
/// that).
pub(super) fn usage_of(
    store: &Store<Sandbox>,
    grants: &Grants,
    code: &compiler::Code,
) -> CallUsage {
    CallUsage {
        cpu: Duration::ZERO,
        fuel: grants
            .fuel_budget()
            .saturating_sub(store.get_fuel().unwrap_or(0)),
        peak_memory_bytes: store.data().limiter.peak_bytes as u64,
        tier: code.tier,
    }
}

/// Logs what the plugin printed and turns wasmtime's outcome into ours.
pub(super) fn settle<T>(
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
