//! Section 4 of the harness: hot reload, from `rename()` of a new `.wasm`
//! into the folder to its tool's first successful call, uncached and with a
//! warm compile cache; the debounce window is reported apart.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::benchtool::{patched, tool_name};
use super::options::BenchOptions;
use super::probes::DEBOUNCE_MS;
use super::probes::{Spawned, percentile};
use super::report::Report;
use super::wire::{call_status, wait_until};

/// Section 4: hot reload, uncached and with a warm compile cache.
pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    benchtool: &[u8],
    report: &mut Report,
) -> anyhow::Result<()> {
    let drops = if options.quick { 3 } else { 20 };
    let (uncached, warm) = drops_timed(work, benchtool, drops)?;
    for (name, samples) in [("uncached", uncached), ("warm cache", warm)] {
        let (p50, p95) = (percentile(&samples, 50.0), percentile(&samples, 95.0));
        report.record(
            "reload",
            &format!("{name} p50/p95 ms"),
            json!([p50, p95]),
            format!("{p50:.1} / {p95:.1}"),
        );
        report.record(
            "reload",
            &format!("{name} p50 after debounce ms"),
            json!(p50 - DEBOUNCE_MS as f64),
            format!("{:.1}", p50 - DEBOUNCE_MS as f64),
        );
    }
    report.record(
        "reload",
        "debounce window ms",
        json!(DEBOUNCE_MS),
        DEBOUNCE_MS.to_string(),
    );
    Ok(())
}

/// Section 4: each drop is a patched copy with tools of its own. Uncached
/// drops are new bytes; warm drops re-drop earlier bytes after removing them.
fn drops_timed(
    work: &Path,
    benchtool: &[u8],
    drops: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let dir = work.join("reload");
    std::fs::create_dir_all(&dir)?;
    let server = Spawned::serve(&dir, &work.join("cache-reload"), &[])?;
    let mut uncached = Vec::new();
    let mut warm = Vec::new();
    for index in 0..drops {
        let bytes = patched(benchtool, 1000 + index)?;
        let name = format!("drop{index}.wasm");
        uncached.push(drop_and_time(&server, &dir, &name, &bytes, 1000 + index)?);
        std::fs::remove_file(dir.join(&name))?;
        wait_until(|| call_status(server.address, &tool_name(1000 + index)) == Some(404))?;
        warm.push(drop_and_time(&server, &dir, &name, &bytes, 1000 + index)?);
        std::fs::remove_file(dir.join(&name))?;
        wait_until(|| call_status(server.address, &tool_name(1000 + index)) == Some(404))?;
    }
    Ok((uncached, warm))
}

fn drop_and_time(
    server: &Spawned,
    dir: &Path,
    name: &str,
    bytes: &[u8],
    index: usize,
) -> anyhow::Result<f64> {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes)?;
    let started = Instant::now();
    std::fs::rename(&temp, dir.join(name))?;
    wait_until(|| call_status(server.address, &tool_name(index)) == Some(200))?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}
