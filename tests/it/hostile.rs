//! One plugin never hurts the host or another plugin: spinning calls beyond
//! the core count, components with many memories or instances, tool lists
//! and errors far too large, definitions with hidden text, damaged cache
//! entries, slow compiles, files written slowly, a full file table. Each
//! case asserts its own outcome and that a bystander plugin (`echo`) keeps
//! answering with zero failures.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::components::{
    plugin_slow_to_compile, plugin_with_a_huge_function, plugin_with_extra_instances, write_plugin,
};
use crate::support::{Bystander, Server, assert_envelope, drop_in, example, fixture, plugin_dir};
use serde_json::json;
use toolhost::registry::report::PluginState;
use toolhost::runtime::Tier;

fn reason_of(server: &Server, id: &str) -> String {
    server.plugin(id).unwrap().reason.unwrap_or_default()
}

fn wait_for_state(server: &Server, id: &str, state: PluginState) {
    server.wait_for(&format!("{id} to be {}", state.as_str()), |s| {
        s.plugin(id).is_some_and(|p| p.state == state)
    });
}

/// Samples `sample` every 100 ms until two samples in a row are within
/// `tolerance` of each other (at most 30 s); the last sample.
fn steady(what: &str, tolerance: f64, mut sample: impl FnMut() -> f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = sample();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = sample();
        if (now - last).abs() <= tolerance {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never stood still: {last} then {now}"
        );
        last = now;
    }
}

/// Samples `sample` every 100 ms until `done` holds for a sample (at most
/// 30 s); the last sample, for the test to assert on.
fn sample_until(mut sample: impl FnMut() -> f64, done: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value = sample();
        if done(value) || Instant::now() >= deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Starvation, not speed: with wasm on the async workers, a /health
/// request waited 100-900 ms for the spinners' slices (median 185 ms);
/// normally it takes about 1 ms. A median past this bound means guest code
/// shares threads with the HTTP front again.
const STARVED: Duration = Duration::from_millis(50);

#[test]
fn spinning_calls_beyond_the_cores_do_not_starve_the_front() {
    let dir = plugin_dir(&[&example("echo"), &fixture("misbehave")]);
    // Long enough that every sample below is taken while the spinners run.
    let server = Server::start(dir.path(), &["--timeout-ms", "12000"]);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..2 * cores)
        .map(|_| {
            let base = server.base.clone();
            std::thread::spawn(move || {
                let response = ureq::post(format!("{base}/tools/spin"))
                    .header("Content-Type", "application/json")
                    .config()
                    .http_status_as_error(false)
                    .build()
                    .send("{}")
                    .unwrap();
                response.status().as_u16()
            })
        })
        .collect();
    // Every spinner that can run does (all of them, or every slot) before
    // the first sample.
    let slots = crate::support::gauge(&server, "toolhost_executor_slots", None);
    let spinning = (2 * cores as u64).min(slots);
    server.wait_for("the spinners to run", |s| {
        crate::support::calls_running(s, None) >= spinning
    });
    let (mut health, mut echo) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let started = Instant::now();
        assert_eq!(server.get("/health").status, 200);
        health.push(started.elapsed());
        let started = Instant::now();
        let response = server.call("echo", json!({"text": "calm"}));
        assert_eq!(response.status, 200, "{}", response.json);
        echo.push(started.elapsed());
    }
    for spinner in spinners {
        assert_eq!(
            spinner.join().unwrap(),
            504,
            "each spinner ends at its deadline"
        );
    }
    let (health, echo) = (median(health), median(echo));
    assert!(
        health < STARVED && echo < STARVED,
        "with {} calls spinning, /health took {health:?} and echo {echo:?} (median)",
        2 * cores
    );
}

#[test]
fn one_memory_budget_covers_every_memory_of_a_call() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &["--memory-mib", "32"]);
    let bystander = Bystander::start(&server);
    // Three memories of 12 MiB, each under the 32 MiB cap, 36 MiB together.
    write_plugin(
        &plugin_with_extra_instances(3, 192, true),
        dir.path(),
        "wide.wasm",
    );
    // Three of 8 MiB: 24 MiB together, within it.
    write_plugin(
        &plugin_with_extra_instances(3, 128, true),
        dir.path(),
        "fits.wasm",
    );
    wait_for_state(&server, "wide", PluginState::Rejected);
    assert!(
        reason_of(&server, "wide").contains("memory cap"),
        "{}",
        reason_of(&server, "wide")
    );
    wait_for_state(&server, "fits", PluginState::Loaded);
    let response = server.call("ok", json!({}));
    assert_eq!((response.status, assert_envelope(&response)), (200, None));
    bystander.assert_unharmed();
}

#[test]
fn components_over_the_instance_or_memory_limits_are_rejected_at_load() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &[]);
    let bystander = Bystander::start(&server);
    // 900: under the 1000 instances a component may declare at all.
    write_plugin(
        &plugin_with_extra_instances(900, 1, false),
        dir.path(),
        "swarm.wasm",
    );
    write_plugin(
        &plugin_with_extra_instances(8, 1, false),
        dir.path(),
        "many_memories.wasm",
    );
    wait_for_state(&server, "swarm", PluginState::Rejected);
    wait_for_state(&server, "many_memories", PluginState::Rejected);
    let (swarm, memories) = (
        reason_of(&server, "swarm"),
        reason_of(&server, "many_memories"),
    );
    assert!(swarm.contains("instances"), "{swarm}");
    assert!(memories.contains("memories"), "{memories}");
    bystander.assert_unharmed();
}

#[test]
fn tool_lists_past_the_limits_are_rejected() {
    let dir = plugin_dir(&[&example("echo"), &fixture("manytools")]);
    let server = Server::start(dir.path(), &[]);
    wait_for_state(&server, "manytools", PluginState::Rejected);
    let reason = reason_of(&server, "manytools");
    assert!(
        reason.contains("100000 tools, over the limit of 256"),
        "{reason}"
    );
    assert_eq!(server.tool_names(), ["echo"]);
    // The limits are settable.
    let small = plugin_dir(&[&example("math")]);
    let strict = Server::start(small.path(), &["--max-tools", "2"]);
    wait_for_state(&strict, "math", PluginState::Rejected);
    let lean = Server::start(small.path(), &["--max-tool-list-kib", "1"]);
    wait_for_state(&lean, "math", PluginState::Rejected);
    assert!(reason_of(&lean, "math").contains("bytes, over the limit of 1024"));
}

/// A description deep in a tool's schema that ends in tag characters (an
/// instruction only a model sees) is refused at load, with the code point
/// and where it is; nothing of the plugin serves.
#[test]
fn a_definition_with_hidden_text_is_refused_at_load() {
    let dir = plugin_dir(&[&example("echo"), &fixture("hidden")]);
    let server = Server::start(dir.path(), &[]);
    let bystander = Bystander::start(&server);
    server.wait_for("hidden to be judged", |s| {
        s.plugin("hidden")
            .is_some_and(|p| p.state != PluginState::Compiling)
    });
    let report = server.plugin("hidden").unwrap();
    let reason = report.reason.unwrap_or_default();
    assert_eq!(report.state, PluginState::Rejected, "{reason}");
    assert!(
        reason.contains(
            r#"tool "translate": inputSchema.properties.text.description: U+E0049 (a tag character) at character 23"#
        ),
        "{reason}"
    );
    // The refusal names the text, never repeats it.
    assert!(!reason.contains('\u{E0049}'), "{reason}");
    assert_eq!(server.tool_names(), ["echo"]);
    bystander.assert_unharmed();
}

#[test]
fn every_answer_respects_the_result_limit() {
    let dir = plugin_dir(&[&example("echo"), &fixture("misbehave")]);
    let server = Server::start(dir.path(), &[]);
    let bystander = Bystander::start(&server);
    for tool in ["huge_error", "many_blocks", "big_output"] {
        let response = server.call(tool, json!({}));
        let code = assert_envelope(&response);
        // big_output's 100 MiB string cannot even be built under the cap.
        let expected = if tool == "big_output" {
            "OUT_OF_MEMORY"
        } else {
            "RESULT_TOO_LARGE"
        };
        assert_eq!(
            (response.status, code.as_deref()),
            (500, Some(expected)),
            "{tool}"
        );
        assert!(
            response.json.to_string().len() < 16 * 1024,
            "{tool}: the refusal is small"
        );
    }
    let error = server.call("huge_error", json!({})).json;
    assert_eq!(error["error"]["details"]["pluginCode"], "HUGE");
    bystander.assert_unharmed();
}

#[test]
fn a_damaged_cache_entry_is_deleted_and_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();
    let dir = plugin_dir(&[&example("echo")]);
    // Only the server that meets the damaged entry is a process of its
    // own: the test reads its log.
    let start = |serve: fn(&Path, &[&str]) -> Server| {
        let server = serve(dir.path(), &["--cache-dir", cache_arg]);
        wait_for_state(&server, "echo", PluginState::Loaded);
        server
    };
    drop(start(Server::start));
    // Echo's entry (named by its content hash), not a language runtime's.
    let echo_hash = crate::support::file_hash(&example("echo"));
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "cwasm")
                && p.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with(&echo_hash))
        })
        .expect("echo's cache entry");
    let mut bytes = std::fs::read(&entry).unwrap();
    // Flip bits in the middle of the entry, in its compiled code: wasmtime's
    // own header checks cannot see this.
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 64] {
        *byte ^= 0x5a;
    }
    std::fs::write(&entry, &bytes).unwrap();

    let server = start(Server::process);
    assert_eq!(server.plugin("echo").unwrap().from_cache, Some(false));
    assert!(server.log().contains("discarding damaged cache entry"));
    let response = server.call("echo", json!({"text": "whole"}));
    assert_eq!(response.json["content"][0]["text"], "whole");
    drop(server);
    // The entry was rewritten whole.
    assert_eq!(
        start(Server::start).plugin("echo").unwrap().from_cache,
        Some(true)
    );
}

/// Bytes this process has read through read(2) and friends, all files.
fn bytes_read(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn an_idle_server_reads_nothing() {
    let plugins: Vec<_> = ["echo", "math", "users", "weather", "conformance"]
        .iter()
        .map(|name| example(name))
        .collect();
    let paths: Vec<&Path> = plugins.iter().map(|p| p.as_path()).collect();
    let dir = plugin_dir(&paths);
    let server = Server::process(dir.path(), &[]);
    for id in ["echo", "math", "users", "weather", "conformance"] {
        wait_for_state(&server, id, PluginState::Loaded);
    }
    server.wait_for_runtimes_compiled();
    // Start-up's own reads (the scan, the compile cache, the requests
    // above) are over once the count stands still.
    let before = steady("the bytes read", 0.0, || bytes_read(server.pid()) as f64) as u64;
    // The window is the measure: what an idle server reads in 2 s (a poll
    // of a file every second would show here).
    std::thread::sleep(Duration::from_secs(2));
    let read = bytes_read(server.pid()) - before;
    assert!(read < 16 * 1024, "an idle server read {read} bytes in 2 s");
}

#[test]
fn a_file_is_read_only_once_its_writer_is_done() {
    let dir = plugin_dir(&[]);
    let server = Server::process(dir.path(), &[]);
    let bytes = std::fs::read(example("echo")).unwrap();
    let mut file = std::fs::File::create(dir.path().join("echo.wasm")).unwrap();
    // A slow copy: half, a pause far longer than the debounce, the rest.
    // The pause is the writer under test, not a wait for the server.
    file.write_all(&bytes[..bytes.len() / 2]).unwrap();
    file.flush().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    file.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(file);
    wait_for_state(&server, "echo", PluginState::Loaded);
    assert!(
        !server.log().contains("plugin rejected"),
        "a half-written file was read: {}",
        server.log()
    );
}

#[test]
fn a_full_file_table_keeps_what_serves_and_retries() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::process(dir.path(), &[]);
    wait_for_state(&server, "echo", PluginState::Loaded);
    let pid = server.pid().to_string();
    let prlimit = |limit: usize| {
        let status = std::process::Command::new("prlimit")
            .args(["--pid", &pid, &format!("--nofile={limit}:")])
            .status()
            .expect("prlimit (util-linux)");
        assert!(status.success());
    };
    // No new file descriptor at all: every open fails with EMFILE.
    prlimit(3);
    let variant = crate::support::variant_of(&example("echo"), "fd-limit");
    std::fs::copy(&variant, dir.path().join("echo.wasm")).unwrap();
    server.wait_for("the retry", |s| s.log().contains("retrying"));
    prlimit(4096);
    let hash = crate::support::file_hash(&variant);
    server.wait_for("the new version", |s| {
        s.plugin("echo").unwrap().content_hash.as_deref() == Some(hash.as_str())
    });
    assert!(
        !server.log().contains("plugin rejected"),
        "{}",
        server.log()
    );
}

#[test]
fn a_slow_compile_does_not_hold_up_a_small_reload() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &["--no-cache"]);
    wait_for_state(&server, "echo", PluginState::Loaded);
    write_plugin(&plugin_slow_to_compile(40_000), dir.path(), "large.wasm");
    server.wait_for("the large plugin to compile", |s| {
        s.plugin("large")
            .is_some_and(|p| p.state == PluginState::Compiling)
    });
    let variant = crate::support::variant_of(&example("echo"), "beside-large");
    drop_in(&variant, dir.path(), "echo.wasm");
    let hash = crate::support::file_hash(&variant);
    server.wait_for("the small reload", |s| {
        s.plugin("echo").unwrap().content_hash.as_deref() == Some(hash.as_str())
    });
    let large = server.plugin("large").unwrap();
    assert!(
        large.compiling.is_some(),
        "the small plugin waited for the large one: {large:?}"
    );
    // It compiles for tens of seconds while other tests run beside it.
    server.wait_for_within("the large plugin", Duration::from_secs(180), |s| {
        s.plugin("large")
            .is_some_and(|p| p.state == PluginState::Loaded)
    });
}

#[test]
fn a_granted_directory_that_is_gone_is_a_host_error() {
    let dir = plugin_dir(&[&example("users")]);
    std::fs::create_dir(dir.path().join("users-data")).unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        "[[dirs]]\nhost = \"users-data\"\nguest = \"/data\"\nmode = \"read-write\"\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    wait_for_state(&server, "users", PluginState::Loaded);
    std::fs::remove_dir(dir.path().join("users-data")).unwrap();
    let response = server.call("get_user", json!({"id": 1}));
    assert_eq!(
        (response.status, assert_envelope(&response).as_deref()),
        (500, Some("HOST_ERROR")),
        "{}",
        response.json
    );
}

fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

/// The five mappings of `pid` with the most resident memory, to say what
/// holds it when the memory test fails.
fn largest_mappings(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut mappings: Vec<(u64, String)> = Vec::new();
    let mut header = String::new();
    for line in smaps.lines() {
        if let Some(kib) = line.strip_prefix("Rss:") {
            let kib = kib
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0);
            mappings.push((kib, header.clone()));
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|f| !f.ends_with(':'))
        {
            header = line.to_string();
        }
    }
    mappings.sort_by_key(|m| std::cmp::Reverse(m.0));
    mappings
        .iter()
        .take(5)
        .map(|(kib, header)| format!("{kib:>8} KiB  {header}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Compiling and listing a large component allocates hundreds of MiB on
/// short-lived threads, and the compiler keeps working memory sized by the
/// largest function it has compiled; once the plugin is removed, the host
/// gives all of it back rather than staying at its peak.
/// A server (no compile cache) with `echo`, its resident memory then,
/// and a large plugin (`large`, slow to compile) loaded and called once.
fn server_with_a_large_plugin_called() -> (tempfile::TempDir, Server, f64) {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::process(dir.path(), &["--no-cache"]);
    wait_for_state(&server, "echo", PluginState::Loaded);
    // The runtimes' compile ahead is start-up's work, not this plugin's.
    server.wait_for_runtimes_compiled();
    // Once start-up's allocations are over: the resident memory stands
    // still (within 1 MiB over 100 ms).
    let baseline = steady("the resident memory", 1.0, || resident_mib(server.pid()));
    write_plugin(
        &plugin_with_a_huge_function(200_000),
        dir.path(),
        "large.wasm",
    );
    server.wait_for_within("the large plugin", Duration::from_secs(180), |s| {
        s.plugin("large")
            .is_some_and(|p| p.state == PluginState::Loaded)
    });
    assert_eq!(server.call("ok", json!({})).status, 200);
    (dir, server, baseline)
}

#[test]
fn memory_returns_near_its_baseline_after_a_large_plugin_is_removed() {
    // Served by baseline code first, then, after its first call, by
    // optimised code compiled in the background (runtime/compiler.rs):
    // both compiles' memory must go.
    let (dir, server, baseline) = server_with_a_large_plugin_called();
    server.wait_for_within("its optimised code", Duration::from_secs(180), |s| {
        s.plugin("large")
            .is_some_and(|p| p.state == PluginState::Loaded && p.compiler == Some(Tier::Optimized))
    });
    let loaded = resident_mib(server.pid());
    std::fs::remove_file(dir.path().join("large.wasm")).unwrap();
    server.wait_for("the large plugin to go", |s| s.plugin("large").is_none());
    // Its memory goes on guest threads after it has left /plugins: the
    // assertion below is on the first sample near the baseline, or on the
    // last one after 30 s.
    let after = sample_until(
        || resident_mib(server.pid()),
        |after| after - baseline < 50.0,
    );
    eprintln!(
        "resident memory: {baseline:.0} MiB before, {loaded:.0} MiB loaded, {after:.0} MiB after"
    );
    assert!(
        after - baseline < 50.0,
        "resident memory: {baseline:.0} MiB before, {loaded:.0} MiB loaded, \
         {after:.0} MiB after removal; largest mappings:\n{}",
        largest_mappings(server.pid())
    );
    let response = server.call("echo", json!({"text": "still here"}));
    assert_eq!(response.json["content"][0]["text"], "still here");
}

/// CPU seconds (user + system) the process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks = |field: usize| fields[field - 3].parse::<f64>().unwrap();
    (ticks(14) + ticks(15)) / 100.0
}

/// A large plugin called once and removed before its optimised code is
/// due (runtime/compiler.rs, `SETTLE`) is never optimised: the server
/// spends no compile on it and its memory is back near where it was,
/// instead of a compile running on for a plugin that is gone.
#[test]
fn a_large_plugin_removed_right_after_its_first_call_is_never_optimised() {
    let (dir, server, baseline) = server_with_a_large_plugin_called();
    std::fs::remove_file(dir.path().join("large.wasm")).unwrap();
    server.wait_for("the large plugin to go", |s| s.plugin("large").is_none());
    let cpu_before = cpu_seconds(server.pid());
    // The window is the rule under test: an optimisation would start
    // `SETTLE` (3 s) after the first call and compile for seconds; 5 s of
    // the server's CPU show it.
    std::thread::sleep(Duration::from_secs(5));
    let spent = cpu_seconds(server.pid()) - cpu_before;
    let after = resident_mib(server.pid());
    assert!(
        spent < 0.5,
        "the server spent {spent:.2} s of CPU after the plugin was gone: its optimisation ran"
    );
    assert!(
        after - baseline < 50.0,
        "resident memory: {baseline:.0} MiB before, {after:.0} MiB after removal"
    );
}
