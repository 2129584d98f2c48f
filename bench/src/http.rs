//! Sections 2 and 3 of the harness: REST `POST /tools/echo` under wrk
//! beside a bare axum handler doing the same JSON echo (`toolhost-bench
//! baseline`, also here), and MCP `tools/call` beside REST.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::options::BenchOptions;
use crate::probes::{Spawned, percentile, wrk, wrk_echo, wrk_with};
use crate::report::Report;

/// Sections 2 and 3: REST beside a bare axum echo, and MCP beside REST.
pub(crate) fn section(
    options: &BenchOptions,
    work: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let echo_dir = work.join("echo");
    std::fs::create_dir_all(&echo_dir)?;
    std::fs::copy(&options.echo, echo_dir.join("echo.wasm"))?;
    let server = Spawned::serve(&echo_dir, &work.join("cache-echo"), &[])?;
    // The same echo on a server whose policy opts in to instance reuse
    // (`reuse_instance`), measured at c=16 beside the default.
    let reuse_dir = work.join("echo-reuse");
    std::fs::create_dir_all(&reuse_dir)?;
    std::fs::copy(&options.echo, reuse_dir.join("echo.wasm"))?;
    std::fs::write(
        reuse_dir.join("echo.toml"),
        "[limits]\nreuse_instance = 1000\n",
    )?;
    let reusing = Spawned::serve(&reuse_dir, &work.join("cache-echo"), &[])?;
    let baseline = Spawned::start(Command::new(std::env::current_exe()?).args(["baseline"]))?;
    let rest_body = r#"{"text":"hello"}"#;
    let mcp_body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}"#;
    for connections in [1, 16, 64] {
        let rest = wrk(
            work,
            server.child.id(),
            server.address,
            "POST",
            "/tools/echo",
            rest_body,
            connections,
            duration,
        )?;
        let bare = wrk(
            work,
            baseline.child.id(),
            baseline.address,
            "POST",
            "/echo",
            rest_body,
            connections,
            duration,
        )?;
        let mcp = wrk(
            work,
            server.child.id(),
            server.address,
            "POST",
            "/mcp",
            mcp_body,
            connections,
            duration,
        )?;
        let label = format!("c={connections}");
        report.load("REST", &label, &rest);
        report.requests_per_second("baseline axum", &label, &bare);
        let to_baseline = format!("{label} ratio to baseline");
        report.ratio("REST", &to_baseline, rest.rps / bare.rps);
        if connections == 16 {
            let reused = wrk(
                work,
                reusing.child.id(),
                reusing.address,
                "POST",
                "/tools/echo",
                rest_body,
                connections,
                duration,
            )?;
            // The stateless 2026-07-28 revision's call (SEP-2243 headers,
            // `_meta`), and the plain one-shot answered by rmcp's
            // per-request service (a media-type parameter in `Accept`
            // sends it there), for the fast path's share.
            let modern = wrk_with(
                work,
                server.child.id(),
                server.address,
                ("POST", "/mcp", MODERN_CALL),
                &[
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "echo"),
                ],
                connections,
                duration,
            )?;
            report.load("MCP, stateless 2026-07-28", &label, &modern);
            report.ratio(
                "MCP, stateless 2026-07-28",
                &format!("{label} ratio to REST"),
                modern.rps / rest.rps,
            );
            alternating(work, &server, duration, report)?;
            let through_rmcp = wrk_with(
                work,
                server.child.id(),
                server.address,
                ("POST", "/mcp", mcp_body),
                &[("Accept", "application/json, text/event-stream;q=1")],
                connections,
                duration,
            )?;
            report.load("MCP, one-shot through rmcp", &label, &through_rmcp);
            report.ratio(
                "MCP, one-shot through rmcp",
                &format!("{label} ratio to REST"),
                through_rmcp.rps / rest.rps,
            );
            if let Some((wasmtime, echo)) = &options.wasmtime_serve {
                wasmtime_serve(work, wasmtime, echo, &rest, duration, report)?;
            }
            let section = "REST, reuse_instance = 1000";
            report.load(section, &label, &reused);
            report.ratio(section, &to_baseline, reused.rps / bare.rps);
            report.record(
                section,
                &format!("{label} server CPU us/request"),
                json!(reused.server_cpu_us),
                format!("{:.0}", reused.server_cpu_us),
            );
        }
        report.load("MCP", &label, &mcp);
        let to_rest = format!("{label} ratio to REST");
        report.ratio("MCP", &to_rest, mcp.rps / rest.rps);
        // Where a ratio falls short, this says whose CPU time it went to.
        report.record(
            "server CPU",
            &format!("{label} us/request axum / REST / MCP"),
            json!([bare.server_cpu_us, rest.server_cpu_us, mcp.server_cpu_us]),
            format!(
                "{:.0} / {:.0} / {:.0}",
                bare.server_cpu_us, rest.server_cpu_us, mcp.server_cpu_us
            ),
        );
    }
    Ok(())
}

/// How many REST and MCP rounds [`alternating`] takes, each pair in
/// turn's order.
const ALTERNATING_PAIRS: usize = 5;

/// The stateless MCP call beside REST on one server, in rounds that
/// alternate (REST then MCP, then MCP then REST, ...): the median of each
/// pair's ratio, and of the server CPU per request MCP adds. One round of
/// each drifts with the machine (the same build measured 0.70 and 0.94
/// within the hour); pairs taken together see the same machine.
fn alternating(
    work: &Path,
    server: &Spawned,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let (mut ratios, mut added) = (Vec::new(), Vec::new());
    for pair in 0..ALTERNATING_PAIRS {
        let rest = || wrk_echo(work, server, "/tools/echo", duration);
        let mcp = || {
            wrk_with(
                work,
                server.child.id(),
                server.address,
                ("POST", "/mcp", MODERN_CALL),
                &headers,
                16,
                duration,
            )
        };
        let (rest, mcp) = if pair % 2 == 0 {
            let rest = rest()?;
            (rest, mcp()?)
        } else {
            let mcp = mcp()?;
            (rest()?, mcp)
        };
        ratios.push(mcp.rps / rest.rps);
        added.push(mcp.server_cpu_us - rest.server_cpu_us);
    }
    let section = "MCP, stateless 2026-07-28";
    report.ratio(
        section,
        &format!("c=16 ratio to REST, median of {ALTERNATING_PAIRS} alternating pairs"),
        percentile(&ratios, 50.0),
    );
    let added = percentile(&added, 50.0);
    report.record(
        section,
        &format!("c=16 server CPU us/request over REST, median of {ALTERNATING_PAIRS} pairs"),
        json!(added),
        format!("{added:.1}"),
    );
    Ok(())
}

/// `wasmtime serve` with the same JSON echo as a wasi:http component
/// (tests/fixtures/httpecho), a fresh instance per request as toolhost
/// makes, at c=16, with and without its pooling allocator: the better of
/// the two is what REST is held against (at least 3x).
fn wasmtime_serve(
    work: &Path,
    wasmtime: &Path,
    echo: &Path,
    rest: &crate::probes::WrkResult,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let version = Command::new(wasmtime).arg("--version").output()?;
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.split_whitespace().nth(1).unwrap_or("?").to_string();
    let mut runs = Vec::new();
    for pooling in ["n", "y"] {
        let server = Spawned::start_marked(
            Command::new(wasmtime)
                .args(["serve", "--addr", "127.0.0.1:0", "-S", "cli"])
                .arg(format!("-Opooling-allocator={pooling}"))
                .arg(echo),
            "Serving HTTP on http://",
        )?;
        runs.push(wrk_echo(work, &server, "/", duration)?);
    }
    let section = format!("wasmtime serve {version}");
    report.record(
        &section,
        "c=16 req/s default / pooling allocator",
        json!([runs[0].rps, runs[1].rps]),
        format!("{:.0} / {:.0}", runs[0].rps, runs[1].rps),
    );
    report.record(
        &section,
        "c=16 server CPU us/request default / pooling allocator",
        json!([runs[0].server_cpu_us, runs[1].server_cpu_us]),
        format!(
            "{:.0} / {:.0}",
            runs[0].server_cpu_us, runs[1].server_cpu_us
        ),
    );
    let best = runs[0].rps.max(runs[1].rps);
    report.record(
        &section,
        "REST c=16 ÷ its better, x",
        json!(rest.rps / best),
        format!("{:.2}", rest.rps / best),
    );
    Ok(())
}

/// A stateless 2026-07-28 `tools/call`: its version and the client's
/// capabilities in `_meta`.
const MODERN_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

pub(crate) async fn baseline() -> anyhow::Result<()> {
    async fn echo(axum::Json(arguments): axum::Json<Value>) -> axum::Json<Value> {
        let text = arguments["text"].as_str().unwrap_or_default().to_string();
        axum::Json(json!({ "content": [{ "type": "text", "text": text }], "isError": false }))
    }
    let app = axum::Router::new().route("/echo", axum::routing::post(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    eprintln!("baseline listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
