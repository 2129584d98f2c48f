//! The one rewrite of a language runtime that lets the host read and write
//! its state: every mutable global of every core instance, and its linear
//! memory. The runtime's own modules are kept as they are, each with
//! exports added for what it does not export yet; one small module more
//! (the accessor) imports those globals and that memory, and the component
//! exports its functions, lifted, as the instance [`STATE`]:
//!
//! - `globals() -> list<u64>` and `set-globals(list<u64>)`: every mutable
//!   global, in one order, each as its bits;
//! - `pages() -> u32` and `grow-to(u32)`: the memory's size in 64 KiB pages;
//! - `read(offset, len) -> list<u8>`: a range of the memory, copied out
//!   through the accessor's own scratch memory (never the runtime's);
//! - `write-runs(list<u64>)`: many runs in one call, each its offset, its
//!   length in words, then its words, lowered into the accessor's scratch
//!   memory and copied each to its place;
//! - `reset()`: the WASI adapter's `reset_adapter_state`, and libc's
//!   `__wasilibc_reset_preopens` where a module exports it (the runtime's
//!   libc is a module of its own), so that a state taken holds none of the
//!   instance's handles: each asks for them again in the instance the
//!   state is laid on.
//!
//! Only what the host calls runs: the runtime's code is unchanged, and an
//! instance nobody asks about behaves as before. Components whose core
//! modules are all at the top level only (the Python runtime; nested
//! components of export shims are fine); one with modules in a nested
//! component (the JavaScript runtime) is declined, and served as before.

use wasm_encoder as enc;
use wasmparser as wp;

use super::accessor::{FUNCS, Global};

/// Which rewrite this is: part of the rewritten runtime's cache key.
pub(crate) const VERSION: u32 = 5;

/// libc's reset of its table of preopened folders (wasi-libc).
const PREOPENS_RESET: &str = "__wasilibc_reset_preopens";

/// The name the module that defines the runtime's memory exports it as.
pub(crate) const MEMORY_EXPORT: &str = "toolhost-memory";

/// The instance the rewritten component exports.
pub(crate) const STATE: &str = "toolhost:snapshot/state";

/// Why a runtime is served without snapshots.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstrumentError {
    #[error("the component does not validate: {0}")]
    Invalid(String),
    #[error("not supported: {0}")]
    Unsupported(&'static str),
}

/// A top-level section: its id and contents.
struct Section<'a> {
    id: u8,
    data: &'a [u8],
}

/// The rewritten component, or why there is none.
pub(crate) fn instrument(component: &[u8]) -> Result<Vec<u8>, InstrumentError> {
    let types = index_spaces(component)?;
    let types = types.as_ref();
    let sections = split(component)?;
    for nested in sections.iter().filter(|s| s.id == 4) {
        if holds_modules(nested.data)? {
            return Err(InstrumentError::Unsupported("modules in nested components"));
        }
    }

    // Which core instance each module is instantiated as.
    let modules: Vec<&[u8]> = sections
        .iter()
        .filter(|s| s.id == 1)
        .map(|s| s.data)
        .collect();
    let mut instance_of: Vec<Option<u32>> = vec![None; modules.len()];
    let mut instances = 0u32;
    for section in sections.iter().filter(|s| s.id == 2) {
        let reader = wp::InstanceSectionReader::new(wp::BinaryReader::new(section.data, 0))
            .map_err(|e| InstrumentError::Invalid(e.to_string()))?;
        for instance in reader {
            match instance.map_err(|e| InstrumentError::Invalid(e.to_string()))? {
                wp::Instance::Instantiate { module_index, .. } => {
                    let slot = instance_of.get_mut(module_index as usize).ok_or(
                        InstrumentError::Unsupported("an instance of a nested module"),
                    )?;
                    if slot.replace(instances).is_some() {
                        return Err(InstrumentError::Unsupported("a module instantiated twice"));
                    }
                }
                wp::Instance::FromExports(_) => {}
            }
            instances += 1;
        }
    }
    if instances != types.core_instance_count() {
        return Err(InstrumentError::Unsupported(
            "core instances made elsewhere",
        ));
    }

    // Each instantiated module with exports for its state.
    let mut globals = Vec::new();
    let mut memory: Option<(u32, String, wp::MemoryType)> = None;
    let mut reset: Option<(u32, String)> = None;
    let mut preopens_reset: Option<(u32, String)> = None;
    // Unchanged modules are borrowed: the runtime is tens of MB, copied
    // once into the result and no more.
    let mut rewritten: Vec<std::borrow::Cow<'_, [u8]>> = Vec::with_capacity(modules.len());
    for (module, instance) in modules.iter().zip(&instance_of) {
        let Some(instance) = *instance else {
            rewritten.push(std::borrow::Cow::Borrowed(module));
            continue;
        };
        let state = module_state(module)?;
        let mut added = Vec::new();
        for (index, ty) in &state.mutable_globals {
            let name = match state.exported(wp::ExternalKind::Global, *index) {
                Some(name) => name,
                None => {
                    let name = format!("toolhost-global-{index}");
                    added.push((name.clone(), enc::ExportKind::Global, *index));
                    name
                }
            };
            globals.push(Global {
                instance,
                name,
                ty: *ty,
            });
        }
        for (index, ty) in &state.memories {
            if memory.is_some() {
                return Err(InstrumentError::Unsupported("more than one memory"));
            }
            // Exported under a name of its own (as well as any it has),
            // by which the host finds the module that defines it to map
            // a source's image into it (`image.rs`).
            let name = MEMORY_EXPORT.to_string();
            if !state.exports.iter().any(|(n, kind, i)| {
                n == MEMORY_EXPORT && *kind == wp::ExternalKind::Memory && i == index
            }) {
                added.push((name.clone(), enc::ExportKind::Memory, *index));
            }
            memory = Some((instance, name, *ty));
        }
        if state
            .exports
            .iter()
            .any(|(name, kind, _)| name == "reset_adapter_state" && *kind == wp::ExternalKind::Func)
        {
            reset = Some((instance, "reset_adapter_state".to_string()));
        }
        // libc's table of preopened folders holds their handles too: reset,
        // it asks for them again in the instance the image is laid on.
        if state
            .exports
            .iter()
            .any(|(name, kind, _)| name == PREOPENS_RESET && *kind == wp::ExternalKind::Func)
        {
            preopens_reset = Some((instance, PREOPENS_RESET.to_string()));
        }
        rewritten.push(if added.is_empty() {
            std::borrow::Cow::Borrowed(module)
        } else {
            std::borrow::Cow::Owned(with_exports(module, &added)?)
        });
    }
    if reset.is_none() {
        // Its state would carry the handles of the instance it was taken
        // from.
        return Err(InstrumentError::Unsupported(
            "a WASI adapter without reset_adapter_state",
        ));
    }
    let Some(memory) = memory else {
        return Err(InstrumentError::Unsupported("no memory"));
    };
    if memory.2.memory64 || memory.2.shared || memory.2.page_size_log2.is_some_and(|p| p != 16) {
        return Err(InstrumentError::Unsupported(
            "a memory other than 32-bit of 64 KiB pages",
        ));
    }
    if globals.iter().any(|g| {
        !matches!(
            g.ty,
            wp::ValType::I32 | wp::ValType::I64 | wp::ValType::F32 | wp::ValType::F64
        )
    }) {
        return Err(InstrumentError::Unsupported(
            "a global of a vector or reference type",
        ));
    }

    // The component's own sections, as they are but for the rewritten
    // modules, into one buffer of the size they need; the added sections
    // follow (`out`, appended without its header at the end).
    let mut bytes = Vec::with_capacity(component.len() + 64 * 1024);
    bytes.extend_from_slice(&component[..8]);
    let mut modules = rewritten.iter();
    for section in &sections {
        let data = match section.id {
            1 => modules.next().expect("one rewritten module per module"),
            _ => section.data,
        };
        emit(&mut bytes, section.id, data);
    }
    let mut out = enc::Component::new();

    let resets: Vec<(u32, String)> = reset.iter().chain(&preopens_reset).cloned().collect();
    let accessor = super::accessor::accessor(&globals, &memory, &resets);
    out.section(&enc::ModuleSection(&accessor));
    let accessor_module = types.module_count();
    let accessor_instance = types.core_instance_count();
    let mut args: Vec<u32> = globals.iter().map(|g| g.instance).collect();
    args.push(memory.0);
    args.extend(resets.iter().map(|(instance, _)| *instance));
    args.sort_unstable();
    args.dedup();
    let names: Vec<String> = args.iter().map(|i| format!("i{i}")).collect();
    let mut instantiate = enc::InstanceSection::new();
    instantiate.instantiate(
        accessor_module,
        names
            .iter()
            .zip(&args)
            .map(|(name, i)| (name.as_str(), enc::ModuleArg::Instance(*i))),
    );
    out.section(&instantiate);

    let core_funcs = types.function_count();
    let core_memories = types.memory_count();
    let mut aliases = enc::ComponentAliasSection::new();
    for name in FUNCS {
        aliases.alias(enc::Alias::CoreInstanceExport {
            instance: accessor_instance,
            kind: enc::ExportKind::Func,
            name,
        });
    }
    aliases.alias(enc::Alias::CoreInstanceExport {
        instance: accessor_instance,
        kind: enc::ExportKind::Memory,
        name: "scratch",
    });
    out.section(&aliases);
    let func = |name: &str| core_funcs + FUNCS.iter().position(|f| *f == name).unwrap() as u32;
    let scratch = core_memories;

    let t = types.component_type_count();
    let u8s = enc::ComponentValType::Type(t);
    let u64s = enc::ComponentValType::Type(t + 1);
    let u32 = enc::ComponentValType::Primitive(enc::PrimitiveValType::U32);
    let mut defined = enc::ComponentTypeSection::new();
    defined
        .defined_type()
        .list(enc::ComponentValType::Primitive(enc::PrimitiveValType::U8));
    defined
        .defined_type()
        .list(enc::ComponentValType::Primitive(enc::PrimitiveValType::U64));
    let none: [(&str, enc::ComponentValType); 0] = [];
    defined.function().params(none).result(Some(u64s)); // t+2 globals
    defined.function().params([("values", u64s)]).result(None); // t+3 set-globals
    defined.function().params(none).result(Some(u32)); // t+4 pages
    defined
        .function()
        .params([("offset", u32), ("len", u32)])
        .result(Some(u8s)); // t+5 read
    defined.function().params(none).result(None); // t+6 reset
    defined.function().params([("pages", u32)]).result(None); // t+7 grow-to
    out.section(&defined);

    use enc::CanonicalOption::{Memory, Realloc};
    let mut lifts = enc::CanonicalFunctionSection::new();
    let lifted: [(&str, u32, Vec<enc::CanonicalOption>); 7] = [
        ("globals", t + 2, vec![Memory(scratch)]),
        (
            "set-globals",
            t + 3,
            vec![Memory(scratch), Realloc(func("realloc-scratch"))],
        ),
        ("pages", t + 4, vec![]),
        ("read", t + 5, vec![Memory(scratch)]),
        ("reset", t + 6, vec![]),
        ("grow-to", t + 7, vec![]),
        // Runs, each its offset, its length in words and its words: one
        // call lays many.
        (
            "write-runs",
            t + 3,
            vec![Memory(scratch), Realloc(func("realloc-scratch"))],
        ),
    ];
    for (name, ty, options) in &lifted {
        lifts.lift(func(name), *ty, options.iter().copied());
    }
    out.section(&lifts);
    let first = types.component_function_count();
    let mut instance = enc::ComponentInstanceSection::new();
    instance.export_items(
        lifted
            .iter()
            .enumerate()
            .map(|(i, (name, _, _))| (*name, enc::ComponentExportKind::Func, first + i as u32)),
    );
    out.section(&instance);
    let mut export = enc::ComponentExportSection::new();
    export.export(
        STATE,
        enc::ComponentExportKind::Instance,
        types.component_instance_count(),
        None,
    );
    out.section(&export);
    bytes.extend_from_slice(&out.finish()[8..]);
    Ok(bytes)
}

/// The component's index spaces, from validating everything but function
/// bodies (wasmtime validates those as it compiles): the rewrite adds to
/// each space after what is there.
fn index_spaces(component: &[u8]) -> Result<wp::types::Types, InstrumentError> {
    let invalid = |e: wp::BinaryReaderError| InstrumentError::Invalid(e.to_string());
    let mut validator = wp::Validator::new_with_features(wp::WasmFeatures::all());
    let mut root = None;
    for payload in wp::Parser::new(0).parse_all(component) {
        // The last end is the outer component's.
        if let wp::ValidPayload::End(types) = validator
            .payload(&payload.map_err(invalid)?)
            .map_err(invalid)?
        {
            root = Some(types);
        }
    }
    root.ok_or_else(|| InstrumentError::Invalid("a component that never ends".into()))
}

/// Whether a nested component holds core modules (its export shims, as
/// wit-component writes them, hold none).
fn holds_modules(component: &[u8]) -> Result<bool, InstrumentError> {
    for section in split(component)? {
        if section.id == 1 || (section.id == 4 && holds_modules(section.data)?) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The top-level sections of a component or module.
fn split(bytes: &[u8]) -> Result<Vec<Section<'_>>, InstrumentError> {
    let truncated = || InstrumentError::Invalid("a truncated section".into());
    let mut sections = Vec::new();
    let mut at = 8;
    while at < bytes.len() {
        let id = bytes[at];
        let mut reader = wp::BinaryReader::new(&bytes[at + 1..], 0);
        let size = reader.read_var_u32().map_err(|_| truncated())? as usize;
        let start = at + 1 + reader.original_position();
        let data = bytes.get(start..start + size).ok_or_else(truncated)?;
        sections.push(Section { id, data });
        at = start + size;
    }
    Ok(sections)
}

/// What a core module holds of state, and what it exports.
struct ModuleState {
    mutable_globals: Vec<(u32, wp::ValType)>,
    memories: Vec<(u32, wp::MemoryType)>,
    exports: Vec<(String, wp::ExternalKind, u32)>,
}

impl ModuleState {
    fn exported(&self, kind: wp::ExternalKind, index: u32) -> Option<String> {
        self.exports
            .iter()
            .find(|(_, k, i)| *k == kind && *i == index)
            .map(|(name, _, _)| name.clone())
    }
}

fn module_state(module: &[u8]) -> Result<ModuleState, InstrumentError> {
    let invalid = |e: wp::BinaryReaderError| InstrumentError::Invalid(e.to_string());
    let mut state = ModuleState {
        mutable_globals: Vec::new(),
        memories: Vec::new(),
        exports: Vec::new(),
    };
    let (mut imported_globals, mut imported_memories) = (0u32, 0u32);
    for payload in wp::Parser::new(0).parse_all(module) {
        match payload.map_err(invalid)? {
            wp::Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import.map_err(invalid)?.ty {
                        wp::TypeRef::Global(_) => imported_globals += 1,
                        wp::TypeRef::Memory(_) => imported_memories += 1,
                        _ => {}
                    }
                }
            }
            wp::Payload::GlobalSection(reader) => {
                for (i, global) in reader.into_iter().enumerate() {
                    let global = global.map_err(invalid)?;
                    if global.ty.mutable {
                        state
                            .mutable_globals
                            .push((imported_globals + i as u32, global.ty.content_type));
                    }
                }
            }
            wp::Payload::MemorySection(reader) => {
                for (i, memory) in reader.into_iter().enumerate() {
                    state
                        .memories
                        .push((imported_memories + i as u32, memory.map_err(invalid)?));
                }
            }
            wp::Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(invalid)?;
                    state
                        .exports
                        .push((export.name.to_string(), export.kind, export.index));
                }
            }
            _ => {}
        }
    }
    Ok(state)
}

/// `module` with `added` exports: its export section extended, or one put
/// where the binary format orders it.
fn with_exports(
    module: &[u8],
    added: &[(String, enc::ExportKind, u32)],
) -> Result<Vec<u8>, InstrumentError> {
    let sections = split(module)?;
    let mut out = Vec::with_capacity(module.len() + 64 * 1024);
    out.extend_from_slice(&module[..8]);
    let mut exports = enc::ExportSection::new();
    let mut placed = false;
    // Sections after the export section in the binary format's order.
    let after_exports = |id: u8| matches!(id, 8..=12);
    let finish = |exports: &mut enc::ExportSection| {
        for (name, kind, index) in added {
            exports.export(name, *kind, *index);
        }
        let mut bytes = Vec::new();
        enc::Encode::encode(&*exports, &mut bytes);
        // `encode` writes the section's size first: the contents follow it.
        let mut reader = wp::BinaryReader::new(&bytes, 0);
        let size = reader.read_var_u32().expect("a size just written") as usize;
        let start = reader.original_position();
        bytes[start..start + size].to_vec()
    };
    for section in &sections {
        if section.id == 7 {
            let reader = wp::ExportSectionReader::new(wp::BinaryReader::new(section.data, 0))
                .map_err(|e| InstrumentError::Invalid(e.to_string()))?;
            for export in reader {
                let export = export.map_err(|e| InstrumentError::Invalid(e.to_string()))?;
                exports.export(export.name, kind(export.kind), export.index);
            }
            let data = finish(&mut exports);
            emit(&mut out, 7, &data);
            placed = true;
        } else {
            if !placed && after_exports(section.id) {
                let data = finish(&mut exports);
                emit(&mut out, 7, &data);
                placed = true;
            }
            emit(&mut out, section.id, section.data);
        }
    }
    if !placed {
        let data = finish(&mut exports);
        emit(&mut out, 7, &data);
    }
    Ok(out)
}

fn kind(kind: wp::ExternalKind) -> enc::ExportKind {
    match kind {
        wp::ExternalKind::Func | wp::ExternalKind::FuncExact => enc::ExportKind::Func,
        wp::ExternalKind::Table => enc::ExportKind::Table,
        wp::ExternalKind::Memory => enc::ExportKind::Memory,
        wp::ExternalKind::Global => enc::ExportKind::Global,
        wp::ExternalKind::Tag => enc::ExportKind::Tag,
    }
}

/// Appends a section, of a module or a component: its id, its size, its
/// contents.
fn emit(out: &mut Vec<u8>, id: u8, data: &[u8]) {
    out.push(id);
    leb(out, data.len() as u32);
    out.extend_from_slice(data);
}

fn leb(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
