//! `toolhost-bench`: the benchmark harness behind `make bench`, a crate of
//! its own so that none of it ships in the `toolhost` binary. It measures
//! the host beside baselines in the same run (these machines are noisy, so
//! only side-by-side numbers count), prints one table and writes it as JSON.
//!
//! 1. In process: a bare instantiate-and-call of `echo` through the runtime,
//!    and the whole host path (lookup, validate, call, normalize); calls/s at
//!    1 and 2 concurrent callers (no global lock: 2 should be near 2x).
//! 2. REST `POST /tools/echo` under wrk at concurrency 1, 16, 64, beside a
//!    bare axum handler doing the same JSON echo (`toolhost-bench baseline`).
//! 3. MCP `tools/call` over Streamable HTTP (one-shot JSON), beside REST.
//! 4. Hot reload: `rename()` into the folder to the first successful call,
//!    uncached and with a warm compile cache; the debounce window apart.
//! 5. Start-up with 100 plugins (1000 tools), cold and warm cache; resident
//!    memory at idle.
//! 6. `GET /tools` and MCP `tools/list` latency with those 1000 tools.
//! 7. Hardening: latency while calls spin, an idle server's reads and CPU,
//!    memory around a large component, a reload beside a large compile.
//! 8. Clients: `tools/call` p50 on one HTTP session driven by the official
//!    TypeScript SDK client, beside one-shot calls from the same process.
//! 9. Dev: `toolhost dev` on a `toolhost new` project, from a save to the
//!    new behaviour answering over REST.
//! 10. Languages: Rust, Python and JavaScript side by side: size, rebuild,
//!     cold compile, first call after a drop (cold and warm cache), the
//!     optimised code taking over, a call in process, memory.
//! 11. Workshop: publishing over HTTP to tools live (Rust, JavaScript), and
//!     `/health` beside 2,000 idle connections.
//! 12. Operations: REST echo req/s by default, with `/metrics` scraped, and
//!     with every call's trace exported by OTLP, side by side.
//! 13. Scale: 1,000 plugins (10,000 tools): restart, memory, `GET /tools`
//!     and `tools/list` pages; 1,000 MCP sessions opened and ended.
//! 14. Big components called: componentize-py, componentize-js 0.23
//!     (StarlingMonkey) and componentize-qjs; call p50, memory loaded and
//!     after deleting them.
//!
//! It runs the real `toolhost` binary for every server (in-process rows use
//! the library), and needs `wrk` on the PATH.
//! `--quick` shortens every phase, for the test that proves it works.

mod big;
mod dev;
mod hardening;
mod in_process;
mod languages;
mod operations;
mod probes;
mod reload;
mod replicas;
mod scale;
mod workshop;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use self::probes::{Spawned, WrkResult, machine, resident_mib, tempfile_dir, wrk};

/// The marker `tests/fixtures/benchtool` names its tools from.
const BENCHTOOL_MARKER: &[u8] = b"BENCHTOOL_PREFIX_0000000";
const DEBOUNCE_MS: u64 = 50;

struct BenchOptions {
    echo: PathBuf,
    benchtool: PathBuf,
    /// The misbehave fixture, for its `spin` tool; without it the
    /// spinning rows are left out.
    misbehave: Option<PathBuf>,
    /// A large component of another language with a `py_echo` tool; without
    /// it the large-component rows are left out.
    large: Option<PathBuf>,
    /// The componentize-js (StarlingMonkey) echo with an `sm_echo` tool
    /// (tests/fixtures/starlingmonkey); without it its big-component rows
    /// are left out.
    starlingmonkey: Option<PathBuf>,
    /// The Python and JavaScript examples (plugins/textpy, plugins/textjs);
    /// without them the languages section is left out.
    python: Option<PathBuf>,
    javascript: Option<PathBuf>,
    /// `tests/clients/ts_client.mjs` beside an installed TypeScript SDK, and
    /// the Node that runs it; without them the clients row is left out.
    ts_client: Option<(PathBuf, PathBuf)>,
    out: PathBuf,
    quick: bool,
    /// Where the `toolhost dev` project's dependencies are built.
    scaffold_target: PathBuf,
    /// The sections to run; empty means all of them.
    only: Vec<Section>,
}

/// The harness's sections, to run one alone while profiling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    /// 1: the runtime alone and the whole host path, in process.
    InProcess,
    /// 2 and 3: REST beside bare axum, MCP beside REST.
    Http,
    /// 4: hot reload.
    Reload,
    /// 5 and 6: 100 plugins at start-up, listing 1000 tools.
    Startup,
    /// 7: one plugin must not hurt the host or another.
    Hardening,
    /// 8: the TypeScript SDK client on one session.
    Clients,
    /// 9: `toolhost dev`, from a save to the new behaviour live.
    Dev,
    /// 10: Rust, Python and JavaScript side by side.
    Languages,
    /// 11: a shared workshop server: publishing, idle connections.
    Workshop,
    /// 12: what metrics and traces cost.
    Operations,
    /// 13: 1,000 plugins, 10,000 tools; 1,000 MCP sessions.
    Scale,
    /// 14: big components called, and memory after them.
    Big,
    /// 15: plugins from an OCI registry on replicas behind haproxy.
    Replicas,
}

impl BenchOptions {
    fn runs(&self, section: Section) -> bool {
        self.only.is_empty() || self.only.contains(&section)
    }
}

async fn run(options: BenchOptions) -> anyhow::Result<()> {
    let work = tempfile_dir("toolhost-bench")?;
    let mut report = Report::default();
    let duration = if options.quick { "1s" } else { "5s" };
    if options.runs(Section::InProcess) {
        let measured = in_process::measure(&options, &work).await?;
        eprintln!("in process: {measured}");
        for (name, value) in measured.as_object().into_iter().flatten() {
            let shown = match value.as_f64() {
                Some(number) => format!("{number:.1}"),
                None => value.to_string(),
            };
            report.record("in-process", name, value.clone(), shown);
        }
    }
    if options.runs(Section::Http) {
        http(&options, &work, duration, &mut report)?;
    }
    let benchtool = if [
        Section::Reload,
        Section::Startup,
        Section::Hardening,
        Section::Scale,
        Section::Replicas,
    ]
    .into_iter()
    .any(|section| options.runs(section))
    {
        std::fs::read(&options.benchtool)?
    } else {
        Vec::new()
    };
    if options.runs(Section::Reload) {
        reload::section(&options, &work, &benchtool, &mut report)?;
    }
    if options.runs(Section::Startup) {
        startup(&work, &benchtool, duration, &mut report)?;
    }
    if options.runs(Section::Hardening) {
        hardening::section(&options, &work, &benchtool, duration, &mut report)?;
    }
    if options.runs(Section::Clients)
        && let Some((node, script)) = &options.ts_client
    {
        clients(&options, &work, node, script, &mut report)?;
    }
    if options.runs(Section::Dev) {
        dev::section(&options, &work, &mut report)?;
    }
    if options.runs(Section::Languages) {
        languages::section(&options, &work, &mut report).await?;
    }
    if options.runs(Section::Workshop) {
        workshop::section(&options, &work, &mut report)?;
    }
    if options.runs(Section::Operations) {
        operations::section(&options, &work, duration, &mut report)?;
    }
    if options.runs(Section::Scale) {
        scale::section(&options, &work, &benchtool, duration, &mut report)?;
    }
    if options.runs(Section::Big) {
        big::section(&options, &work, duration, &mut report)?;
    }
    if options.runs(Section::Replicas) {
        replicas::section(&options, &work, &benchtool, duration, &mut report)?;
    }

    println!("| section | measure | value |\n| --- | --- | --- |");
    for (section, name, shown) in &report.rows {
        println!("| {section} | {name} | {shown} |");
    }
    report.json.insert("machine".into(), json!(machine()));
    std::fs::write(
        &options.out,
        serde_json::to_string_pretty(&Value::Object(report.json))?,
    )?;
    println!("\nwritten to {}", options.out.display());
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The results so far: rows for the printed table, and the same values
/// keyed "section: measure" for the JSON file.
#[derive(Default)]
struct Report {
    rows: Vec<(String, String, String)>,
    json: serde_json::Map<String, Value>,
}

impl Report {
    fn record(&mut self, section: &str, name: &str, value: Value, shown: String) {
        self.rows
            .push((section.to_string(), name.to_string(), shown));
        self.json.insert(format!("{section}: {name}"), value);
    }

    fn requests_per_second(&mut self, section: &str, label: &str, run: &WrkResult) {
        let name = format!("{label} req/s");
        self.record(section, &name, json!(run.rps), format!("{:.0}", run.rps));
    }

    fn latency(&mut self, section: &str, name: &str, run: &WrkResult) {
        let shown = format!("{:.2} / {:.2}", run.p50_ms, run.p99_ms);
        self.record(section, name, json!([run.p50_ms, run.p99_ms]), shown);
    }

    /// Throughput and latency of one wrk run, as two rows.
    fn load(&mut self, section: &str, label: &str, run: &WrkResult) {
        self.requests_per_second(section, label, run);
        self.latency(section, &format!("{label} p50/p99 ms"), run);
    }

    fn ratio(&mut self, section: &str, name: &str, ratio: f64) {
        self.record(
            section,
            name,
            json!(ratio),
            format!("{:.0}%", 100.0 * ratio),
        );
    }
}

/// Sections 2 and 3: REST beside a bare axum echo, and MCP beside REST.
fn http(
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

/// Section 8: the TypeScript SDK client's `tools/call` on one session and
/// one-shot, median of each.
fn clients(
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

/// Sections 5 and 6: start-up with 100 plugins, and listing 1000 tools.
fn startup(
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

fn tool_name(index: usize) -> String {
    format!("{}_0", prefix(index))
}

fn prefix(index: usize) -> String {
    format!("bench_tool_{index:013}")
}

/// The benchtool component with its tool-name marker replaced.
fn patched(benchtool: &[u8], index: usize) -> anyhow::Result<Vec<u8>> {
    let at = benchtool
        .windows(BENCHTOOL_MARKER.len())
        .position(|window| window == BENCHTOOL_MARKER)
        .ok_or_else(|| anyhow::anyhow!("the benchtool marker is missing"))?;
    let name = prefix(index);
    anyhow::ensure!(name.len() == BENCHTOOL_MARKER.len(), "prefix length");
    let mut bytes = benchtool.to_vec();
    bytes[at..at + name.len()].copy_from_slice(name.as_bytes());
    Ok(bytes)
}

async fn baseline() -> anyhow::Result<()> {
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

// Parsed once at start-up: the size of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Parser)]
#[command(name = "toolhost-bench", about = "The toolhost benchmark harness")]
enum Cli {
    /// Run the harness: print one table, write it as JSON.
    Run {
        /// The `toolhost` binary to measure [default: the one beside this
        /// binary].
        #[arg(long)]
        toolhost: Option<PathBuf>,
        /// The echo example plugin.
        #[arg(long)]
        echo: PathBuf,
        /// The benchtool fixture (tests/fixtures/benchtool).
        #[arg(long)]
        benchtool: PathBuf,
        /// The misbehave fixture, for the spinning-calls rows.
        #[arg(long)]
        misbehave: Option<PathBuf>,
        /// A large component with a `py_echo` tool (the componentize-py
        /// echo), for the large-component rows.
        #[arg(long)]
        large: Option<PathBuf>,
        /// The componentize-js 0.23 (StarlingMonkey) echo, for the big
        /// components' rows.
        #[arg(long)]
        starlingmonkey: Option<PathBuf>,
        /// The Python example (plugins/textpy.wasm), for the languages rows.
        #[arg(long, requires = "javascript")]
        python: Option<PathBuf>,
        /// The JavaScript example (plugins/textjs.wasm).
        #[arg(long, requires = "python")]
        javascript: Option<PathBuf>,
        /// Node, for the TypeScript SDK client row (with --ts-client).
        #[arg(long, requires = "ts_client")]
        node: Option<PathBuf>,
        /// tests/clients/ts_client.mjs, placed beside an installed
        /// @modelcontextprotocol/sdk.
        #[arg(long, requires = "node")]
        ts_client: Option<PathBuf>,
        /// Where the JSON report goes.
        #[arg(long, default_value = "target/bench.json")]
        out: PathBuf,
        /// Short phases: proves the harness works, measures little.
        #[arg(long)]
        quick: bool,
        /// Where the `toolhost dev` section builds its project's
        /// dependencies (shared with the tests, so they build once).
        #[arg(long, default_value = "target/scaffold")]
        scaffold_target: PathBuf,
        /// Run only these sections (comma-separated); all by default.
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<Section>,
    },
    /// The bare axum echo the harness compares REST with.
    Baseline,
}

fn main() -> std::process::ExitCode {
    toolhost::runtime::configure_allocator();
    let cli = <Cli as clap::Parser>::parse();
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| {
            runtime.block_on(async {
                match cli {
                    Cli::Run {
                        toolhost,
                        echo,
                        benchtool,
                        misbehave,
                        large,
                        starlingmonkey,
                        python,
                        javascript,
                        node,
                        ts_client,
                        out,
                        quick,
                        scaffold_target,
                        only,
                    } => {
                        if let Some(path) = toolhost {
                            let _ = probes::TOOLHOST.set(path);
                        }
                        run(BenchOptions {
                            echo,
                            benchtool,
                            misbehave,
                            large,
                            starlingmonkey,
                            python,
                            javascript,
                            ts_client: node.zip(ts_client),
                            out,
                            quick,
                            scaffold_target,
                            only,
                        })
                        .await
                    }
                    Cli::Baseline => baseline().await,
                }
            })
        });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolhost-bench: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}
