//! Section 14 of the harness: big components, called. The componentize-py
//! echo (`--large`) and the componentize-js 0.23 (StarlingMonkey) echo
//! (`--starlingmonkey`) beside the componentize-qjs example (`--javascript`)
//! on one server: REST call p50 over the first 200 calls after each is
//! dropped in (baseline code), the next 200 at a workshop's pace beside the
//! small echo at that pace, and on their optimised code, the server's
//! memory once they are loaded and called, and what stays 3 s after they
//! are deleted, over the same server's echo-only memory before.
//!
//! Unlike section 7's large-component rows (a component never called),
//! these are called, so their optimised code is compiled behind the
//! baseline code first: the case where memory used to stay behind.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::options::BenchOptions;
use super::probes::{Spawned, peak_resident_mib, resident_mib, wrk};
use super::report::Report;
use super::wire::{drop_file, request, wait_until_for};

const SECTION: &str = "big components";

/// One big component: its file, plugin id, tool and a valid body.
struct Big {
    label: &'static str,
    file: PathBuf,
    id: &'static str,
    tool: &'static str,
    body: &'static str,
}

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let echo_body = r#"{"text":"hello"}"#;
    let bigs: Vec<Big> = [
        (
            &options.large,
            "componentize-py",
            "py_echo",
            "py_echo",
            echo_body,
        ),
        (
            &options.starlingmonkey,
            "componentize-js 0.23",
            "sm_echo",
            "sm_echo",
            echo_body,
        ),
        (
            &options.javascript,
            "componentize-qjs",
            "textjs",
            "change_case",
            r#"{"text":"Hello world","to":"snake"}"#,
        ),
    ]
    .into_iter()
    .filter_map(|(file, label, id, tool, body)| {
        Some(Big {
            label,
            file: file.clone()?,
            id,
            tool,
            body,
        })
    })
    .collect();
    if bigs.is_empty() {
        return Ok(());
    }
    let dir = work.join("big");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let server = Spawned::serve(&dir, &work.join("cache-big"), &[])?;
    let pid = server.child.id();
    for _ in 0..200 {
        call(server.address, "echo", r#"{"text":"hello"}"#)?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let before = resident_mib(pid)?;

    for big in &bigs {
        drop_file(
            &dir,
            &format!("{}.wasm", big.id),
            &std::fs::read(&big.file)?,
        )?;
    }
    for big in &bigs {
        wait_until_for(Duration::from_secs(300), || {
            plugin(server.address, big.id).is_ok_and(|plugin| plugin["state"] == "loaded")
        })?;
        let size = std::fs::metadata(&big.file)?.len() as f64 / (1024.0 * 1024.0);
        report.record(
            SECTION,
            &format!("{} size MiB", big.label),
            json!(size),
            format!("{size:.1}"),
        );
    }
    // Each called 200 times, one call right after the other, as soon as it
    // is loaded: what a workshop's attendee gets, before optimised code
    // exists (the first call queues it). Each call gets a fresh instance;
    // a large plugin's is made ahead when the calls leave time for it
    // (runtime/warm.rs).
    let calls = if options.quick { 20 } else { 200 };
    for big in &bigs {
        let paced = paced_calls(server.address, big.tool, big.body, calls, Duration::ZERO)?;
        report.record(
            SECTION,
            &format!(
                "{} first {calls} calls after the drop, p50/p95 ms",
                big.label
            ),
            json!([paced.p50, paced.p95]),
            format!("{:.2} / {:.2}", paced.p50, paced.p95),
        );
    }
    // The next calls at a workshop's pace (10 ms apart: faster than any
    // person): each finds its spare made and warmed (runtime/warm.rs). The
    // echo at the same pace is this machine's floor for any call so paced
    // (a thread woken for each request).
    let pace = Duration::from_millis(10);
    for big in &bigs {
        let paced = paced_calls(server.address, big.tool, big.body, calls, pace)?;
        report.record(
            SECTION,
            &format!(
                "{} next {calls} calls 10 ms apart, p50/p95 ms (calls on a spare, on baseline code)",
                big.label
            ),
            json!([paced.p50, paced.p95, paced.warm, paced.baseline]),
            format!(
                "{:.2} / {:.2} ({}, {})",
                paced.p50, paced.p95, paced.warm, paced.baseline
            ),
        );
    }
    let floor = paced_calls(server.address, "echo", echo_body, calls, pace)?;
    report.record(
        SECTION,
        &format!("the 171 KiB echo, {calls} calls 10 ms apart, p50/p95 ms (the pace's floor)"),
        json!([floor.p50, floor.p95]),
        format!("{:.2} / {:.2}", floor.p50, floor.p95),
    );
    // Measured on the optimised code (the quick mode, on a debug build,
    // does not wait for it).
    for big in bigs.iter().filter(|_| !options.quick) {
        let optimised = wait_until_for(Duration::from_secs(600), || {
            plugin(server.address, big.id).is_ok_and(|plugin| plugin["compiler"] == "optimized")
        });
        anyhow::ensure!(optimised.is_ok(), "{} was never optimised", big.id);
    }
    for big in &bigs {
        let run = wrk(
            work,
            pid,
            server.address,
            "POST",
            &format!("/tools/{}", big.tool),
            big.body,
            1,
            duration,
        )?;
        report.latency(
            SECTION,
            &format!("{} REST call p50/p99 ms", big.label),
            &run,
        );
    }
    let loaded = resident_mib(pid)?;
    let peak = peak_resident_mib(pid)?;
    report.record(
        SECTION,
        "RSS with all loaded and called, MiB (peak)",
        json!([loaded, peak]),
        format!("{loaded:.0} ({peak:.0})"),
    );
    for big in &bigs {
        std::fs::remove_file(dir.join(format!("{}.wasm", big.id)))?;
    }
    for big in &bigs {
        wait_until_for(Duration::from_secs(30), || {
            plugin(server.address, big.id).is_err()
        })?;
    }
    std::thread::sleep(Duration::from_secs(3));
    let after = resident_mib(pid)?;
    report.record(
        SECTION,
        "RSS 3 s after deleting them over echo-only before, MiB",
        json!([before, after, after - before]),
        format!("{before:.0} -> {after:.0} ({:+.0})", after - before),
    );
    Ok(())
}

/// `calls` REST calls of `tool`, each `pace` after the last answer.
struct Paced {
    p50: f64,
    p95: f64,
    /// Calls whose instance was made ahead (`meta.warm`).
    warm: usize,
    /// Calls that ran baseline code (`meta.code`).
    baseline: usize,
}

fn paced_calls(
    address: SocketAddr,
    tool: &str,
    body: &str,
    calls: usize,
    pace: Duration,
) -> anyhow::Result<Paced> {
    let (mut took, mut warm, mut baseline) = (Vec::with_capacity(calls), 0, 0);
    for _ in 0..calls {
        std::thread::sleep(pace);
        let started = std::time::Instant::now();
        let (status, answer) = request(address, "POST", &format!("/tools/{tool}"), body)?;
        took.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(status == 200, "{tool} answered {status}: {answer}");
        let meta = serde_json::from_str::<Value>(&answer)?["meta"].take();
        warm += usize::from(meta["warm"] == true);
        baseline += usize::from(meta["code"] == "baseline");
    }
    took.sort_by(f64::total_cmp);
    Ok(Paced {
        p50: took[calls / 2],
        p95: took[calls * 95 / 100],
        warm,
        baseline,
    })
}

/// One REST call that must succeed.
fn call(address: SocketAddr, tool: &str, body: &str) -> anyhow::Result<()> {
    let (status, answer) = request(address, "POST", &format!("/tools/{tool}"), body)?;
    anyhow::ensure!(status == 200, "{tool} answered {status}: {answer}");
    Ok(())
}

/// `/plugins`' entry for `id`; an error when there is none.
fn plugin(address: SocketAddr, id: &str) -> anyhow::Result<Value> {
    let (_, body) = request(address, "GET", "/plugins", "")?;
    let report: Value = serde_json::from_str(&body)?;
    report["plugins"]
        .as_array()
        .and_then(|plugins| plugins.iter().find(|plugin| plugin["id"] == id))
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no plugin {id}"))
}
