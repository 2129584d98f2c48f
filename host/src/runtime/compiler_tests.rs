//! The vendored wasmtime's compile side, held with a small component on
//! both compilers: a function its module does not export gets no
//! array-to-wasm trampoline, and wasm still calls it through a table
//! (vendor/wasmtime/PATCHED.md, "Array entries for exports only").

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store, Strategy};

/// How many functions reach the table.
const FUNCTIONS: u32 = 512;

/// A component whose export adds up what `FUNCTIONS` functions return,
/// each called through the table, and has a post-return the host calls
/// after it (through its array entry, as it calls the export); `exported`
/// has the core module export the table's functions too.
fn component_wat(exported: bool) -> String {
    let mut functions = String::new();
    let mut names = String::new();
    for i in 0..FUNCTIONS {
        let export = if exported {
            format!("(export \"f{i}\")")
        } else {
            String::new()
        };
        functions.push_str(&format!(
            "(func $f{i} {export} (result i32) i32.const {i})\n"
        ));
        names.push_str(&format!(" $f{i}"));
    }
    format!(
        r#"(component
  (core module $m
    (type $t (func (result i32)))
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
    (func (export "post") (param i32)))
  (core instance $i (instantiate $m))
  (func (export "sum") (result u32)
    (canon lift (core func $i "sum") (post-return (core func $i "post")))))"#
    )
}

/// Compiles the component on `strategy`, calls its export, and gives
/// what it answered and the size of its compiled code.
fn compile_and_call(strategy: Strategy, exported: bool) -> (u32, usize) {
    let mut config = Config::new();
    config.wasm_component_model(true).strategy(strategy);
    let engine = Engine::new(&config).unwrap();
    let wasm = wat::parse_str(component_wat(exported)).unwrap();
    let component = Component::new(&engine, &wasm).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .unwrap();
    let sum = instance
        .get_typed_func::<(), (u32,)>(&mut store, "sum")
        .unwrap();
    let (answer,) = sum.call(&mut store, ()).unwrap();
    (answer, component.text().len())
}

#[test]
fn functions_reached_only_through_a_table_have_no_array_entry_and_still_answer() {
    let expected = (0..FUNCTIONS).sum::<u32>();
    for strategy in [Strategy::Winch, Strategy::Cranelift] {
        let (through_table, table_only_text) = compile_and_call(strategy, false);
        let (also_exported, exported_text) = compile_and_call(strategy, true);
        assert_eq!(through_table, expected, "{strategy:?}");
        assert_eq!(also_exported, expected, "{strategy:?}");
        // The same code either way, but for one trampoline per exported
        // function (about 150 bytes each; the text is whole pages, so
        // there are enough functions for the difference to span several).
        assert!(
            exported_text >= table_only_text + FUNCTIONS as usize * 16,
            "{strategy:?}: {exported_text} bytes of code with the functions exported, \
             {table_only_text} without"
        );
    }
}
