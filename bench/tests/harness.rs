//! The benchmark harness (`toolhost-bench`) runs end to end in its short
//! mode against the real `toolhost` binary. Only that it works is checked:
//! numbers belong to `make bench`. Needs `wrk`; `make bench-check` runs it.

#[path = "../../tests/it/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{example, fixture, toolhost_bin};

/// The benchmark harness runs end to end in its short mode and writes its
/// report. Only that it works is checked: numbers belong to `make bench`.
#[test]
fn the_benchmark_harness_runs_in_quick_mode() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let modules = support::node_modules();
    let script = modules.parent().unwrap().join("ts_client.mjs");
    std::fs::copy(
        support::repo_root().join("tests/clients/ts_client.mjs"),
        &script,
    )
    .unwrap();
    let (misbehave, node) = (fixture("misbehave"), support::node22());
    let (python, javascript) = (
        support::repo_root().join("plugins/textpy.wasm"),
        support::repo_root().join("plugins/textjs.wasm"),
    );
    let extra = [
        "--python",
        python.to_str().unwrap(),
        "--javascript",
        javascript.to_str().unwrap(),
        "--misbehave",
        misbehave.to_str().unwrap(),
        "--node",
        node.to_str().unwrap(),
        "--ts-client",
        script.to_str().unwrap(),
    ];
    let table = run_bench(&fixture("benchtool"), out.path(), &extra);
    assert!(
        table.contains("| REST | c=16 ratio to baseline |"),
        "{table}"
    );
    assert!(
        table.contains("| sources | Python source → first call p50 ms: runtime / full build |")
            && table.contains(
                "| sources | JavaScript source → first call p50 ms: runtime / full build |"
            )
            && table.contains("people publish at once, last live s")
            && table.contains("toolhost dev word_count.py, no toolchain"),
        "{table}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path()).unwrap()).unwrap();
    for key in [
        "in-process: instantiate+call p50 us",
        "MCP: c=16 ratio to REST",
        "reload: warm cache p50/p95 ms",
        "start-up: 100 plugins, warm cache ms",
        "1000 tools: GET /tools p50/p99 ms",
        "idle, 50 plugins: bytes read per minute",
        "idle, 50 plugins: CPU %",
        "TypeScript SDK: tools/call p50 ms, session / one-shot",
        "dev: edit to live p50 / max s (small Rust tool)",
        "languages: Python: first call after drop, cold cache s",
        "languages: JS: call in process p50/p99 us",
        "workshop: /health and echo calls failed meanwhile",
        "REST, reuse_instance = 1000: c=16 ratio to baseline",
        "big components: componentize-qjs REST call p50/p99 ms",
        "big components: componentize-qjs next 20 calls 10 ms apart, p50/p95 ms (calls on a spare, on baseline code)",
        "big components: the 171 KiB echo, 20 calls 10 ms apart, p50/p95 ms (the pace's floor)",
        "big components: RSS 3 s after deleting them over echo-only before, MiB",
        "1,000 plugins: warm restart to all listed ms",
        "1,000 plugins: GET /tools p50/p99 ms",
        "1,000 plugins: MCP tools/list first page p50/p99 ms",
        "MCP sessions: RSS growth 3 s after, MiB (KiB per session)",
        "replicas: signed re-push to serving, per replica ms (poll_secs = 1)",
        "replicas: REST c=16 req/s: one replica direct / haproxy over 1, 2, 3",
        "replicas: 5 OCI plugins: cold start, empty cache / restart, cache kept ms",
    ] {
        assert!(report.get(key).is_some(), "{key} missing from {report}");
    }
    // Each server's CPU time per request is read from /proc: a real,
    // positive number for all three, not a NaN from a failed parse.
    let cpu = &report["server CPU: c=16 us/request axum / REST / MCP"];
    let values: Vec<f64> = cpu
        .as_array()
        .map(|values| values.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    assert!(
        values.len() == 3 && values.iter().all(|v| *v > 0.0),
        "{cpu}"
    );
}

/// `--only` runs the named sections and no others.
#[test]
fn the_benchmark_harness_runs_only_the_sections_asked_for() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let table = run_bench(
        Path::new("/nonexistent"),
        out.path(),
        &["--only", "in-process"],
    );
    assert!(table.contains("| in-process |"), "{table}");
    assert!(!table.contains("| REST |"), "{table}");
    assert!(!table.contains("| reload |"), "{table}");
}

/// Runs `toolhost-bench run --quick` on the echo example, checks that it
/// succeeded, and returns the table it printed.
fn run_bench(benchtool: &Path, out: &Path, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-bench"))
        .args(["run", "--quick", "--toolhost", toolhost_bin(), "--echo"])
        .arg(example("echo"))
        .arg("--benchtool")
        .arg(benchtool)
        .arg("--out")
        .arg(out)
        .arg("--scaffold-target")
        .arg(support::repo_root().join("target/scaffold"))
        .args(extra)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    table
}
