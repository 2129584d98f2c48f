//! The accessor module of a rewritten runtime (`instrument.rs`): functions
//! that read and write the runtime's globals and memory, which the
//! component lifts and exports. Memory 0 is the runtime's, memory 1 the
//! accessor's own scratch; globals 0.. are the runtime's.

use wasm_encoder as enc;
use wasmparser as wp;

/// Bytes at the start of the accessor's scratch memory: an answer's pointer
/// and length; what it copies out starts after them.
const HEAD: u32 = 16;

/// The accessor's functions, in the order its module defines them.
pub(super) const FUNCS: [&str; 8] = [
    "globals",
    "set-globals",
    "realloc-scratch",
    "pages",
    "read",
    "reset",
    "grow-to",
    "write-runs",
];

/// A mutable global the accessor reads and writes.
pub(super) struct Global {
    /// The core instance that holds it, and its export name there.
    pub(super) instance: u32,
    pub(super) name: String,
    pub(super) ty: wp::ValType,
}

fn val_type(ty: wp::ValType) -> enc::ValType {
    match ty {
        wp::ValType::I32 => enc::ValType::I32,
        wp::ValType::I64 => enc::ValType::I64,
        wp::ValType::F32 => enc::ValType::F32,
        wp::ValType::F64 => enc::ValType::F64,
        _ => unreachable!("checked by `instrument`"),
    }
}

/// The accessor module for `globals`, `memory` (its instance, export name
/// and type) and the functions `reset` calls, in order (each `() -> ()`:
/// the WASI adapter's reset, libc's preopens' reset).
pub(super) fn accessor(
    globals: &[Global],
    memory: &(u32, String, wp::MemoryType),
    resets: &[(u32, String)],
) -> enc::Module {
    use enc::{Instruction as I, ValType::*};
    let mut types = enc::TypeSection::new();
    types.ty().function([], [I32]); // 0
    types.ty().function([I32, I32], []); // 1
    types.ty().function([I32, I32, I32, I32], [I32]); // 2
    types.ty().function([I32], []); // 3
    types.ty().function([], []); // 4
    types.ty().function([I32, I32], [I32]); // 5

    let mut imports = enc::ImportSection::new();
    for global in globals {
        imports.import(
            &format!("i{}", global.instance),
            &global.name,
            enc::GlobalType {
                val_type: val_type(global.ty),
                mutable: true,
                shared: false,
            },
        );
    }
    imports.import(
        &format!("i{}", memory.0),
        &memory.1,
        enc::MemoryType {
            minimum: memory.2.initial,
            maximum: memory.2.maximum,
            memory64: false,
            shared: false,
            page_size_log2: None,
        },
    );
    for (instance, name) in resets {
        imports.import(&format!("i{instance}"), name, enc::EntityType::Function(4));
    }
    let imported_funcs = resets.len() as u32;

    let mut memories = enc::MemorySection::new();
    memories.memory(enc::MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let scratch = |offset: u64, align: u32| enc::MemArg {
        offset,
        align,
        memory_index: 1,
    };
    // Grows memory `index` to hold `bytes` (the i64 in local `need`),
    // trapping if it cannot.
    let grow = |f: &mut enc::Function, index: u32, need: u32| {
        // pages wanted = (need + 65535) >> 16; have = memory.size
        f.instruction(&I::LocalGet(need))
            .instruction(&I::I64Const(65535))
            .instruction(&I::I64Add)
            .instruction(&I::I64Const(16))
            .instruction(&I::I64ShrU)
            .instruction(&I::MemorySize(index))
            .instruction(&I::I64ExtendI32U)
            .instruction(&I::I64Sub)
            .instruction(&I::LocalTee(need))
            .instruction(&I::I64Const(0))
            .instruction(&I::I64GtS)
            .instruction(&I::If(enc::BlockType::Empty))
            .instruction(&I::LocalGet(need))
            .instruction(&I::I32WrapI64)
            .instruction(&I::MemoryGrow(index))
            .instruction(&I::I32Const(-1))
            .instruction(&I::I32Eq)
            .instruction(&I::If(enc::BlockType::Empty))
            .instruction(&I::Unreachable)
            .instruction(&I::End)
            .instruction(&I::End);
    };
    let store_answer = |f: &mut enc::Function, len: &[I<'static>]| {
        f.instruction(&I::I32Const(0))
            .instruction(&I::I32Const(HEAD as i32))
            .instruction(&I::I32Store(scratch(0, 2)))
            .instruction(&I::I32Const(0));
        for i in len {
            f.instruction(i);
        }
        f.instruction(&I::I32Store(scratch(4, 2)))
            .instruction(&I::I32Const(0));
    };

    let mut functions = enc::FunctionSection::new();
    let mut code = enc::CodeSection::new();
    let n = globals.len() as u32;

    // globals() -> i32
    let mut f = enc::Function::new([(1, I64)]);
    f.instruction(&I::I64Const(i64::from(HEAD + 8 * n)))
        .instruction(&I::LocalSet(0));
    grow(&mut f, 1, 0);
    for (k, global) in globals.iter().enumerate() {
        f.instruction(&I::I32Const((HEAD + 8 * k as u32) as i32))
            .instruction(&I::GlobalGet(k as u32));
        match global.ty {
            wp::ValType::I32 => {
                f.instruction(&I::I64ExtendI32U);
            }
            wp::ValType::F32 => {
                f.instruction(&I::I32ReinterpretF32)
                    .instruction(&I::I64ExtendI32U);
            }
            wp::ValType::F64 => {
                f.instruction(&I::I64ReinterpretF64);
            }
            _ => {}
        }
        f.instruction(&I::I64Store(scratch(0, 3)));
    }
    store_answer(&mut f, &[I::I32Const(n as i32)]);
    f.instruction(&I::End);
    functions.function(0);
    code.function(&f);

    // set-globals(ptr, len)
    let mut f = enc::Function::new([]);
    f.instruction(&I::LocalGet(1))
        .instruction(&I::I32Const(n as i32))
        .instruction(&I::I32Ne)
        .instruction(&I::If(enc::BlockType::Empty))
        .instruction(&I::Unreachable)
        .instruction(&I::End);
    for (k, global) in globals.iter().enumerate() {
        f.instruction(&I::LocalGet(0))
            .instruction(&I::I64Load(scratch(8 * k as u64, 3)));
        match global.ty {
            wp::ValType::I32 => {
                f.instruction(&I::I32WrapI64);
            }
            wp::ValType::F32 => {
                f.instruction(&I::I32WrapI64)
                    .instruction(&I::F32ReinterpretI32);
            }
            wp::ValType::F64 => {
                f.instruction(&I::F64ReinterpretI64);
            }
            _ => {}
        }
        f.instruction(&I::GlobalSet(k as u32));
    }
    f.instruction(&I::End);
    functions.function(1);
    code.function(&f);

    // realloc-scratch(old, old_size, align, size) -> i32: always HEAD.
    let mut f = enc::Function::new([(1, I64)]);
    f.instruction(&I::LocalGet(3))
        .instruction(&I::I64ExtendI32U)
        .instruction(&I::I64Const(i64::from(HEAD)))
        .instruction(&I::I64Add)
        .instruction(&I::LocalSet(4));
    grow(&mut f, 1, 4);
    f.instruction(&I::I32Const(HEAD as i32))
        .instruction(&I::End);
    functions.function(2);
    code.function(&f);

    // pages() -> i32
    let mut f = enc::Function::new([]);
    f.instruction(&I::MemorySize(0)).instruction(&I::End);
    functions.function(0);
    code.function(&f);

    // read(offset, len) -> i32
    let mut f = enc::Function::new([(1, I64)]);
    f.instruction(&I::LocalGet(1))
        .instruction(&I::I64ExtendI32U)
        .instruction(&I::I64Const(i64::from(HEAD)))
        .instruction(&I::I64Add)
        .instruction(&I::LocalSet(2));
    grow(&mut f, 1, 2);
    f.instruction(&I::I32Const(HEAD as i32))
        .instruction(&I::LocalGet(0))
        .instruction(&I::LocalGet(1))
        .instruction(&I::MemoryCopy {
            dst_mem: 1,
            src_mem: 0,
        });
    store_answer(&mut f, &[I::LocalGet(1)]);
    f.instruction(&I::End);
    functions.function(5);
    code.function(&f);

    // reset()
    let mut f = enc::Function::new([]);
    for reset in 0..imported_funcs {
        f.instruction(&I::Call(reset));
    }
    f.instruction(&I::End);
    functions.function(4);
    code.function(&f);

    // grow-to(pages)
    let mut f = enc::Function::new([(1, I64)]);
    f.instruction(&I::LocalGet(0))
        .instruction(&I::I64ExtendI32U)
        .instruction(&I::I64Const(16))
        .instruction(&I::I64Shl)
        .instruction(&I::LocalSet(1));
    grow(&mut f, 0, 1);
    f.instruction(&I::End);
    functions.function(3);
    code.function(&f);

    // write-runs(ptr, len): the list, lowered into the scratch memory, is
    // runs one after another, each its offset, its length in words, then
    // its words; each is copied to its place in the runtime's memory.
    // Locals: 2 the next run, 3 the end, 4 a run's length in bytes.
    let mut f = enc::Function::new([(3, I32)]);
    f.instruction(&I::LocalGet(0))
        .instruction(&I::LocalTee(2))
        .instruction(&I::LocalGet(1))
        .instruction(&I::I32Const(3))
        .instruction(&I::I32Shl)
        .instruction(&I::I32Add)
        .instruction(&I::LocalSet(3))
        .instruction(&I::Block(enc::BlockType::Empty))
        .instruction(&I::Loop(enc::BlockType::Empty))
        .instruction(&I::LocalGet(2))
        .instruction(&I::LocalGet(3))
        .instruction(&I::I32GeU)
        .instruction(&I::BrIf(1))
        // its length in bytes
        .instruction(&I::LocalGet(2))
        .instruction(&I::I64Load(scratch(8, 3)))
        .instruction(&I::I32WrapI64)
        .instruction(&I::I32Const(3))
        .instruction(&I::I32Shl)
        .instruction(&I::LocalSet(4))
        // memory.copy main[offset] <- scratch[run + 16], length
        .instruction(&I::LocalGet(2))
        .instruction(&I::I64Load(scratch(0, 3)))
        .instruction(&I::I32WrapI64)
        .instruction(&I::LocalGet(2))
        .instruction(&I::I32Const(16))
        .instruction(&I::I32Add)
        .instruction(&I::LocalGet(4))
        .instruction(&I::MemoryCopy {
            dst_mem: 0,
            src_mem: 1,
        })
        .instruction(&I::LocalGet(2))
        .instruction(&I::I32Const(16))
        .instruction(&I::I32Add)
        .instruction(&I::LocalGet(4))
        .instruction(&I::I32Add)
        .instruction(&I::LocalSet(2))
        .instruction(&I::Br(0))
        .instruction(&I::End)
        .instruction(&I::End)
        .instruction(&I::End);
    functions.function(1);
    code.function(&f);

    let mut exports = enc::ExportSection::new();
    for (i, name) in FUNCS.iter().enumerate() {
        exports.export(name, enc::ExportKind::Func, imported_funcs + i as u32);
    }
    exports.export("scratch", enc::ExportKind::Memory, 1);

    let mut module = enc::Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&memories)
        .section(&exports)
        .section(&code);
    module
}
