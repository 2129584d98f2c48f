//! The instance pool's size: how many instances, memories, tables and
//! stacks wasmtime's pooling allocator reserves, derived from `max_calls`
//! and from what one component may contain, and how much of each slot
//! stays resident between calls.

/// What one component may contain: checked when it loads (a component
/// over any of these is rejected with the reason), so that one plugin's
/// calls can never take the pool slots of another's. Generous for what
/// toolchains emit: a Rust plugin has 1 memory and a few core instances;
/// componentize-py and componentize-js components stay well below too.
pub(crate) const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 50;
pub(crate) const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
pub(crate) const MAX_TABLES_PER_COMPONENT: u32 = 32;

/// How much of each pooled memory, table and stack is reset in place (and
/// stays mapped) between calls; the rest is returned to the kernel.
///
/// More for linear memories is faster and costs memory for good: the pages
/// a call wrote, up to this much, stay mapped in its slot after the call
/// (written back to their first contents), and every slot a burst ever
/// used keeps them. One run of `bench/scripts/sources_reach.py`, serve
/// profile, with the vendored wasmtime's reset (vendor/wasmtime/PATCHED.md;
/// 48.0.10's gave back every page past the first 32 written regions,
/// whatever this said): a plain Python source called back to back, p50
/// 6.5 / 5.4 / 3.8 ms at 2 / 4 / 8 MiB (8.0 before the vendored reset);
/// thirty live package-importing sources, RSS beyond none +206 / +226 /
/// +249 MiB, against a bound of +200. So 2 MiB stays.
const KEEP_RESIDENT: usize = 2 * 1024 * 1024;

/// The pool holds exactly what `instances` instances of the largest
/// allowed components need. The runtime asks for twice `max_calls`: one
/// set for the calls running (a call that got an executor slot always
/// gets its instance slots), one for instances kept between calls
/// (`warm.rs`, capped at `max_calls`).
pub(crate) fn pool_config(instances: u32) -> wasmtime::PoolingAllocationConfig {
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .total_core_instances(instances * MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_memories(instances * MAX_MEMORIES_PER_COMPONENT)
        .total_tables(instances * MAX_TABLES_PER_COMPONENT)
        .total_stacks(instances)
        // Reset what a call touched by writing zeros rather than by
        // madvise(DONTNEED): giving pages back to the kernel costs a TLB
        // shootdown on every core per call (perf: smp_call_function_many_cond
        // under decommit_pages), which capped two callers below one.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .async_stack_keep_resident(KEEP_RESIDENT)
        // Without PAGEMAP_SCAN (Linux 6.7+; off by default in wasmtime 48)
        // that reset writes the whole kept-resident region on every call:
        // for a Rust plugin, its 1 MiB stack although a call touches a few
        // pages of it. gdb on the bench showed a 1 MiB and a 56 KiB memset
        // per call, half of all samples; with the scan only the pages the
        // call dirtied are written back. Older kernels keep the memset.
        .pagemap_scan(wasmtime::Enabled::Auto)
        // A freed slot goes back to the component it last held before any
        // slot never used is taken: the slots a server has ever used are
        // as many as its instances at once, not (wasmtime's default) up to
        // a hundred more, each still holding the pages its last call
        // touched. Thirty Python sources loaded one after another had left
        // about a dozen slots of 4-15 MiB each.
        .max_unused_warm_slots(0);
    pool
}
