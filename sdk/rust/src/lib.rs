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
//! The modules, one concern each: [`tool`] (declaring tools and the
//! dispatch), [`schema`] (deriving schemas), [`content`] (results and
//! errors), [`client`] (what a tool may ask of the MCP client) and
//! [`config`] (the settings a policy grants).

// Lets the bindings name this crate by its public path from the inside too,
// so that the code `export!` expands into a plugin resolves the same way.
extern crate self as toolhost_plugin;

pub mod client;
pub mod config;
pub mod content;
pub mod schema;
pub mod tool;

pub use content::{Content, ResourceLink, ToolError};
pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json::{self, Value, json};
pub use tool::{IntoOutput, NoArguments, Structured, Tool, Tools};

/// Everything a plugin usually names, in one `use`.
pub mod prelude {
    pub use crate::client::{self, LogLevel};
    pub use crate::config;
    pub use crate::content::{Content, ResourceLink, ToolError};
    pub use crate::tool::{NoArguments, Structured, Tool, Tools};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// The guest bindings of the WIT contract (`wit/plugin.wit`, embedded in
/// this crate). Plugins do not need them: the SDK's types cover every
/// record; they are public for the `export!` macro.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "::toolhost_plugin::bindings",
        runtime_path: "::toolhost_plugin::__private::wit_bindgen::rt",
    });
}

/// What the `export!` macro expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::toolhost::plugin::tools::{
        Guest, Output as WitOutput, Tool as WitTool, ToolError as WitToolError,
    };
    pub use crate::tool::{call, list};
    pub use wit_bindgen;
}

/// Exports the plugin: `export!(tools)` where `tools` is a function that
/// returns the plugin's [`Tools`]. It is called once when the host loads
/// the file (to list the tools) and once per call (every call runs in a
/// fresh instance, so nothing is kept between calls anyway).
#[macro_export]
macro_rules! export {
    ($tools:path) => {
        #[doc(hidden)]
        struct __ToolhostPlugin;

        impl $crate::__private::Guest for __ToolhostPlugin {
            fn list_tools() -> ::std::vec::Vec<$crate::__private::WitTool> {
                $crate::__private::list(&$tools())
            }

            fn call_tool(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<$crate::__private::WitOutput, $crate::__private::WitToolError>
            {
                $crate::__private::call(&$tools(), &name, &arguments)
            }
        }

        $crate::bindings::__export_plugin!(__ToolhostPlugin with_types_in $crate::bindings);
    };
}
