//! The vendored wasmtime's memory image per source
//! (vendor/wasmtime/PATCHED.md), held to what `image.rs` relies on, with a
//! component small enough to compile twice in a test: an instance of the
//! imaged component starts from the image (pages changed, zeroed and
//! grown past the module's own), never from what an instance before it in
//! the same pool slot wrote; an image laid over another holds only what
//! differs from it; the image serves another compile of the same wasm
//! (the optimised code, once it replaces the baseline code); and the
//! runtime's own component, in the same pool, still starts from its own
//! data.

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, Store};

use super::instrument::MEMORY_EXPORT;

const COMPONENT: &str = r#"
(component
  (core module $m
    (memory (export "toolhost-memory") 2 4)
    (data (i32.const 0) "base-page-zero")
    (data (i32.const 70000) "base-page-seventeen")
    (func (export "get") (param i32) (result i32) (i32.load8_u (local.get 0)))
    (func (export "set") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
    (func (export "size") (result i32) (memory.size)))
  (core instance $i (instantiate $m))
  (func (export "get") (param "at" u32) (result u32) (canon lift (core func $i "get")))
  (func (export "set") (param "at" u32) (param "value" u32) (canon lift (core func $i "set")))
  (func (export "size") (result u32) (canon lift (core func $i "size")))
)"#;

const PAGE: usize = 65536;

fn engine() -> Engine {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(
        crate::runtime::pool::pool_config(4),
    ));
    Engine::new(&config).unwrap()
}

fn linked(engine: &Engine) -> (Component, InstancePre<()>) {
    let component = Component::new(engine, wat::parse_str(COMPONENT).unwrap()).unwrap();
    let pre = Linker::new(engine).instantiate_pre(&component).unwrap();
    (component, pre)
}

/// What one fresh instance of `pre` reads at `at`s and its size in pages;
/// it then writes over all of them, for the next instance in its slot.
fn read_then_write(engine: &Engine, pre: &InstancePre<()>, at: &[u32]) -> (Vec<u32>, u32) {
    let mut store = Store::new(engine, ());
    let instance = pre.instantiate(&mut store).unwrap();
    let get = instance
        .get_typed_func::<(u32,), (u32,)>(&mut store, "get")
        .unwrap();
    let set = instance
        .get_typed_func::<(u32, u32), ()>(&mut store, "set")
        .unwrap();
    let size = instance
        .get_typed_func::<(), (u32,)>(&mut store, "size")
        .unwrap();
    let pages = size.call(&mut store, ()).unwrap().0;
    let read = at
        .iter()
        .map(|at| get.call(&mut store, (*at,)).unwrap().0)
        .collect();
    for at in at {
        if (*at as usize) < pages as usize * PAGE {
            set.call(&mut store, (*at, u32::from(b'W'))).unwrap();
        }
    }
    (read, pages)
}

/// The memory the image holds: the module's own data, with its first
/// bytes changed, a byte of its second segment zeroed, and a third page
/// grown and written.
fn memory() -> Vec<u8> {
    let mut memory = vec![0u8; 3 * PAGE];
    memory[..14].copy_from_slice(b"base-page-zero");
    memory[70000..70019].copy_from_slice(b"base-page-seventeen");
    memory[..4].copy_from_slice(b"MINE");
    memory[70000] = 0;
    memory[150_000..150_005].copy_from_slice(b"grown");
    memory
}

fn image_of(component: &Component) -> wasmtime::component::ExportedMemoryImage {
    component.exported_memory_image(MEMORY_EXPORT).unwrap()
}

const AT: [u32; 5] = [0, 4, 70000, 70001, 150_000];

fn expect_image(read: (Vec<u32>, u32)) {
    let want = [b'M', b'-', 0, b'a', b'g'].map(u32::from).to_vec();
    assert_eq!(read, (want, 3));
}

#[test]
fn an_imaged_instance_starts_from_the_image_however_its_slot_was_left() {
    let engine = engine();
    let (component, pre) = linked(&engine);
    for max_runs in [8, 1] {
        let (imaged, held) = component
            .with_memory_image(MEMORY_EXPORT, &memory(), max_runs, None)
            .unwrap();
        // Three host pages differ from the module's own (or are grown),
        // and only they are held: the rest maps the module's own image,
        // zeros are holes.
        assert_eq!(held, 3 * 4096, "max_runs {max_runs}");
        let imaged = pre.for_imaged(imaged).unwrap();
        // In turn with the module's own instances, in a pool of four
        // slots: each writes everything it read before it goes.
        for _ in 0..6 {
            expect_image(read_then_write(&engine, &imaged, &AT));
            let (own, pages) = read_then_write(&engine, &pre, &AT[..4]);
            assert_eq!(
                (own, pages),
                ([b'b', b'-', b'b', b'a'].map(u32::from).to_vec(), 2)
            );
        }
    }
}

#[test]
fn trimming_unused_slots_keeps_what_every_instance_reads() {
    let engine = engine();
    let (component, pre) = linked(&engine);
    let (imaged, _) = component
        .with_memory_image(MEMORY_EXPORT, &memory(), 8, None)
        .unwrap();
    let imaged = pre.for_imaged(imaged).unwrap();
    // A live instance's own writes survive a trim: its slot is in use.
    let mut store = Store::new(&engine, ());
    let live = imaged.instantiate(&mut store).unwrap();
    let set = live
        .get_typed_func::<(u32, u32), ()>(&mut store, "set")
        .unwrap();
    let get = live
        .get_typed_func::<(u32,), (u32,)>(&mut store, "get")
        .unwrap();
    set.call(&mut store, (70001, u32::from(b'L'))).unwrap();
    for round in 0..4 {
        expect_image(read_then_write(&engine, &imaged, &AT));
        let (own, _) = read_then_write(&engine, &pre, &AT[..4]);
        assert_eq!(own, [b'b', b'-', b'b', b'a'].map(u32::from).to_vec());
        // The freed slot (the two took the same one in turn) is clean and
        // trimmed, and keeps its image; the live instance's is not.
        assert_eq!(engine.trim_unused_memories(), 1, "round {round}");
        assert_eq!(get.call(&mut store, (70001,)).unwrap().0, u32::from(b'L'));
    }
    expect_image(read_then_write(&engine, &imaged, &AT));
}

#[test]
fn an_image_serves_another_compile_of_the_same_wasm_and_no_other() {
    let engine = engine();
    let (component, pre) = linked(&engine);
    let (imaged, _) = component
        .with_memory_image(MEMORY_EXPORT, &memory(), 8, None)
        .unwrap();
    // The optimised code, in the runtime, is another compile of the same
    // wasm: the image is given to it as it is, and outlives the code it
    // was made with (which goes once the optimised code serves).
    let image = imaged.exported_memory_image(MEMORY_EXPORT).unwrap();
    let (again, again_pre) = linked(&engine);
    let derived = again.with_memory_image_of(MEMORY_EXPORT, &image).unwrap();
    let derived = again_pre.for_imaged(derived).unwrap();
    for _ in 0..3 {
        expect_image(read_then_write(&engine, &derived, &AT));
    }
    {
        let (gone, gone_pre) = linked(&engine);
        let (made, _) = gone
            .with_memory_image(MEMORY_EXPORT, &memory(), 8, None)
            .unwrap();
        let kept = made.exported_memory_image(MEMORY_EXPORT).unwrap();
        drop((gone, gone_pre, made));
        let derived = again.with_memory_image_of(MEMORY_EXPORT, &kept).unwrap();
        let derived = again_pre.for_imaged(derived).unwrap();
        expect_image(read_then_write(&engine, &derived, &AT));
    }
    // Not for another wasm.
    let other = Component::new(
        &engine,
        wat::parse_str(COMPONENT.replace("base-page-zero", "base-page-ZERO")).unwrap(),
    )
    .unwrap();
    assert!(other.with_memory_image_of(MEMORY_EXPORT, &image).is_err());
    // A pre serves only components made from its own.
    assert!(again_pre.for_imaged(imaged.clone()).is_err());
    assert!(pre.for_imaged(imaged).is_ok());
    // Only a memory a module defines and exports by that name.
    assert!(
        component
            .with_memory_image("memory", &memory(), 8, None)
            .is_err()
    );
    // An image smaller than the module's own memory is refused.
    assert!(
        component
            .with_memory_image(MEMORY_EXPORT, &memory()[..PAGE], 8, None)
            .is_err()
    );
}

#[test]
fn an_image_laid_over_another_holds_only_what_differs_from_it() {
    let engine = engine();
    let (component, pre) = linked(&engine);
    let (first, _) = component
        .with_memory_image(MEMORY_EXPORT, &memory(), 8, None)
        .unwrap();
    let mut near = memory();
    near[200] = b'Z';
    // One page differs from the first image, three from the module's own.
    assert_eq!(
        component
            .memory_image_cost(MEMORY_EXPORT, &near, Some(&image_of(&first)))
            .unwrap(),
        4096
    );
    assert_eq!(
        component
            .memory_image_cost(MEMORY_EXPORT, &near, None)
            .unwrap(),
        3 * 4096
    );
    let (second, held) = component
        .with_memory_image(MEMORY_EXPORT, &near, 8, Some(&image_of(&first)))
        .unwrap();
    assert_eq!(held, 4096);
    let second_pre = pre.for_imaged(second.clone()).unwrap();
    let first_pre = pre.for_imaged(first.clone()).unwrap();
    let at = [0, 4, 200, 70001, 150_000];
    for _ in 0..4 {
        let (read, pages) = read_then_write(&engine, &second_pre, &at);
        assert_eq!(
            (read, pages),
            ([b'M', b'-', b'Z', b'a', b'g'].map(u32::from).to_vec(), 3)
        );
        expect_image(read_then_write(&engine, &first_pre, &AT));
    }
    // Not over an image larger than the memory.
    assert!(
        component
            .memory_image_cost(
                MEMORY_EXPORT,
                &memory()[..2 * PAGE],
                Some(&image_of(&first))
            )
            .is_err()
    );
    // Two layers at most.
    assert!(
        component
            .with_memory_image(MEMORY_EXPORT, &memory(), 8, Some(&image_of(&second)))
            .is_err()
    );
}
