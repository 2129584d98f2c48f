//! The contract's `plugin` world (tools only), generated for one thing:
//! the description of that world it puts in every plugin, which is what
//! lets `export!(tools)` export `tools` alone. `bindings` describes the
//! `full` world's exports only inside its `export!`, which a plugin of
//! tools only does not expand; a component pays for each export at every
//! instantiation. Its types are `bindings`' twins and unused. So a
//! component that links this crate exports `tools`, which a plugin does
//! anyway.

wit_bindgen::generate!({
    world: "plugin",
    path: "wit",
    generate_all,
    runtime_path: "::toolhost_plugin::__private::wit_bindgen::rt",
    // Its own section name: a plugin that also binds the `plugin` world
    // itself gets a section of its own, not one of this SDK's bytes
    // concatenated with its own.
    type_section_suffix: "-toolhost-plugin-sdk",
});
