//! A component's exports, each found on its own: `tools` (0.1.0's,
//! required) and any of 0.2.0's `resources`, `prompts`, `completion`,
//! `views` and `tool-details`.
//! The generated all-or-nothing world type (`bindings.rs`) is not used:
//! [`PluginPre`] looks each export up when a component is linked, and
//! [`Plugin`] is one instance of it.

use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::AsContextMut;
use wasmtime::component::{ComponentExportIndex, Func, Instance, InstancePre, TypedFunc};

use super::bindings::{SourceRuntime, completion, prompts, resources, tool_details, tools, views};
use super::sandbox::Sandbox;
use super::snapshot::image::StateFuncs;

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
    /// `call-tool` within `tools`, looked up once.
    call_tool: ComponentExportIndex,
    /// Whether an instance has had `tools`' types checked. They are the
    /// component's, the same in every instance: checked once, a call only
    /// looks its function up.
    checked: AtomicBool,
    resources: Option<resources::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
    completion: Option<completion::GuestIndices>,
    views: Option<views::GuestIndices>,
    tool_details: Option<tool_details::GuestIndices>,
    /// A language runtime's state functions (`snapshot/`), if it has them.
    state: Option<StateFuncs>,
}

/// One instance of a plugin, in one store.
pub(crate) struct Plugin {
    instance: Instance,
    call_tool: Func,
}

impl PluginPre {
    /// Finds the exports: `tools` must be there (the error says what is
    /// wrong with it), the others may.
    pub(crate) fn new(pre: InstancePre<Sandbox>) -> wasmtime::Result<PluginPre> {
        let tools = tools::GuestIndices::new(&pre)?;
        let component = pre.component();
        let call_tool = component
            .get_export_index(None, "toolhost:plugin/tools@0.1.0")
            .and_then(|tools| component.get_export_index(Some(&tools), "call-tool"))
            .ok_or_else(no_call_tool)?;
        Ok(PluginPre {
            call_tool,
            checked: AtomicBool::new(false),
            resources: resources::GuestIndices::new(&pre).ok(),
            prompts: prompts::GuestIndices::new(&pre).ok(),
            completion: completion::GuestIndices::new(&pre).ok(),
            views: views::GuestIndices::new(&pre).ok(),
            tool_details: tool_details::GuestIndices::new(&pre).ok(),
            state: StateFuncs::find(component),
            tools,
            pre,
        })
    }

    pub(crate) fn instance_pre(&self) -> &InstancePre<Sandbox> {
        &self.pre
    }

    /// The state functions of a language runtime rewritten for images.
    pub(crate) fn state(&self) -> Option<&StateFuncs> {
        self.state.as_ref()
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
        store: impl AsContextMut<Data = Sandbox>,
    ) -> wasmtime::Result<Plugin> {
        self.instantiate_from(&self.pre, store).await
    }

    /// An instance of `pre`: this code, or this code with a source's
    /// image mapped into its memory (`snapshot/image.rs`), whose exports
    /// are this code's.
    pub(crate) async fn instantiate_from(
        &self,
        pre: &InstancePre<Sandbox>,
        mut store: impl AsContextMut<Data = Sandbox>,
    ) -> wasmtime::Result<Plugin> {
        let instance = pre.instantiate_async(&mut store).await?;
        let call_tool = if self.checked.load(Ordering::Acquire) {
            instance.get_func(&mut store, self.call_tool)
        } else {
            let tools = self.tools.load(&mut store, &instance)?;
            self.checked.store(true, Ordering::Release);
            Some(*tools.func_call_tool().func())
        };
        let call_tool = call_tool.ok_or_else(no_call_tool)?;
        Ok(Plugin {
            instance,
            call_tool,
        })
    }

    /// `list-tools` of `plugin`: its types checked as the bindings check
    /// them (once per load, off the call path).
    pub(crate) async fn list_tools(
        &self,
        mut store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Vec<tools::Tool>> {
        let tools = self.tools.load(&mut store, &plugin.instance)?;
        tools.call_list_tools(&mut store).await
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

    /// The instance's `views` export, if the component has one.
    pub(crate) fn views(
        &self,
        store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Option<views::Guest>> {
        self.views
            .as_ref()
            .map(|indices| indices.load(store, &plugin.instance))
            .transpose()
    }

    /// The instance's `tool-details` export, if the component has one.
    pub(crate) fn tool_details(
        &self,
        store: impl AsContextMut<Data = Sandbox>,
        plugin: &Plugin,
    ) -> wasmtime::Result<Option<tool_details::Guest>> {
        self.tool_details
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
    /// The component instance.
    pub(crate) fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Calls `call-tool` (`tool` with its `arguments` as JSON text).
    pub(crate) async fn call_tool(
        &self,
        mut store: impl AsContextMut<Data = Sandbox>,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<tools::Output, tools::ToolError>> {
        // SAFETY: `call_tool` is this component's `call-tool`, whose types
        // `PluginPre::instantiate_async` checked (`GuestIndices::load`) on
        // the first instance of this component; every instance of it has
        // the same types.
        let callee: TypedFunc<(&str, &str), (Result<tools::Output, tools::ToolError>,)> =
            unsafe { TypedFunc::new_unchecked(self.call_tool) };
        let (answer,) = callee
            .call_async(store.as_context_mut(), (tool, arguments))
            .await?;
        Ok(answer)
    }
}

/// A component whose `tools` has no `call-tool`.
fn no_call_tool() -> wasmtime::Error {
    wasmtime::format_err!("no export `call-tool` in `tools`")
}

/// Adds the contract's imports (`client`, `config`, and the runtimes'
/// `source`) to a linker.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<Sandbox>,
) -> wasmtime::Result<()> {
    SourceRuntime::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |sandbox| sandbox)
}
