//! What a run of the harness was given: the plugins and fixtures to
//! measure, where the report goes, and which sections run.

use std::path::PathBuf;

pub(crate) struct BenchOptions {
    pub(crate) echo: PathBuf,
    pub(crate) benchtool: PathBuf,
    /// The misbehave fixture, for its `spin` tool; without it the
    /// spinning rows are left out.
    pub(crate) misbehave: Option<PathBuf>,
    /// A large component of another language with a `py_echo` tool; without
    /// it the large-component rows are left out.
    pub(crate) large: Option<PathBuf>,
    /// The componentize-js (StarlingMonkey) echo with an `sm_echo` tool
    /// (tests/fixtures/starlingmonkey); without it its big-component rows
    /// are left out.
    pub(crate) starlingmonkey: Option<PathBuf>,
    /// The Python and JavaScript examples (plugins/textpy, plugins/textjs);
    /// without them the languages section is left out.
    pub(crate) python: Option<PathBuf>,
    pub(crate) javascript: Option<PathBuf>,
    /// `tests/clients/ts_client.mjs` beside an installed TypeScript SDK, and
    /// the Node that runs it; without them the clients row is left out.
    pub(crate) ts_client: Option<(PathBuf, PathBuf)>,
    /// An earlier build of toolhost (its binary, its echo and `rev`), for
    /// REST side by side with it; without it that section is left out.
    pub(crate) earlier: Option<PathBuf>,
    /// The `wasmtime` CLI and the wasi:http echo (tests/fixtures/httpecho),
    /// for `wasmtime serve` beside REST; without them that row is left out.
    pub(crate) wasmtime_serve: Option<(PathBuf, PathBuf)>,
    pub(crate) out: PathBuf,
    pub(crate) quick: bool,
    /// Where the `toolhost dev` project's dependencies are built.
    pub(crate) scaffold_target: PathBuf,
    /// The sections to run; empty means all of them.
    pub(crate) only: Vec<Section>,
}

/// The harness's sections, to run one alone while profiling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Section {
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
    /// 16: Python and JavaScript source, by the runtimes and by builds.
    #[value(alias = "builds")]
    Sources,
    /// 17: REST beside an earlier build (`--earlier`).
    Earlier,
    /// 18: 1,000 skills over 300 namespaces, listed.
    Skills,
}

impl BenchOptions {
    pub(crate) fn runs(&self, section: Section) -> bool {
        self.only.is_empty() || self.only.contains(&section)
    }
}
