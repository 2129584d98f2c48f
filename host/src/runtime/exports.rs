//! A component's exports, each found on its own: `tools` (0.1.0's,
//! required) and any of 0.2.0's `resources`, `prompts` and `completion`.
//! The generated all-or-nothing world type (`bindings.rs`) is not used:
//! [`PluginPre`] looks each export up when a component is linked, and
//! [`Plugin`] is one instance of it.

use wasmtime::AsContextMut;
use wasmtime::component::{Instance, InstancePre};

use super::bindings::{Full, completion, prompts, resources, tools};
use super::sandbox::Sandbox;

/// Which optional exports a component has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Provides {
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
    pub(crate) completion: bool,
}

/// A component linked against the host's imports, with its exports found.
pub(crate) struct PluginPre {
    pre: InstancePre<Sandbox>,
    tools: tools::GuestIndices,
    resources: Option<resources::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
    completion: Option<completion::GuestIndices>,
}

/// One instance of a plugin, in one store.
pub(crate) struct Plugin {
    instance: Instance,
    tools: tools::Guest,
}

impl PluginPre {
    /// Finds the exports: `tools` must be there (the error says what is
    /// wrong with it), the others may.
    pub(crate) fn new(pre: InstancePre<Sandbox>) -> wasmtime::Result<PluginPre> {
        let tools = tools::GuestIndices::new(&pre)?;
        Ok(PluginPre {
            resources: resources::GuestIndices::new(&pre).ok(),
            prompts: prompts::GuestIndices::new(&pre).ok(),
            completion: completion::GuestIndices::new(&pre).ok(),
            tools,
            pre,
        })
    }

    pub(crate) fn instance_pre(&self) -> &InstancePre<Sandbox> {
        &self.pre
    }

    pub(crate) fn provides(&self) -> Provides {
        Provides {
            resources: self.resources.is_some(),
            prompts: self.prompts.is_some(),
            completion: self.completion.is_some(),
        }
    }

    pub(crate) async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = Sandbox>,
    ) -> wasmtime::Result<Plugin> {
        let instance = self.pre.instantiate_async(&mut store).await?;
        let tools = self.tools.load(&mut store, &instance)?;
        Ok(Plugin { instance, tools })
    }

    /// The instance's `resources` export, if the component has one.
    pub(crate) fn resources(
        &self,
        store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Option<resources::Guest>> {
        self.resources
            .as_ref()
            .map(|indices| indices.load(store, &plugin.instance))
            .transpose()
    }

    /// The instance's `prompts` export, if the component has one.
    pub(crate) fn prompts(
        &self,
        store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Option<prompts::Guest>> {
        self.prompts
            .as_ref()
            .map(|indices| indices.load(store, &plugin.instance))
            .transpose()
    }

    /// The instance's `completion` export, if the component has one.
    pub(crate) fn completion(
        &self,
        store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Option<completion::Guest>> {
        self.completion
            .as_ref()
            .map(|indices| indices.load(store, &plugin.instance))
            .transpose()
    }
}

impl Plugin {
    pub(crate) fn toolhost_plugin_tools(&self) -> &tools::Guest {
        &self.tools
    }
}

/// Adds the contract's imports (`client`, `config`) to a linker.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<Sandbox>,
) -> wasmtime::Result<()> {
    Full::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |sandbox| sandbox)
}
