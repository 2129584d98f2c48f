//! What loading a component yields: a [`CompiledPlugin`] (its code,
//! baseline then optimised, ready to instantiate per call) and its
//! [`Description`] (what it declares).

use std::sync::Arc;

use super::bindings::exports::toolhost::plugin0_1_0::tools::Tool as DeclaredTool;
use super::bindings::prompts::Prompt as DeclaredPrompt;
use super::bindings::resources::{
    Resource as DeclaredResource, ResourceTemplate as DeclaredTemplate,
};
use super::bindings::tool_details::Detail as DeclaredDetail;
use super::bindings::views::View as DeclaredView;
use super::compiler::{Code, CodeCell, Pending, Tier};
use super::exports::Provides;
use super::snapshot::image::ImageSlot;
use super::warm::{Shelf, Spare};

/// Everything a plugin declares when it is loaded.
#[derive(Debug, Default)]
pub struct Description {
    pub tools: Vec<DeclaredTool>,
    pub resources: Vec<DeclaredResource>,
    pub templates: Vec<DeclaredTemplate>,
    pub prompts: Vec<DeclaredPrompt>,
    pub views: Vec<DeclaredView>,
    /// What its tools say beyond their `tool` record.
    pub details: Vec<DeclaredDetail>,
    /// Which optional exports the component has.
    pub(crate) provides: Provides,
}

/// A component compiled and linked, ready to be instantiated per call.
/// Cloning it is one reference count: every call clones it (its guest
/// code may run on another thread), and each count of a value that two
/// threads' calls share moves its cache line between their cores.
#[derive(Clone)]
pub struct CompiledPlugin(Arc<PluginParts>);

/// What a [`CompiledPlugin`] holds (its fields are read through it).
pub struct PluginParts {
    /// The plugin's name, to tag its log output.
    pub(super) name: Arc<str>,
    /// The current code: baseline, then optimised (see `compiler.rs`).
    pub(super) code: CodeCell,
    /// Set while baseline code waits for the first call to queue it for
    /// optimising.
    pub(super) pending: Option<Arc<Pending>>,
    /// Whether the compiled code came from the on-disk cache.
    pub(crate) from_cache: bool,
    /// Whether a call's first slice may run on its caller's thread: small
    /// components (see `executor.rs`); a large one's call may only when it
    /// takes a spare.
    pub(super) inline: bool,
    /// Instances kept for the next call, if the policy opts in (`warm.rs`).
    pub(super) shelf: Shelf,
    /// A large plugin's instance made ahead of its next call (`warm.rs`).
    pub(super) spare: Spare,
    /// A source's image: its runtime's state after its module ran
    /// (`snapshot/`), laid over each fresh instance.
    pub(super) image: ImageSlot,
}

impl CompiledPlugin {
    pub(super) fn new(parts: PluginParts) -> CompiledPlugin {
        CompiledPlugin(Arc::new(parts))
    }

    /// Which compiler made the code that serves now.
    pub(crate) fn tier(&self) -> Tier {
        self.code.load().tier
    }

    /// Whether `other` serves on the same code (the same component's bytes,
    /// compiled once: `Runtime::compile`).
    pub(crate) fn shares_code_with(&self, other: &CompiledPlugin) -> bool {
        Arc::ptr_eq(&self.code, &other.code)
    }

    /// Lets go of the pages of `code` (this plugin's) that describing it
    /// touched, unless another plugin serves on the same code: a language
    /// runtime's code serves every source of that language, whose calls
    /// would each fault those pages back, and whose threads each take the
    /// TLB flush of letting them go.
    pub(super) fn release_resident(&self, code: &Code) {
        // Each plugin on this code holds the cell once; the optimiser
        // holds it weakly.
        if Arc::strong_count(&self.code) == 1 {
            code.release_resident();
        }
    }
}

impl Drop for PluginParts {
    /// A version dropped (never served: held for approval, refused after
    /// it was described) lets its spare go now, not when the spares' list
    /// next drops the places of plugins that are gone (`warm.rs`).
    fn drop(&mut self) {
        self.spare.clear();
    }
}

impl std::ops::Deref for CompiledPlugin {
    type Target = PluginParts;

    fn deref(&self) -> &PluginParts {
        &self.0
    }
}
