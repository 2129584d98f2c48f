//! Section 1 of the harness: instantiate-and-call of `echo` through the
//! runtime alone, the whole host path (lookup, validate, call, normalize)
//! beside it, and calls per second at 1 and 2 concurrent callers.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::options::BenchOptions;
use super::probes::percentile;
use toolhost::call::envelope::TextFormat;
use toolhost::{Host, HostConfig};

/// Section 1: timings of the runtime alone and of the whole host path.
pub(super) async fn measure(options: &BenchOptions, work: &Path) -> anyhow::Result<Value> {
    let dir = work.join("in-process");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let host = Host::open(HostConfig {
        cache_dir: None,
        watch: None,
        ..HostConfig::new(&dir)
    })
    .await?;
    let registry = host.registry();
    let entry = host
        .snapshot()
        .tool("echo")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("echo did not load"))?;
    let arguments = json!({ "text": "hello" });
    let calls = if options.quick { 200 } else { 5000 };

    let mut bare = Vec::with_capacity(calls);
    let mut full = Vec::with_capacity(calls);
    for round in 0..2 * calls {
        let started = Instant::now();
        let run = registry
            .runtime()
            .call_tool(
                &entry.plugin.compiled,
                &entry.plugin.grants,
                "echo",
                arguments.to_string(),
                None,
            )
            .await;
        let bare_us = started.elapsed().as_secs_f64() * 1e6;
        anyhow::ensure!(matches!(run.outcome, Ok(Ok(_))), "bare call failed");
        let started = Instant::now();
        let envelope = host
            .call(
                "echo",
                arguments.as_object().cloned().unwrap_or_default(),
                TextFormat::Json,
            )
            .await;
        let full_us = started.elapsed().as_secs_f64() * 1e6;
        anyhow::ensure!(!envelope.is_error, "host call failed");
        if round >= calls {
            bare.push(bare_us);
            full.push(full_us);
        }
    }
    let span = Duration::from_millis(if options.quick { 300 } else { 3000 });
    let one = throughput(&host, 1, span).await;
    let two = throughput(&host, 2, span).await;
    // This VM's speed drifts by tens of percent over seconds (a plain
    // Python loop varies 0.31-0.51 s run to run), so the p50 of the
    // quietest tenth of the calls is shown beside the p50 of all of them:
    // it is the closer estimate of what a call itself costs.
    let quietest = |samples: &[f64]| {
        samples
            .chunks(samples.len().div_ceil(10).max(1))
            .map(|round| percentile(round, 50.0))
            .fold(f64::INFINITY, f64::min)
    };
    Ok(json!({
        "instantiate+call p50 us": percentile(&bare, 50.0),
        "instantiate+call p50 us, quietest tenth": quietest(&bare),
        "instantiate+call p99 us": percentile(&bare, 99.0),
        "host path p50 us": percentile(&full, 50.0),
        "host path p99 us": percentile(&full, 99.0),
        "host overhead p50 us": percentile(&full, 50.0) - percentile(&bare, 50.0),
        "calls/s, 1 caller": one,
        "calls/s, 2 callers": two,
        "scaling 2 callers / 1": two / one,
    }))
}

async fn throughput(host: &Host, callers: usize, span: Duration) -> f64 {
    let deadline = Instant::now() + span;
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move {
                let mut count = 0u64;
                while Instant::now() < deadline {
                    let arguments = json!({ "text": "hello" })
                        .as_object()
                        .cloned()
                        .unwrap_or_default();
                    host.call("echo", arguments, TextFormat::Json).await;
                    count += 1;
                }
                count
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap_or(0);
    }
    total as f64 / span.as_secs_f64()
}
