//! Section 8 of the harness: `tools/call` p50 on one HTTP session driven
//! by the official TypeScript SDK client, beside one-shot calls from the
//! same process.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::options::BenchOptions;
use crate::probes::Spawned;
use crate::report::Report;

/// Section 8: the TypeScript SDK client's `tools/call` on one session and
/// one-shot, median of each.
pub(crate) fn section(
    options: &BenchOptions,
    work: &Path,
    node: &Path,
    script: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("clients");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let server = Spawned::serve(&dir, &work.join("cache-clients"), &[])?;
    let calls = if options.quick { "20" } else { "500" };
    let output = Command::new(node)
        .arg(script)
        .args(["latency", &format!("http://{}/mcp", server.address), calls])
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "the TypeScript client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let measured: Value = serde_json::from_slice(&output.stdout)?;
    let session = measured["sessionP50Ms"].as_f64().unwrap_or(f64::NAN);
    let one_shot = measured["oneShotP50Ms"].as_f64().unwrap_or(f64::NAN);
    report.record(
        "TypeScript SDK",
        "tools/call p50 ms, session / one-shot",
        json!([session, one_shot]),
        format!("{session:.2} / {one_shot:.2}"),
    );
    report.record(
        "TypeScript SDK",
        "session p50 / one-shot p50",
        json!(session / one_shot),
        format!("{:.2}x", session / one_shot),
    );
    Ok(())
}
