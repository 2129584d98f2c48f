//! Section 13 of the harness: a thousand plugins of ten tools each
//! (10,000 tools; distinct files made from the benchtool fixture), and a
//! thousand MCP sessions opened and closed.
//!
//! Rows, each with its target beside it in bench/README.md:
//! cold start and warm restart to every tool listed, idle memory, `GET
//! /tools` and one MCP `tools/list` page at c=1, the walk through every
//! page, a small plugin dropped beside them until it answers, and the
//! memory a thousand ended sessions leave behind.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::benchtool::patched;
use super::options::BenchOptions;
use super::probes::{Spawned, percentile, resident_mib, wrk, wrk_as};
use super::report::Report;
use super::wire::{
    call_status, drop_file, exchange, request, request_with, wait_until, wait_until_for,
};

const SECTION: &str = "1,000 plugins";

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    benchtool: &[u8],
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let plugins = if options.quick { 10 } else { 1000 };
    let tools = plugins * 10;
    let dir = work.join("scale");
    std::fs::create_dir_all(&dir)?;
    for index in 0..plugins {
        std::fs::write(
            dir.join(format!("p{index:04}.wasm")),
            patched(benchtool, 10_000 + index)?,
        )?;
    }
    let cache = work.join("cache-scale");
    let (cold, server) = start_listed(&dir, &cache, tools)?;
    drop(server);
    let (warm, server) = start_listed(&dir, &cache, tools)?;
    let ms = |elapsed: Duration| elapsed.as_secs_f64() * 1e3;
    report.record(
        SECTION,
        "plugins / tools",
        json!([plugins, tools]),
        format!("{plugins} / {tools}"),
    );
    report.record(
        SECTION,
        "cold start to all listed ms",
        json!(ms(cold)),
        format!("{:.0}", ms(cold)),
    );
    report.record(
        SECTION,
        "warm restart to all listed ms",
        json!(ms(warm)),
        format!("{:.0}", ms(warm)),
    );
    std::thread::sleep(Duration::from_secs(1));
    let rss = resident_mib(server.child.id())?;
    report.record(SECTION, "idle RSS MiB", json!(rss), format!("{rss:.0}"));

    let (_, manifest) = request(server.address, "GET", "/tools", "")?;
    let size_mb = manifest.len() as f64 / 1e6;
    report.record(
        SECTION,
        "GET /tools size MB",
        json!(size_mb),
        format!("{size_mb:.1}"),
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
    report.latency(SECTION, "GET /tools p50/p99 ms", &list);
    let page = wrk(
        work,
        server.child.id(),
        server.address,
        "POST",
        "/mcp",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        1,
        duration,
    )?;
    report.latency(SECTION, "MCP tools/list first page p50/p99 ms", &page);
    let walks: Vec<f64> = (0..if options.quick { 2 } else { 20 })
        .map(|_| {
            walk_pages(server.address, "tools/list", "tools", "", tools)
                .map(|(elapsed, _)| ms(elapsed))
        })
        .collect::<anyhow::Result<_>>()?;
    let (_, pages) = walk_pages(server.address, "tools/list", "tools", "", tools)?;
    report.record(
        SECTION,
        "MCP tools/list, every page (pages) p50 ms",
        json!(percentile(&walks, 50.0)),
        format!("{:.1} ({pages})", percentile(&walks, 50.0)),
    );
    // A small plugin dropped beside them: from the rename into the folder
    // to its first answer (compiled afresh: its first drop), then removed
    // so that the sets below count the thousand alone.
    let echo = std::fs::read(&options.echo)?;
    let dropped = Instant::now();
    drop_file(&dir, "zz-small-echo.wasm", &echo)?;
    wait_until(|| call_status(server.address, "echo") == Some(200))?;
    let callable = ms(dropped.elapsed());
    report.record(
        SECTION,
        "a small plugin dropped beside them, callable after ms",
        json!(callable),
        format!("{callable:.0}"),
    );
    std::fs::remove_file(dir.join("zz-small-echo.wasm"))?;
    wait_until(|| call_status(server.address, "echo") == Some(404))?;
    drop(server);
    tool_sets(work, &dir, &cache, tools, duration, page.p50_ms, report)?;

    sessions(options, work, report)
}

/// Tool sets: the same 10,000 tools served with a tokens
/// file, `tools/list`'s first page asked by a caller who sees every tool
/// and by one whose set is one plugin (10 tools), beside the unfiltered
/// list's p50 (`unfiltered_ms`, no tokens): target within 10 %.
fn tool_sets(
    work: &Path,
    dir: &Path,
    cache: &Path,
    tools: usize,
    duration: &str,
    unfiltered_ms: f64,
    report: &mut Report,
) -> anyhow::Result<()> {
    const ALL: &str = "bench-sees-all-0123456789";
    const TEN: &str = "bench-sees-ten-0123456789";
    let tokens = work.join("scale-tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nname = \"all\"\nsecret = \"{ALL}\"\nrole = \"caller\"\n\
             [[token]]\nname = \"ten\"\nsecret = \"{TEN}\"\nrole = \"caller\"\ntools = [\"p0000\"]\n"
        ),
    )?;
    let (_, server) = start_listed_with(
        dir,
        cache,
        tools,
        &["--tokens", tokens.to_str().unwrap_or_default()],
    )?;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let mut rows = Vec::new();
    for (label, token) in [("every tool", ALL), ("a set of 10", TEN)] {
        let page = wrk_as(
            work,
            server.child.id(),
            server.address,
            ("POST", "/mcp", list),
            Some(token),
            1,
            duration,
        )?;
        rows.push((label, page.p50_ms));
    }
    for (label, p50) in rows {
        let ratio = p50 / unfiltered_ms;
        report.record(
            SECTION,
            &format!("MCP tools/list p50 ms, {label} (× unfiltered)"),
            json!({ "p50_ms": p50, "ratio": ratio }),
            format!("{p50:.2} ({ratio:.2}×)"),
        );
    }
    Ok(())
}
/// Starts a server on `dir` and waits until `/health` counts `tools`.
fn start_listed(dir: &Path, cache: &Path, tools: usize) -> anyhow::Result<(Duration, Spawned)> {
    start_listed_with(dir, cache, tools, &[])
}

/// [`start_listed`] with more `serve` flags.
fn start_listed_with(
    dir: &Path,
    cache: &Path,
    tools: usize,
    extra: &[&str],
) -> anyhow::Result<(Duration, Spawned)> {
    let started = Instant::now();
    let server = Spawned::serve(dir, cache, extra)?;
    wait_until_for(Duration::from_secs(900), || {
        request(server.address, "GET", "/health", "").is_ok_and(|(status, body)| {
            status == 200
                && serde_json::from_str::<Value>(&body).is_ok_and(|health| health["tools"] == tools)
        })
    })?;
    Ok((started.elapsed(), server))
}

/// Lists everything a list `method` (`tools/list`, `skills/list`) holds
/// over MCP one-shot requests with `headers`, following `nextCursor`
/// through the pages' `key`: how long it took and how many pages it made.
pub(super) fn walk_pages(
    address: SocketAddr,
    method: &str,
    key: &str,
    headers: &str,
    expected: usize,
) -> anyhow::Result<(Duration, usize)> {
    let started = Instant::now();
    let (mut cursor, mut listed, mut pages) = (None::<String>, 0, 0);
    loop {
        let params = cursor.map_or(json!({}), |cursor| json!({ "cursor": cursor }));
        let message = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let (status, body) = request_with(address, "POST", "/mcp", &message.to_string(), headers)?;
        anyhow::ensure!(status == 200, "{method} answered {status}: {body}");
        let answer: Value = serde_json::from_str(&body)?;
        listed += answer["result"][key].as_array().map_or(0, Vec::len);
        pages += 1;
        cursor = answer["result"]["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    anyhow::ensure!(
        listed == expected,
        "the pages held {listed} {key}, not {expected}"
    );
    Ok((started.elapsed(), pages))
}

/// The sessions row: RSS after 1,000 MCP sessions were opened (initialize)
/// and ended (DELETE), over RSS after a warm-up of 50, measured 3 s later.
fn sessions(options: &BenchOptions, work: &Path, report: &mut Report) -> anyhow::Result<()> {
    let dir = work.join("sessions");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let server = Spawned::serve(&dir, &work.join("cache-sessions"), &[])?;
    let count = if options.quick { 50 } else { 1000 };
    for _ in 0..50 {
        open_and_end_session(server.address)?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let before = resident_mib(server.child.id())?;
    for _ in 0..count {
        open_and_end_session(server.address)?;
    }
    std::thread::sleep(Duration::from_secs(3));
    let after = resident_mib(server.child.id())?;
    let per_session_kib = (after - before) * 1024.0 / count as f64;
    report.record(
        "MCP sessions",
        "opened and ended",
        json!(count),
        count.to_string(),
    );
    report.record(
        "MCP sessions",
        "RSS growth 3 s after, MiB (KiB per session)",
        json!([after - before, per_session_kib]),
        format!("{:+.1} ({per_session_kib:.1})", after - before),
    );
    Ok(())
}

/// `initialize` without a session (which opens one), the `initialized`
/// notification and a `tools/list` on it, then `DELETE /mcp` with its id.
fn open_and_end_session(address: SocketAddr) -> anyhow::Result<()> {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "toolhost-bench", "version": "1" }
        }
    });
    let answer = exchange(address, "POST", "/mcp", &initialize.to_string(), "")?;
    let id = answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .ok_or_else(|| anyhow::anyhow!("initialize opened no session: {answer}"))?;
    let ended = exchange(
        address,
        "DELETE",
        "/mcp",
        "",
        &format!("Mcp-Session-Id: {id}\r\n"),
    )?;
    anyhow::ensure!(ended.starts_with("HTTP/1.1 2"), "DELETE answered {ended}");
    Ok(())
}
