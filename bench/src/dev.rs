//! Section 9 of the harness: edit to live with `toolhost dev`. A project
//! from `toolhost new` is served by `toolhost dev`; each sample rewrites
//! its `src/lib.rs` (a new greeting) and times from that save to the first
//! REST answer carrying the new greeting: the rebuild, the drop and the
//! reload together, as an attendee sees them.
//!
//! The project's dependencies build into `--scaffold-target` (the tests'
//! `target/scaffold` by default), so only the first run pays for them.

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::options::BenchOptions;
use super::probes::{percentile, toolhost_binary};
use super::report::Report;
use super::wire::send_call;

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("dev");
    std::fs::create_dir_all(&dir)?;
    let created = Command::new(toolhost_binary())
        .args(["new", "edit_live", "--path"])
        .arg(&dir)
        .output()?;
    anyhow::ensure!(created.status.success(), "toolhost new failed: {created:?}");
    let project = dir.join("edit_live");
    let address: SocketAddr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?
    };
    let mut dev = Command::new(toolhost_binary())
        .arg("dev")
        .arg(&project)
        .arg("--listen")
        .arg(address.to_string())
        .arg("--plugins")
        .arg(dir.join("served"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .env(
            "CARGO_TARGET_DIR",
            std::path::absolute(&options.scaffold_target)?,
        )
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let outcome = samples(options, &project, address);
    let _ = dev.kill();
    let _ = dev.wait();
    let samples = outcome?;
    let (p50, max) = (
        percentile(&samples, 50.0),
        samples.iter().copied().fold(0.0, f64::max),
    );
    report.record(
        "dev",
        "edit to live p50 / max s (small Rust tool)",
        json!([p50, max]),
        format!("{p50:.2} / {max:.2}"),
    );
    Ok(())
}

fn samples(
    options: &BenchOptions,
    project: &Path,
    address: SocketAddr,
) -> anyhow::Result<Vec<f64>> {
    // The first build may compile every dependency.
    wait_for(address, "Hello, x!", Duration::from_secs(1200))?;
    let edits = if options.quick { 2 } else { 7 };
    let source = std::fs::read_to_string(project.join("src/lib.rs"))?;
    let mut samples = Vec::new();
    for edit in 0..edits {
        let greeting = format!("Hello {edit}, {{}}!");
        let edited = source.replace("Hello, {}!", &greeting);
        anyhow::ensure!(edited != source, "the scaffold's greeting changed");
        let temp = project.join("src/.lib.rs.tmp");
        std::fs::write(&temp, edited)?;
        let saved = Instant::now();
        std::fs::rename(&temp, project.join("src/lib.rs"))?;
        wait_for(
            address,
            &format!("Hello {edit}, x!"),
            Duration::from_secs(120),
        )?;
        samples.push(saved.elapsed().as_secs_f64());
        // Let the watcher settle before the next save.
        std::thread::sleep(Duration::from_millis(300));
    }
    Ok(samples)
}

/// Waits until `POST /tools/edit_live {"name":"x"}` answers with `needle`.
fn wait_for(address: SocketAddr, needle: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if call(address).is_some_and(|body| body.contains(needle)) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    anyhow::bail!("toolhost dev did not serve {needle:?} within {within:?}")
}

fn call(address: SocketAddr) -> Option<String> {
    let mut answer = String::new();
    send_call(address, "edit_live", r#"{"name":"x"}"#)?
        .read_to_string(&mut answer)
        .ok()?;
    Some(answer)
}
