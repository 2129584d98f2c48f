//! Section 7 of the harness: one plugin must not hurt the host or another.
//!
//! - `/health` and echo latency while more calls spin than there are cores
//!   (the `spin` tool of the misbehave fixture), beside the same with none.
//! - An idle server with 50 plugins: bytes read and CPU per minute (it
//!   should read nothing and do nothing).
//! - A large component (`--large`, a componentize-py echo of ~18 MB): the
//!   first call after it is dropped with a cold cache, and resident memory
//!   before, with and after it.
//! - A small plugin's reload while that large component compiles, beside
//!   the same reload alone.
//!
//! Rows that need a fixture that was not given are left out.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::benchtool::{patched, tool_name};
use super::options::BenchOptions;
use super::probes::{Spawned, cpu_seconds, resident_mib, wrk};
use super::report::Report;
use super::wire::{call_status, drop_file, wait_until, wait_until_for};

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    benchtool: &[u8],
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    if let Some(misbehave) = &options.misbehave {
        spinning(options, work, misbehave, duration, report)?;
    }
    idle(options, work, benchtool, report)?;
    if let Some(large) = &options.large {
        let large = std::fs::read(large)?;
        large_component(options, work, &large, report)?;
        reload_beside_compile(work, benchtool, &large, report)?;
    }
    Ok(())
}

/// `/health` and echo p50/p99 (wrk, one connection) with no call running,
/// then with twice as many `spin` calls as cores running to their deadline.
fn spinning(
    options: &BenchOptions,
    work: &Path,
    misbehave: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("spinning");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    std::fs::copy(misbehave, dir.join("misbehave.wasm"))?;
    // The spinners must outlast both measured runs.
    let server = Spawned::serve(&dir, &work.join("cache-spin"), &["--timeout-ms", "60000"])?;
    let pid = server.child.id();
    let echo_body = r#"{"text":"calm"}"#;
    let measure = |report: &mut Report, label: &str| -> anyhow::Result<()> {
        let health = wrk(work, pid, server.address, "GET", "/health", "", 1, duration)?;
        let echo = wrk(
            work,
            pid,
            server.address,
            "POST",
            "/tools/echo",
            echo_body,
            1,
            duration,
        )?;
        report.latency(
            "spinning calls",
            &format!("/health {label} p50/p99 ms"),
            &health,
        );
        report.latency("spinning calls", &format!("echo {label} p50/p99 ms"), &echo);
        Ok(())
    };
    measure(report, "idle")?;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners = 2 * cores;
    let address = server.address;
    let threads: Vec<_> = (0..spinners)
        .map(|_| std::thread::spawn(move || call_status(address, "spin")))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    measure(report, &format!("{spinners} spinning"))?;
    // Killing the server ends the spinners' connections.
    drop(server);
    for thread in threads {
        let _ = thread.join();
    }
    Ok(())
}

/// An idle server with 50 plugins: what it reads and the CPU it uses.
fn idle(
    options: &BenchOptions,
    work: &Path,
    benchtool: &[u8],
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("idle");
    std::fs::create_dir_all(&dir)?;
    for index in 0..50 {
        std::fs::write(
            dir.join(format!("idle{index:02}.wasm")),
            patched(benchtool, 2000 + index)?,
        )?;
    }
    let server = Spawned::serve(&dir, &work.join("cache-idle"), &[])?;
    let pid = server.child.id();
    std::thread::sleep(Duration::from_secs(1));
    let window = Duration::from_secs(if options.quick { 2 } else { 20 });
    let (read_before, cpu_before) = (bytes_read(pid)?, cpu_seconds(pid)?);
    std::thread::sleep(window);
    let (read, cpu) = (
        bytes_read(pid)? - read_before,
        cpu_seconds(pid)? - cpu_before,
    );
    let per_minute = 60.0 / window.as_secs_f64();
    let read_per_minute = read as f64 * per_minute;
    let cpu_percent = 100.0 * cpu / window.as_secs_f64();
    report.record(
        "idle, 50 plugins",
        "bytes read per minute",
        json!(read_per_minute),
        format!("{read_per_minute:.0}"),
    );
    report.record(
        "idle, 50 plugins",
        "CPU %",
        json!(cpu_percent),
        format!("{cpu_percent:.2}"),
    );
    Ok(())
}

/// Bytes a process has read through read(2) and friends (`rchar`).
fn bytes_read(pid: u32) -> anyhow::Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no rchar in /proc/{pid}/io"))
}

/// Drops the large component into a server serving echo, with a cold
/// cache: the first call's latency, and resident memory before, with it
/// loaded, and after it is removed.
fn large_component(
    options: &BenchOptions,
    work: &Path,
    large: &[u8],
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("large");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let server = Spawned::serve(&dir, &work.join("cache-large"), &[])?;
    let pid = server.child.id();
    std::thread::sleep(Duration::from_millis(500));
    let baseline = resident_mib(pid)?;
    let started = Instant::now();
    drop_file(&dir, "large.wasm", large)?;
    wait_until_for(Duration::from_secs(300), || {
        call_status(server.address, "py_echo") == Some(200)
    })?;
    let first_call = started.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(Duration::from_millis(500));
    let loaded = resident_mib(pid)?;
    std::fs::remove_file(dir.join("large.wasm"))?;
    wait_until(|| call_status(server.address, "py_echo") == Some(404))?;
    std::thread::sleep(Duration::from_millis(500));
    let after = resident_mib(pid)?;
    let section = "large component";
    report.record(
        section,
        "size MiB",
        json!(large.len() as f64 / 1048576.0),
        format!("{:.1}", large.len() as f64 / 1048576.0),
    );
    report.record(
        section,
        "drop to first call, cold cache ms",
        json!(first_call),
        format!("{first_call:.0}"),
    );
    report.record(
        section,
        "RSS before / loaded / removed MiB",
        json!([baseline, loaded, after]),
        format!("{baseline:.0} / {loaded:.0} / {after:.0}"),
    );
    report.record(
        section,
        "RSS removed minus before MiB",
        json!(after - baseline),
        format!("{:.0}", after - baseline),
    );
    Ok(())
}

/// A small plugin's drop-to-first-call, alone and while the large
/// component compiles (no cache, so it compiles for its full time).
fn reload_beside_compile(
    work: &Path,
    benchtool: &[u8],
    large: &[u8],
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("beside");
    std::fs::create_dir_all(&dir)?;
    let server = Spawned::serve(&dir, &work.join("cache-beside"), &["--no-cache"])?;
    let small = |index: usize| -> anyhow::Result<f64> {
        let started = Instant::now();
        drop_file(
            &dir,
            &format!("small{index}.wasm"),
            &patched(benchtool, index)?,
        )?;
        wait_until(|| call_status(server.address, &tool_name(index)) == Some(200))?;
        Ok(started.elapsed().as_secs_f64() * 1e3)
    };
    let alone = small(3000)?;
    drop_file(&dir, "large.wasm", large)?;
    // Well into the large compile.
    std::thread::sleep(Duration::from_secs(1));
    let beside = small(3001)?;
    let large_done = call_status(server.address, "py_echo") == Some(200);
    report.record(
        "reload beside a large compile",
        "small plugin alone / during ms",
        json!([alone, beside]),
        format!(
            "{alone:.0} / {beside:.0}{}",
            if large_done {
                " (the large compile had already ended)"
            } else {
                ""
            }
        ),
    );
    Ok(())
}
