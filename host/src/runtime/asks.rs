//! What one may ask of 0.2.0's optional exports (`read-resource`,
//! `get-prompt`, `complete`) and what they answer, as plain data. They run
//! on the call path beside `call-tool` (`engine.rs`, `Runtime::ask`).

use super::bindings::completion::{Completions, Reference as CompletionRef};
use super::bindings::prompts::PromptResult;
use super::bindings::resources::Contents as ResourceContents;
use super::bindings::tools::ToolError as PluginError;

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
