//! The vendored wasmtime's compile side, held with a small component on
//! both compilers: only a function the host can be handed gets an
//! array-to-wasm trampoline, and wasm still calls every other one, through
//! a table or from another core instance that imports it
//! (vendor/wasmtime/PATCHED.md, "Array entries for what the host calls").

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store, Strategy};

/// How many functions the library defines.
const FUNCTIONS: u32 = 512;

/// A component laid out as a dynamically linked runtime is: a library
/// core module defines `FUNCTIONS` functions, exports each, and puts each
/// in its table; a main core module imports them all and re-exports the
/// library's `realloc`. The component lifts:
/// - `sum`: the library's, adding up the functions through the table, with
///   a post-return the host calls after it;
/// - `linked`: the main module's, adding them up through its imports;
/// - `len`: the main module's, taking a string, so the host calls the
///   `realloc` the main module re-exports (the library's, defined there).
///
/// It also exports a core module of its own, which the host may
/// instantiate and call. `lifted` has the component lift each library
/// function too, which gives each an entry.
fn component_wat(lifted: bool) -> String {
    let mut functions = String::new();
    let mut names = String::new();
    let mut imports = String::new();
    let mut calls = String::new();
    let mut lifts = String::new();
    for i in 0..FUNCTIONS {
        functions.push_str(&format!(
            "(func $f{i} (export \"f{i}\") (result i32) i32.const {i})\n"
        ));
        names.push_str(&format!(" $f{i}"));
        imports.push_str(&format!(
            "(import \"lib\" \"f{i}\" (func $f{i} (result i32)))\n"
        ));
        calls.push_str(&format!("(call $f{i}) i32.add\n"));
        if lifted {
            lifts.push_str(&format!(
                "(func (export \"f{i}\") (result u32) (canon lift (core func $lib \"f{i}\")))\n"
            ));
        }
    }
    format!(
        r#"(component
  (core module $library
    (type $t (func (result i32)))
    (memory (export "memory") 1)
    (table {FUNCTIONS} funcref)
    (elem (i32.const 0) func{names})
    {functions}
    (func (export "sum") (result i32)
      (local $i i32) (local $sum i32)
      (loop $next
        (local.set $sum (i32.add (local.get $sum) (call_indirect (type $t) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $i) (i32.const {FUNCTIONS}))))
      (local.get $sum))
    (func (export "post") (param i32))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) i32.const 1024))
  (core instance $lib (instantiate $library))
  (core module $main
    {imports}
    (import "lib" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
    (export "realloc" (func $realloc))
    (func (export "linked") (result i32)
      i32.const 0
      {calls})
    (func (export "len") (param i32 i32) (result i32) local.get 1))
  (core instance $main (instantiate $main (with "lib" (instance $lib))))
  (alias core export $lib "memory" (core memory $memory))
  (alias core export $main "realloc" (core func $realloc))
  (func (export "sum") (result u32)
    (canon lift (core func $lib "sum") (post-return (core func $lib "post"))))
  (func (export "linked") (result u32) (canon lift (core func $main "linked")))
  (func (export "len") (param "s" string) (result u32)
    (canon lift (core func $main "len") (memory $memory) (realloc $realloc)))
  {lifts}
  (core module $seven (func (export "seven") (result i32) i32.const 7))
  (export "seven" (core module $seven)))"#
    )
}

/// What the component answered on `strategy`, and the size of its
/// compiled code.
struct Answers {
    sum: u32,
    linked: u32,
    len: u32,
    /// `seven`, called by the host on an instance of the core module the
    /// component exports.
    seven: i32,
    text: usize,
}

fn compile_and_call(strategy: Strategy, lifted: bool) -> Answers {
    let mut config = Config::new();
    config.wasm_component_model(true).strategy(strategy);
    let engine = Engine::new(&config).unwrap();
    let wasm = wat::parse_str(component_wat(lifted)).unwrap();
    let component = Component::new(&engine, &wasm).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .unwrap();
    let sum = instance
        .get_typed_func::<(), (u32,)>(&mut store, "sum")
        .unwrap();
    let (sum,) = sum.call(&mut store, ()).unwrap();
    let linked = instance
        .get_typed_func::<(), (u32,)>(&mut store, "linked")
        .unwrap();
    let (linked,) = linked.call(&mut store, ()).unwrap();
    let len = instance
        .get_typed_func::<(&str,), (u32,)>(&mut store, "len")
        .unwrap();
    let (len,) = len.call(&mut store, ("seven c",)).unwrap();
    let module = instance.get_module(&mut store, "seven").unwrap();
    let core = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
    let seven = core
        .get_typed_func::<(), i32>(&mut store, "seven")
        .unwrap()
        .call(&mut store, ())
        .unwrap();
    Answers {
        sum,
        linked,
        len,
        seven,
        text: component.text().len(),
    }
}

#[test]
fn only_what_the_host_calls_has_an_array_entry_and_everything_still_answers() {
    let expected = (0..FUNCTIONS).sum::<u32>();
    for strategy in [Strategy::Winch, Strategy::Cranelift] {
        for lifted in [false, true] {
            let answers = compile_and_call(strategy, lifted);
            let case = format!("{strategy:?}, lifted {lifted}");
            assert_eq!(answers.sum, expected, "{case}");
            assert_eq!(answers.linked, expected, "{case}");
            assert_eq!(answers.len, 7, "{case}");
            assert_eq!(answers.seven, 7, "{case}");
        }
        let linked_only = compile_and_call(strategy, false).text;
        let lifted = compile_and_call(strategy, true).text;
        // The same code either way, but for one trampoline per lifted
        // function (about 150 bytes each; the text is whole pages, so
        // there are enough functions for the difference to span several).
        // Exported to another core instance or put in a table, a function
        // has none.
        assert!(
            lifted >= linked_only + FUNCTIONS as usize * 16,
            "{strategy:?}: {lifted} bytes of code with the functions lifted, \
             {linked_only} without"
        );
    }
}
