//! 0.2.0's optional exports on the call path: `read-resource`,
//! `get-prompt` and `complete`, each in a fresh instance with the plugin's
//! grants and limits, run on the executor like `call-tool` (`calls.rs`,
//! whose store, settling and accounting they share). Instances are never
//! kept for these: they are rare next to tool calls.

use super::calls::{settle, usage_of};
use super::{
    CallFailure, CallUsage, CompiledPlugin, CompletionRef, Completions, Grants, PluginError,
    PromptResult, ResourceContents, Runtime,
};
use std::sync::Arc;

/// One request to a plugin's optional exports.
#[derive(Debug, Clone)]
pub enum Ask {
    ReadResource {
        uri: String,
    },
    GetPrompt {
        name: String,
        arguments: Vec<(String, String)>,
    },
    Complete {
        reference: CompletionRef,
        argument: String,
        value: String,
        context: Vec<(String, String)>,
    },
}

/// The plugin's answer to an [`Ask`], of the same kind.
#[derive(Debug)]
pub enum Answer {
    Contents(Result<Vec<ResourceContents>, PluginError>),
    Prompt(Result<PromptResult, PluginError>),
    Completions(Completions),
}

impl Runtime {
    /// Runs `ask` in a fresh instance of `plugin` with its grants; a
    /// component without the export asked for fails as the host's fault
    /// (the registry only routes to exports a plugin declared).
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
