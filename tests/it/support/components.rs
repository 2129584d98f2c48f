//! Hostile components that no Rust source can express, built at test time
//! from WebAssembly text and the plugin WIT: a small plugin whose core module
//! is hand-written (so it imports nothing), wrapped in an outer component
//! that also instantiates many extra core instances, each with a memory that
//! its start function fills. They show what the host does with components
//! whose shape, not whose code, is the attack.
//!
//! The inner plugin lists two tools: `ok` answers the text "ok", `spin`
//! loops until its deadline. A third shape is simply large: the plugin
//! beside a module of many functions, slow to compile.

use std::path::Path;

use wasm_encoder::{
    Alias, ComponentAliasSection, ComponentExportKind, ComponentExportSection,
    ComponentInstanceSection, ComponentSectionId, InstanceSection, RawSection,
};

/// Little-endian bytes of `value`, as a WAT data string.
fn le(value: u32) -> String {
    value
        .to_le_bytes()
        .iter()
        .map(|b| format!("\\{b:02x}"))
        .collect()
}

/// The inner plugin's core module. Layouts follow the canonical ABI for
/// `wit/plugin.wit`: a `tool` record is 60 bytes, a `content-block` 56, a
/// `result<output, tool-error>` 32.
fn inner_core_module(description: &str) -> String {
    // Strings.
    const OK: u32 = 100; // "ok", 2
    const SPIN: u32 = 110; // "spin", 4
    const DESCRIPTION: u32 = 3000; // the tools' description, up to 1000 bytes
    assert!(description.len() <= 1000);
    let description_len = description.len() as u32;
    let description_data: String = description.bytes().map(|b| format!("\\{b:02x}")).collect();
    const SCHEMA: u32 = 140; // {"type":"object"}, 17
    // list-tools answer: (ptr, len) at 1000, two tool records at 1008.
    const LIST: u32 = 1000;
    const TOOLS: u32 = 1008;
    // call-tool answer: the result at 2000, one content block at 2040.
    const RESULT: u32 = 2000;
    const BLOCK: u32 = 2040;
    let tool = |at: u32, name: u32, name_len: u32| {
        format!(
            "(data (i32.const {at}) \"{}{}\")\n(data (i32.const {}) \"{}{}{}{}\")",
            le(name),
            le(name_len),
            at + 20,
            le(DESCRIPTION),
            le(description_len),
            le(SCHEMA),
            le(17)
        )
    };
    format!(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
      (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $ptr) (local.get 3)))
    (block $fits
      (br_if $fits (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
      (br_if $fits (i32.ne (memory.grow (i32.add (i32.const 1)
        (i32.div_u (global.get $heap) (i32.const 65536)))) (i32.const -1)))
      unreachable)
    (local.get $ptr))
  (func (export "toolhost:plugin/tools@0.1.0#list-tools") (result i32)
    (i32.const {LIST}))
  (func (export "toolhost:plugin/tools@0.1.0#call-tool")
    (param $name i32) (param $name_len i32) (param i32 i32) (result i32)
    (if (i32.eq (i32.load8_u (local.get $name)) (i32.const 115))
      (then (loop $forever (br $forever))))
    (i32.const {RESULT}))
  (data (i32.const {OK}) "ok")
  (data (i32.const {SPIN}) "spin")
  (data (i32.const {DESCRIPTION}) "{description_data}")
  (data (i32.const {SCHEMA}) "{{\"type\":\"object\"}}")
  (data (i32.const {LIST}) "{}{}")
  {}
  {}
  (data (i32.const {}) "{}{}")
  (data (i32.const {BLOCK}) "\00\00\00\00{}{}")
)"#,
        le(TOOLS),
        le(2),
        tool(TOOLS, OK, 2),
        tool(TOOLS + 60, SPIN, 4),
        RESULT + 4,
        le(BLOCK),
        le(1),
        le(OK),
        le(2),
    )
}

/// The inner plugin as a component (it imports nothing).
fn inner_component() -> Vec<u8> {
    plugin_described("hostile")
}

/// The inner plugin alone, its two tools (`ok`, `spin`) described by
/// `description` (at most 1000 bytes): a plugin that returns hostile text.
pub fn plugin_described(description: &str) -> Vec<u8> {
    let mut module = wat::parse_str(inner_core_module(description)).expect("inner core module");
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_path(super::repo_root().join("wit"))
        .expect("parsing wit/");
    let world = resolve
        .select_world(&[package], Some("plugin"))
        .expect("world plugin");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("embedding the world");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("module")
        .validate(true)
        .encode()
        .expect("encoding the component")
}

/// The plugin, plus `instances` extra core instances each with a memory of
/// `pages` 64-KiB pages, filled with ones by its start function when `fill`
/// is set. They are instantiated with every instance of the plugin, that is,
/// on every call.
pub fn plugin_with_extra_instances(instances: u32, pages: u32, fill: bool) -> Vec<u8> {
    let start = if fill {
        format!(
            "(func $fill (memory.fill (i32.const 0) (i32.const 1) (i32.const {}))) (start $fill)",
            pages * 65536
        )
    } else {
        String::new()
    };
    let hazard = wat::parse_str(format!("(module (memory {pages}) {start})")).unwrap();
    plugin_beside(&hazard, instances)
}

/// The plugin, plus one instance of a module of `functions` functions of a
/// few hundred instructions each: a component that takes long to compile.
pub fn plugin_slow_to_compile(functions: u32) -> Vec<u8> {
    plugin_with_functions(functions, 150)
}

/// The plugin, plus one function of `steps` × 4 instructions: like the
/// interpreter loop of a componentize-py component, a function whose
/// compilation needs tens of MiB of the compiler's working memory.
pub fn plugin_with_a_huge_function(steps: u32) -> Vec<u8> {
    plugin_with_functions(1, steps)
}

fn plugin_with_functions(functions: u32, steps: u32) -> Vec<u8> {
    use wasm_encoder::{CodeSection, Function, FunctionSection, Instruction, TypeSection, ValType};
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    let mut declared = FunctionSection::new();
    let mut code = CodeSection::new();
    for index in 0..functions {
        declared.function(0);
        let mut body = Function::new([]);
        body.instruction(&Instruction::LocalGet(0));
        for step in 0..steps {
            body.instruction(&Instruction::I32Const((index ^ step) as i32));
            body.instruction(&Instruction::I32Add);
            body.instruction(&Instruction::I32Const(3 + step as i32));
            body.instruction(&Instruction::I32Mul);
        }
        body.instruction(&Instruction::End);
        code.function(&body);
    }
    let mut module = wasm_encoder::Module::new();
    module.section(&types).section(&declared).section(&code);
    plugin_beside(&module.finish(), 1)
}

/// The inner plugin in an outer component that also instantiates `hazard`
/// (a core module with no imports) `instances` times.
fn plugin_beside(hazard: &[u8], instances: u32) -> Vec<u8> {
    let inner = inner_component();

    let mut outer = wasm_encoder::Component::new();
    outer.section(&RawSection {
        id: ComponentSectionId::Component as u8,
        data: &inner,
    });
    outer.section(&RawSection {
        id: ComponentSectionId::CoreModule as u8,
        data: hazard,
    });
    let mut core_instances = InstanceSection::new();
    for _ in 0..instances {
        core_instances.instantiate(0, Vec::<(&str, wasm_encoder::ModuleArg)>::new());
    }
    outer.section(&core_instances);
    let mut component_instances = ComponentInstanceSection::new();
    component_instances.instantiate(0, Vec::<(&str, ComponentExportKind, u32)>::new());
    outer.section(&component_instances);
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::InstanceExport {
        instance: 0,
        kind: ComponentExportKind::Instance,
        name: "toolhost:plugin/tools@0.1.0",
    });
    outer.section(&aliases);
    let mut exports = ComponentExportSection::new();
    exports.export(
        "toolhost:plugin/tools@0.1.0",
        ComponentExportKind::Instance,
        1,
        None,
    );
    outer.section(&exports);
    outer.finish()
}

/// Writes a component to `dir/name` through a temporary file and rename.
pub fn write_plugin(bytes: &[u8], dir: &Path, name: &str) {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, dir.join(name)).unwrap();
}
