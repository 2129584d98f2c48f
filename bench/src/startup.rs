//! Sections 5 and 6 of the harness: start-up with 100 plugins (1000
//! tools), cold and warm cache, resident memory at idle; `GET /tools` and
//! MCP `tools/list` latency with those 1000 tools.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::benchtool::patched;
use crate::probes::{Spawned, resident_mib, wrk};
use crate::report::Report;

/// Sections 5 and 6: start-up with 100 plugins, and listing 1000 tools.
pub(crate) fn section(
    work: &Path,
    benchtool: &[u8],
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let many = work.join("many");
    std::fs::create_dir_all(&many)?;
    for index in 0..100 {
        std::fs::write(
            many.join(format!("tool{index:03}.wasm")),
            patched(benchtool, index)?,
        )?;
    }
    let cache = work.join("cache-many");
    let cold = Instant::now();
    drop(Spawned::serve(&many, &cache, &[])?);
    let cold = cold.elapsed();
    let warm = Instant::now();
    let server = Spawned::serve(&many, &cache, &[])?;
    let warm = warm.elapsed();
    report.record(
        "start-up",
        "100 plugins, cold cache ms",
        json!(cold.as_secs_f64() * 1e3),
        format!("{:.0}", cold.as_secs_f64() * 1e3),
    );
    report.record(
        "start-up",
        "100 plugins, warm cache ms",
        json!(warm.as_secs_f64() * 1e3),
        format!("{:.0}", warm.as_secs_f64() * 1e3),
    );
    std::thread::sleep(Duration::from_millis(500));
    let rss = resident_mib(server.child.id())?;
    report.record(
        "start-up",
        "resident memory at idle MiB",
        json!(rss),
        format!("{rss:.0}"),
    );
    let list = wrk(
        work,
        server.child.id(),
        server.address,
        "GET",
        "/tools",
        "",
        1,
        duration,
    )?;
    let mcp_list = wrk(
        work,
        server.child.id(),
        server.address,
        "POST",
        "/mcp",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        1,
        duration,
    )?;
    report.latency("1000 tools", "GET /tools p50/p99 ms", &list);
    report.latency("1000 tools", "MCP tools/list p50/p99 ms", &mcp_list);
    drop(server);
    Ok(())
}
