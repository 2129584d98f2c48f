#!/usr/bin/env python3
"""Server CPU a request by mechanism, from profile.sh's OUT (issue #40).

    bench/profile/mechanisms.py OUT [HZ]

Each sample goes to the nearest frame, from the leaf up, that names a
mechanism below (the first pattern that matches wins); wrappers whose
poll inlines the future they wrap (a span's `Instrumented`, the
executor's `Metered`) are looked through. Kernel frames name nothing, so
a system call counts for the code that made it. Prints a Markdown table.
"""
import collections
import re
import sys

MECHANISMS = [
    ("memory budget (limiter)", r"memory_cap|MemoryCap"),
    ("CPU time clock (accounting)", r"thread_cpu_time|clock_gettime"),
    ("usage and CallMeta (accounting)", r"usage_of|CallMeta|accounting::"),
    ("fuel", r"set_fuel|get_fuel|fuel_async_yield|fuel_"),
    ("deadline (epoch callback)", r"set_deadline|epoch_deadline|new_epoch"),
    ("guest code (echo)", r"^wasm\[|wasm\[\d+\]|\[JIT\]|cwasm"),
    ("pooled memory reset (fresh instance)", r"reset_with_pagemap|decommit|MemoryPool::deallocate|memory_pool|pagemap"),
    ("WASI context and sandbox", r"Sandbox::new|WasiCtx|wasmtime_wasi|sandbox::"),
    ("instantiate (fresh instance)", r"instantiate|InstancePre|Instance::new|allocate_module|InstanceAllocator|trampoline_ptrs|store_invariant"),
    ("store create and drop (fresh instance)", r"Store<.*>::new|StoreOpaque|drop_in_place<wasmtime::runtime::store|Store::drop|deallocate"),
    ("wasmtime: lifting, lowering, calling in", r"wasmtime"),
    ("call span (tracing)", r"tracing"),
    ("ledger", r"ledger::|Calls::settle"),
    ("call slots", r"slots::"),
    ("argument check (JSON Schema)", r"jsonschema|validat"),
    ("envelope and JSON", r"envelope::|render::|serde|json"),
    ("executor (inline slice)", r"executor::"),
    ("registry lookup", r"registry::|arc_swap|visible_tool"),
    ("REST handler", r"front::rest|toolhost::rest::"),
    ("auth guard (Host, Origin, token)", r"guard::|edge::auth"),
    ("outer layer (CORS, linger, finish)", r"edge::outer|cors::|linger::|responses::"),
    ("socket reads and writes (kernel TCP)", r"write_vectored|net::stream.*Read>::read|net::tcp|writev|recvfrom"),
    ("HTTP (hyper, axum, tower)", r"hyper|axum|tower|http::|h11|httparse"),
    ("connection limits and listener", r"listener::|edge::body"),
    ("tokio (scheduler, epoll)", r"tokio|mio"),
]
TRANSPARENT = re.compile(
    r"Instrumented<T> as core::future::future::Future>::poll|Span::in_scope"
    r"|Metered<Fut> as core::future"
)
FRAME = re.compile(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def mechanism(frames):
    for symbol, dso in frames:
        if TRANSPARENT.search(symbol):
            continue
        for name, pattern in MECHANISMS:
            if re.search(pattern, symbol) or (name.startswith("guest") and re.search(pattern, dso)):
                return name
    return "other"


def main():
    out = sys.argv[1]
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 199
    requests = float(open(f"{out}/reqs").read())
    counts = collections.Counter()
    for block in open(f"{out}/script.txt").read().split("\n\n"):
        frames = [m.groups() for m in map(FRAME.match, block.splitlines()) if m]
        if frames:
            counts[mechanism(frames)] += 1
    total = sum(counts.values())
    us = lambda n: n / requests / hz * 1e6
    print(f"{total} samples, {us(total):.1f} µs a request")
    print("| mechanism | µs a request | share |\n| --- | --- | --- |")
    for name, n in counts.most_common():
        print(f"| {name} | {us(n):.1f} | {100 * n / total:.0f} % |")


if __name__ == "__main__":
    main()
