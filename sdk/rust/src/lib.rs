//! Write [toolhost](https://github.com/toolhost/toolhost) plugins as typed
//! Rust functions.
//!
//! A tool is a function from an argument type to a result type. Both derive
//! `serde` and [`JsonSchema`]; the SDK derives the input and output JSON
//! Schemas (draft 2020-12, shaped so that the major LLM tool-calling APIs
//! accept them), generates `list-tools` and the dispatch by name, and turns
//! the result into the MCP tool result the host serves.
//!
//! ```no_run
//! use toolhost_plugin::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Args {
//!     /// The text to count words in
//!     text: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Counts {
//!     words: usize,
//!     chars: usize,
//! }
//!
//! fn word_count(args: Args) -> Result<Counts, ToolError> {
//!     Ok(Counts {
//!         words: args.text.split_whitespace().count(),
//!         chars: args.text.chars().count(),
//!     })
//! }
//!
//! fn tools() -> Tools {
//!     Tools::new().tool(Tool::new("word_count", "Counts words and characters", word_count))
//! }
//!
//! toolhost_plugin::export!(tools);
//! ```
//!
//! The plugin's `Cargo.toml` needs `crate-type = ["cdylib"]` and depends
//! on `serde` (feature `derive`) and `schemars` 1.x directly: their derives
//! name those crates. Build it with `cargo build --release --target
//! wasm32-wasip2` and drop the `.wasm` file into the host's plugin folder.
//!
//! What the result type decides:
//! - a type whose schema is an object (a struct, a map) becomes
//!   `structuredContent`, with its derived schema as the tool's output
//!   schema; the host adds the text rendering;
//! - a `String` (or any other non-object value) becomes one text block;
//! - [`Content`] is any mix of text, images, audio and resources, optionally
//!   with structured data, for tools that want to say exactly what they send.
//!
//! Resources, templates and prompts are typed functions too, added to the
//! same [`Tools`] and exported with `export!(tools, catalog)`: see
//! [`catalog`].
//!
//! The modules, one concern each: [`tool`] (declaring tools and the
//! dispatch), [`catalog`] (resources, templates, prompts, completion),
//! [`views`] (views, and a tool's view, visibility and task), [`schema`] (deriving schemas), [`content`] (results and
//! errors), [`client`] (what a tool may ask of the MCP client) and
//! [`config`] (the settings a policy grants).

// Lets the bindings name this crate by its public path from the inside too,
// so that the code `export!` expands into a plugin resolves the same way.
extern crate self as toolhost_plugin;

pub mod catalog;
pub mod client;
pub mod config;
pub mod content;
pub mod schema;
pub mod tool;
pub mod views;

pub use catalog::{Body, Messages, Prompt, Resource, Template};
pub use content::{Content, ResourceLink, ToolError};
pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json::{self, Value, json};
pub use tool::{IntoOutput, NoArguments, Structured, Tool, Tools};
pub use views::{Audience, TaskSupport, View};

/// Everything a plugin usually names, in one `use`.
pub mod prelude {
    pub use crate::catalog::{Body, Messages, Prompt, Resource, Template};
    pub use crate::client::{self, LogLevel};
    pub use crate::config;
    pub use crate::content::{Content, ResourceLink, ToolError};
    pub use crate::tool::{NoArguments, Structured, Tool, Tools};
    pub use crate::views::{Audience, TaskSupport, View};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// The guest bindings of the WIT contract (`wit/plugin.wit`, embedded in
/// this crate). Plugins do not need them: the SDK's types cover every
/// record; they are public for the `export!` macro.
#[doc(hidden)]
pub mod bindings;

/// The contract's `plugin` world (tools only), generated for the world's
/// description alone (see the file).
#[doc(hidden)]
#[allow(dead_code, unused_imports, unused_macros)]
mod tools_world;

/// What the `export!` macro expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::toolhost::plugin0_1_0::tools::{
        Guest, Output as WitOutput, Tool as WitTool, ToolError as WitToolError,
    };
    pub use crate::bindings::exports::toolhost::plugin0_2_0::completion::{
        Completions as WitCompletions, Guest as CompletionGuest, Reference as WitReference,
    };
    pub use crate::bindings::exports::toolhost::plugin0_2_0::prompts::{
        Guest as PromptsGuest, Prompt as WitPrompt, PromptResult as WitPromptResult,
    };
    pub use crate::bindings::exports::toolhost::plugin0_2_0::resources::{
        Contents as WitContents, Guest as ResourcesGuest, Resource as WitResource,
        ResourceTemplate as WitResourceTemplate,
    };
    pub use crate::bindings::exports::toolhost::plugin0_2_0::tool_details::{
        Detail as WitDetail, Guest as ToolDetailsGuest,
    };
    pub use crate::bindings::exports::toolhost::plugin0_2_0::views::{
        Guest as ViewsGuest, View as WitView,
    };
    pub use crate::tool::{call, list};

    /// `list-tools`, for `export!`. A plugin whose resources or prompts
    /// are not exported (`export!(tools)` without `catalog`) fails to load
    /// with the message saying how to export them, rather than lose them
    /// without a word.
    pub fn list_exported(tools: &crate::Tools, catalog: bool, function: &str) -> Vec<WitTool> {
        if !catalog && (!tools.catalog.is_empty() || tools.has_details()) {
            panic!("{}", crate::catalog::not_exported(function));
        }
        list(tools)
    }

    /// `list-resources`, for `export!`.
    pub fn list_resources(tools: &crate::Tools) -> Vec<WitResource> {
        tools.catalog.list_resources()
    }

    /// `list-templates`, for `export!`.
    pub fn list_templates(tools: &crate::Tools) -> Vec<WitResourceTemplate> {
        tools.catalog.list_templates()
    }

    /// `read-resource`, for `export!`.
    pub fn read_resource(
        tools: &crate::Tools,
        uri: &str,
    ) -> Result<Vec<WitContents>, WitToolError> {
        tools.catalog.read(uri).map_err(crate::ToolError::into_wit)
    }

    /// `list-prompts`, for `export!`.
    pub fn list_prompts(tools: &crate::Tools) -> Vec<WitPrompt> {
        tools.catalog.list_prompts()
    }

    /// `get-prompt`, for `export!`.
    pub fn get_prompt(
        tools: &crate::Tools,
        name: &str,
        arguments: Vec<(String, String)>,
    ) -> Result<WitPromptResult, WitToolError> {
        tools
            .catalog
            .get(name, arguments)
            .map_err(crate::ToolError::into_wit)
    }

    /// `list-views`, for `export!`.
    pub fn list_views(tools: &crate::Tools) -> Vec<WitView> {
        tools.list_views()
    }

    /// `list-tool-details`, for `export!`.
    pub fn list_tool_details(tools: &crate::Tools) -> Vec<WitDetail> {
        tools.list_details()
    }

    /// `complete`, for `export!`.
    pub fn complete(
        tools: &crate::Tools,
        reference: &WitReference,
        argument: &str,
        value: &str,
    ) -> WitCompletions {
        tools.catalog.complete(reference, argument, value)
    }
    pub use wit_bindgen;
}

/// Exports the plugin: `export!(tools)` where `tools` is a function that
/// returns the plugin's [`Tools`]. It is called once when the host loads
/// the file (to list the tools) and once per call (every call runs in a
/// fresh instance, so nothing is kept between calls anyway).
///
/// A plugin with resources, templates, prompts or views (see [`catalog`]
/// and [`views`]), or a tool with a view, a visibility or a task, says
/// so: `export!(tools, catalog)` exports those too, and completion. The
/// component then has every export of the contract's `apps` world, which
/// costs each call a little more (wasmtime makes a reference to each
/// exported function, and finds its post-return, at every instantiation),
/// so a plugin of tools only exports `tools` alone. A plugin whose
/// [`Tools`] has resources or prompts but that is exported with
/// `export!(tools)` fails to load, and the load error says to add
/// `catalog`.
#[macro_export]
macro_rules! export {
    ($tools:path) => {
        $crate::__toolhost_guest!($tools, false);
        $crate::bindings::exports::toolhost::plugin0_1_0::tools::__export_toolhost_plugin_tools_0_1_0_cabi!(
            __ToolhostPlugin with_types_in $crate::bindings::exports::toolhost::plugin0_1_0::tools
        );
    };
    ($tools:path, catalog) => {
        $crate::__toolhost_guest!($tools, true);

        impl $crate::__private::ResourcesGuest for __ToolhostPlugin {
            fn list_resources() -> ::std::vec::Vec<$crate::__private::WitResource> {
                $crate::__private::list_resources(&$tools())
            }

            fn list_templates() -> ::std::vec::Vec<$crate::__private::WitResourceTemplate> {
                $crate::__private::list_templates(&$tools())
            }

            fn read_resource(
                uri: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::__private::WitContents>,
                $crate::__private::WitToolError,
            > {
                $crate::__private::read_resource(&$tools(), &uri)
            }
        }

        impl $crate::__private::PromptsGuest for __ToolhostPlugin {
            fn list_prompts() -> ::std::vec::Vec<$crate::__private::WitPrompt> {
                $crate::__private::list_prompts(&$tools())
            }

            fn get_prompt(
                name: ::std::string::String,
                arguments: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<$crate::__private::WitPromptResult, $crate::__private::WitToolError>
            {
                $crate::__private::get_prompt(&$tools(), &name, arguments)
            }
        }

        impl $crate::__private::ViewsGuest for __ToolhostPlugin {
            fn list_views() -> ::std::vec::Vec<$crate::__private::WitView> {
                $crate::__private::list_views(&$tools())
            }
        }

        impl $crate::__private::ToolDetailsGuest for __ToolhostPlugin {
            fn list_tool_details() -> ::std::vec::Vec<$crate::__private::WitDetail> {
                $crate::__private::list_tool_details(&$tools())
            }
        }

        impl $crate::__private::CompletionGuest for __ToolhostPlugin {
            fn complete(
                reference: $crate::__private::WitReference,
                argument: ::std::string::String,
                value: ::std::string::String,
                _context: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> $crate::__private::WitCompletions {
                $crate::__private::complete(&$tools(), &reference, &argument, &value)
            }
        }

        $crate::bindings::__export_plugin!(__ToolhostPlugin with_types_in $crate::bindings);
    };
}

/// The `tools` export every plugin has, for `export!`: `catalog` says
/// whether the resources and prompts are exported beside it.
#[doc(hidden)]
#[macro_export]
macro_rules! __toolhost_guest {
    ($tools:path, $catalog:literal) => {
        #[doc(hidden)]
        struct __ToolhostPlugin;

        impl $crate::__private::Guest for __ToolhostPlugin {
            fn list_tools() -> ::std::vec::Vec<$crate::__private::WitTool> {
                $crate::__private::list_exported(&$tools(), $catalog, ::core::stringify!($tools))
            }

            fn call_tool(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<$crate::__private::WitOutput, $crate::__private::WitToolError>
            {
                $crate::__private::call(&$tools(), &name, &arguments)
            }
        }
    };
}
