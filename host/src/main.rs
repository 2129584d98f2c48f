//! `toolhost`: serve WebAssembly component plugins as tools over REST and MCP.
//!
//! This file owns the command line: the subcommands, their flags (each with
//! a `TOOLHOST_*` environment variable) and logging. The work is done by the
//! modules it dispatches to.

mod bench;
mod cgi;
mod cli;
mod envelope;
mod errors;
mod guard;
mod http_server;
mod invoke;
mod jsonrpc;
mod loader;
mod manifest;
mod mcp;
mod mcp_http;
mod mcp_stdio;
mod openapi;
mod policy;
mod registry;
mod render;
mod rest;
mod runtime;
mod serve;
mod watcher;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::envelope::TextFormat;
use crate::manifest::ToolListLimits;
use crate::registry::Registry;
use crate::runtime::{Limits, Runtime};

#[derive(Parser)]
#[command(
    name = "toolhost",
    version,
    about = "Serve WebAssembly component plugins as tools over REST"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every plugin in the folder over REST and MCP, reloading on change.
    Serve(ServeOptions),
    /// Call one tool once and print the result envelope. Exit status: 0
    /// success; 1 the tool failed (isError); 2 bad usage or the call could
    /// not be made (unknown tool, invalid JSON).
    Call {
        #[command(flatten)]
        host: HostOptions,
        /// The tool's name.
        tool: String,
        /// The arguments as a JSON object; `-` reads them from stdin.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// List the plugins in the folder, their state and their tools.
    List {
        #[command(flatten)]
        host: HostOptions,
        /// Print JSON (the `GET /plugins` report) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check one file: print its tools, or exactly why it would be rejected.
    Check {
        #[command(flatten)]
        host: HostOptions,
        file: PathBuf,
    },
    /// Answer one CGI/1.1 request (PATH_INFO `/tools/<name>`, JSON body on
    /// stdin) with the same routes and envelopes as the REST server.
    Cgi {
        #[command(flatten)]
        host: HostOptions,
        #[command(flatten)]
        http: HttpOptions,
    },
    /// Run the benchmark harness (`make bench` builds what it needs).
    #[command(hide = true)]
    Bench {
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
        /// Run only these sections (comma-separated); all by default.
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<bench::Section>,
    },
    /// The bare axum echo the benchmark compares REST with.
    #[command(hide = true)]
    BenchBaseline,
}

/// Options every subcommand shares: where plugins are and how they run.
#[derive(Args, Clone)]
struct HostOptions {
    /// The plugin folder (`*.wasm` files; not searched recursively).
    #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
    plugins: PathBuf,
    /// Wall-clock deadline of one call, in milliseconds.
    #[arg(long, env = "TOOLHOST_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Memory cap of one call, in MiB.
    #[arg(long, env = "TOOLHOST_MEMORY_MIB", default_value_t = 64)]
    memory_mib: usize,
    /// Where compiled plugins are cached [default: $XDG_CACHE_HOME/toolhost
    /// or ~/.cache/toolhost].
    #[arg(long, env = "TOOLHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// How many calls run plugin code at once, over all plugins. A call past
    /// it waits up to 250 ms for a slot, then gets BUSY. A plugin without a
    /// `max_concurrent` policy may use at most half of them.
    #[arg(long, env = "TOOLHOST_MAX_CALLS", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_calls: u32,
    /// How many tools one plugin may list; a plugin listing more is rejected.
    #[arg(long, env = "TOOLHOST_MAX_TOOLS", default_value_t = ToolListLimits::DEFAULT.max_tools)]
    max_tools: usize,
    /// How large one plugin's tool list (names, descriptions and schemas
    /// together) may be, in KiB; a plugin listing more is rejected.
    #[arg(long, env = "TOOLHOST_MAX_TOOL_LIST_KIB", default_value_t = ToolListLimits::DEFAULT.max_bytes / 1024)]
    max_tool_list_kib: usize,
    /// Compile every plugin afresh, and cache nothing.
    #[arg(long, env = "TOOLHOST_NO_CACHE")]
    no_cache: bool,
    /// How a result that has only structured data is rendered as text.
    #[arg(long, env = "TOOLHOST_TEXT_FORMAT", value_enum, default_value = "json")]
    text_format: TextFormat,
}

#[derive(Args, Clone, Copy)]
struct HttpOptions {
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "TOOLHOST_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
}

#[derive(Args, Clone)]
struct ServeOptions {
    #[command(flatten)]
    host: HostOptions,
    #[command(flatten)]
    http: HttpOptions,
    /// Address for HTTP (REST at /, MCP at /mcp) [default: 127.0.0.1:8000,
    /// or none with --stdio]. Loopback by default: expose it on purpose.
    #[arg(long, env = "TOOLHOST_LISTEN")]
    listen: Option<SocketAddr>,
    /// Also serve MCP on stdin/stdout, for MCP clients that start toolhost.
    #[arg(long, env = "TOOLHOST_STDIO")]
    stdio: bool,
    /// Require `Authorization: Bearer <TOKEN>` on every HTTP route but /health.
    #[arg(long, env = "TOOLHOST_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Another host name that Host and Origin headers may name (repeatable;
    /// comma-separated in the variable). Loopback names are always allowed.
    #[arg(
        long = "allowed-host",
        env = "TOOLHOST_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// How long a plugin file must be quiet before it is (re)loaded, in ms.
    #[arg(long, env = "TOOLHOST_DEBOUNCE_MS", default_value_t = 50)]
    debounce_ms: u64,
    /// How long a client may take to send a request's header, and how long
    /// an idle keep-alive connection stays open, in ms.
    #[arg(long, env = "TOOLHOST_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// How many HTTP connections may be open at once; past it a new one gets
    /// 503 BUSY and is closed.
    #[arg(long, env = "TOOLHOST_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// How many MCP sessions may be open at once; `initialize` past it gets
    /// HTTP 503 with a JSON-RPC error.
    #[arg(long, env = "TOOLHOST_MAX_SESSIONS", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// An MCP session that sends no request for this long is closed, in
    /// seconds.
    #[arg(long, env = "TOOLHOST_SESSION_IDLE_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    session_idle_secs: u64,
}

impl HostOptions {
    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir.clone().or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache"))
                })?;
            Some(base.join("toolhost"))
        })
    }

    /// Builds the runtime and an empty registry over it.
    fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        let limits = Limits {
            timeout: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_mib.saturating_mul(1024 * 1024),
        };
        let list_limits = ToolListLimits {
            max_tools: self.max_tools,
            max_bytes: self.max_tool_list_kib.saturating_mul(1024),
        };
        let runtime = Runtime::new(limits, self.cache_dir(), self.max_calls as usize)?;
        Ok(Registry::new(runtime, list_limits))
    }

    /// Builds the registry and loads the plugin folder once.
    async fn loaded_registry(&self) -> anyhow::Result<Arc<Registry>> {
        let registry = self.registry()?;
        registry.scan(&self.plugins).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot read the plugin folder {}: {e}",
                self.plugins.display()
            )
        })?;
        Ok(registry)
    }
}

fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

#[tokio::main]
async fn main() -> ExitCode {
    runtime::configure_allocator();
    let cli = Cli::parse();
    let quiet = !matches!(cli.command, Command::Serve(_) | Command::Bench { .. });
    // rmcp logs every session and notification at info: too chatty for a
    // server log, so it is held at warn unless TOOLHOST_LOG says otherwise.
    init_logging(if quiet { "warn" } else { "info,rmcp=warn" });
    let outcome = match cli.command {
        Command::Serve(options) => serve::run(options).await.map(|()| 0),
        Command::Call {
            host,
            tool,
            arguments,
        } => cli::call(&host, &tool, &arguments).await,
        Command::List { host, json } => cli::list(&host, json).await,
        Command::Check { host, file } => cli::check(&host, &file).await,
        Command::Cgi { host, http } => cgi::run(&host, http).await.map(|()| 0),
        Command::Bench {
            echo,
            benchtool,
            misbehave,
            large,
            node,
            ts_client,
            out,
            quick,
            only,
        } => bench::run(bench::BenchOptions {
            echo,
            benchtool,
            misbehave,
            large,
            ts_client: node.zip(ts_client),
            out,
            quick,
            only,
        })
        .await
        .map(|()| 0),
        Command::BenchBaseline => bench::baseline().await.map(|()| 0),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("toolhost: {error:#}");
            ExitCode::from(2)
        }
    }
}
