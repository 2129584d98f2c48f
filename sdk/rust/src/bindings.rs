//! The guest bindings of the WIT contract (`wit/plugin.wit`, embedded in
//! this crate): the `apps` world, with the 0.1.0 interfaces (tools,
//! client, config) that are another package version in the same file.
//! Plugins do not need them: the SDK's types cover every record; they are
//! public for the `export!` macro.

wit_bindgen::generate!({
    world: "apps",
    path: "wit",
    // The 0.1.0 interfaces are another package version in the same file:
    // generate them here too.
    generate_all,
    pub_export_macro: true,
    export_macro_name: "__export_plugin",
    default_bindings_module: "::toolhost_plugin::bindings",
    runtime_path: "::toolhost_plugin::__private::wit_bindgen::rt",
});
