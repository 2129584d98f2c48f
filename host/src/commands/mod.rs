//! The command line: one file per subcommand, each owning its flags and
//! what it does with them; the flags they share are in `options.rs`.
//! Commands build what they need (a registry, a server) from the library
//! and never reach back into the binary's entry point.

mod approve;
mod build_flags;
mod call;
mod cgi;
mod check;
mod dev;
mod grants;
mod list;
mod new;
mod options;
mod packages;
mod project;
mod push;
mod remote;
mod serve;
mod telemetry;
mod tokens;

use std::process::ExitCode;

pub use self::serve::serve_in_process;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "toolhost",
    version = concat!(
        env!("CARGO_PKG_VERSION"),
        " (profile ",
        env!("TOOLHOST_BUILD_PROFILE"),
        ")"
    ),
    about = "Serve WebAssembly component plugins as tools over REST and MCP"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines (on stderr) are written: `text` for people, `json`
    /// (one object per line, with the call's span fields) for log
    /// shippers. Set the level with TOOLHOST_LOG (e.g. `debug` for one
    /// line per call).
    #[arg(long, global = true, env = "TOOLHOST_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every plugin in the folder over REST and MCP, reloading on change.
    Serve(serve::ServeOptions),
    /// Call one tool once and print the result envelope. Exit status: 0
    /// success; 1 the tool failed (isError); 2 bad usage or the call could
    /// not be made (unknown tool, invalid JSON).
    Call(call::CallOptions),
    /// List the plugins in the folder, their state and their tools.
    List(list::ListOptions),
    /// Check one file: print its tools, or exactly why it would be rejected.
    Check(check::CheckOptions),
    /// Scaffold a plugin project: one typed tool with a test, in Rust,
    /// Python or JavaScript (`--lang`), on that language's helper library.
    New(new::NewOptions),
    /// Rebuild a plugin project on every save and serve it live; prints the
    /// build error, the tools now live, or why the new version was rejected.
    Dev(dev::DevOptions),
    /// Publish a component (or build and publish a project) onto a server,
    /// into your namespace; `--delete NAME` removes one of yours. Prints
    /// the tools live, or why the server refused them (exit 1).
    Push(push::PushOptions),
    /// Approve (or with --refuse, refuse) a plugin's version held for
    /// approval on a server run with --require-approval; prints what
    /// changed and what serves now. Admins only.
    Approve(approve::ApproveOptions),
    /// Answer one CGI/1.1 request (PATH_INFO `/tools/<name>`, JSON body on
    /// stdin) with the same routes and envelopes as the REST server.
    Cgi(cgi::CgiOptions),
    /// Make a workshop room: a tokens file (an instructor who is admin,
    /// stored hashed; one publisher per attendee, seeing the top level,
    /// the instructor's tools and their own) and a printable sheet with
    /// one card per attendee. Prints the instructor's token, once.
    Tokens(tokens::TokensOptions),
    /// The room's packages, for Python sources to import live: `add` resolves
    /// pure-Python wheels from PyPI (or --from DIR) into the plugin folder's
    /// store with a lock file; `list`; `remove`. A serving server loads its
    /// sources again when the store changes; it never downloads.
    Packages(packages::PackagesOptions),
    /// Outbound HTTP grants in the folder's policy files, edited in place:
    /// `allow ORIGIN…` and `revoke ORIGIN…` for the whole room (`_room.toml`),
    /// a namespace (--namespace) or one plugin (--plugin); `list`.
    Grants(grants::GrantsOptions),
}

impl Cli {
    /// Runs the command on a runtime of its own and returns the process's
    /// exit status. A command that fails before it can answer prints the
    /// error and exits with 2.
    pub fn run(self) -> ExitCode {
        // Before any thread exists: glibc's thresholds are process-wide.
        crate::runtime::configure_allocator();
        let serving = matches!(self.command, Command::Serve(_) | Command::Dev(_));
        // rmcp logs every session and notification at info: too chatty for
        // a server log, so it is held at warn unless TOOLHOST_LOG says
        // otherwise. The one-shot commands log warnings only.
        let _traces = match init_logging(
            if serving { "info,rmcp=warn" } else { "warn" },
            self.log_format,
        ) {
            Ok(traces) => traces,
            Err(error) => {
                eprintln!("toolhost: {error:#}");
                return ExitCode::from(2);
            }
        };
        let outcome = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| {
                runtime.block_on(async {
                    match self.command {
                        Command::Serve(options) => options.run().await.map(|()| 0),
                        Command::Call(options) => options.run().await,
                        Command::List(options) => options.run().await,
                        Command::Check(options) => options.run().await,
                        Command::Cgi(options) => options.run().await.map(|()| 0),
                        Command::New(options) => options.run(),
                        Command::Dev(options) => options.run().await,
                        Command::Push(options) => options.run().await,
                        Command::Approve(options) => options.run().await,
                        Command::Tokens(options) => options.run(),
                        Command::Packages(options) => options.run(),
                        Command::Grants(options) => options.run(),
                    }
                })
            });
        match outcome {
            Ok(code) => ExitCode::from(code),
            Err(error) => {
                eprintln!("toolhost: {error:#}");
                ExitCode::from(2)
            }
        }
    }
}

/// Logs to stderr (text or JSON, at TOOLHOST_LOG's level), and traces by
/// OTLP when the OpenTelemetry variables ask for it (`telemetry.rs`); the
/// returned keeper flushes the traces when dropped.
fn init_logging(
    default_level: &str,
    format: LogFormat,
) -> anyhow::Result<Option<telemetry::Traces>> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    // sigstore warns about each signature source it finds empty; whether a
    // plugin's signature was refused is toolhost's to say, once, with the
    // reason (`registry/sources.rs`).
    let asked = std::env::var("TOOLHOST_LOG")
        .ok()
        .filter(|asked| !asked.is_empty());
    let directives = match asked {
        Some(asked) if asked.contains("sigstore") => asked,
        Some(asked) => format!("{asked},sigstore=error"),
        None => format!("{default_level},sigstore=error"),
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        // The fields of the span a line is logged in (a call's tool,
        // plugin, outcome, duration) ride along as `span`.
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let logs = match log_filter(&directives, default_level) {
        LogFilter::Targets(targets) => logs.with_filter(*targets).boxed(),
        LogFilter::Spans(filter) => logs.with_filter(*filter).boxed(),
    };
    let registry = tracing_subscriber::registry().with(logs);
    match telemetry::otlp_layer()? {
        Some((traces, keeper)) => {
            registry.with(traces).init();
            Ok(Some(keeper))
        }
        None => {
            registry.init();
            Ok(None)
        }
    }
}

/// TOOLHOST_LOG's directives as the log layer's filter.
#[derive(Debug)]
enum LogFilter {
    /// Levels by target (`info`, `info,toolhost=debug`): decided once per
    /// call site, with nothing to do when a span is entered or left.
    Targets(Box<tracing_subscriber::filter::Targets>),
    /// Directives that name spans or fields (`[call{tool=echo}]=debug`)
    /// need `EnvFilter`, which takes a lock on every span's enter and exit,
    /// that is on every poll of every call.
    Spans(Box<tracing_subscriber::EnvFilter>),
}

fn log_filter(directives: &str, default_level: &str) -> LogFilter {
    if directives.split(',').all(plain_directive)
        && let Ok(targets) = directives.parse()
    {
        return LogFilter::Targets(Box::new(targets));
    }
    LogFilter::Spans(Box::new(
        tracing_subscriber::EnvFilter::try_new(directives)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
    ))
}

/// `target=level`, `target` or `level`, written as `EnvFilter` reads it
/// too: anything else (an empty piece, spaces, quotes, a span) goes to
/// `EnvFilter`, so that a `TOOLHOST_LOG` means what it meant before.
fn plain_directive(directive: &str) -> bool {
    let (target, level) = match directive.split_once('=') {
        Some((target, level)) => (target, Some(level)),
        None => (directive, None),
    };
    target.starts_with(|c: char| c.is_ascii_alphanumeric())
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-'))
        // (LevelFilter reads an empty level as `error`; EnvFilter as trace.)
        && level.is_none_or(|level| {
            !level.is_empty()
                && level
                    .parse::<tracing_subscriber::filter::LevelFilter>()
                    .is_ok()
        })
}

#[cfg(test)]
mod tests {
    use super::{LogFilter, log_filter};
    use tracing::Level;

    #[test]
    fn levels_by_target_take_the_filter_without_span_hooks() {
        let LogFilter::Targets(targets) = log_filter("info,toolhost=debug,sigstore=error", "info")
        else {
            panic!("levels by target are a Targets filter");
        };
        assert!(targets.would_enable("toolhost::call", &Level::DEBUG));
        assert!(!targets.would_enable("hyper", &Level::DEBUG));
        assert!(targets.would_enable("hyper", &Level::INFO));
        assert!(!targets.would_enable("sigstore::cosign", &Level::WARN));
        assert!(matches!(
            log_filter("[call{tool=echo}]=debug", "info"),
            LogFilter::Spans(_)
        ));
        // What Targets would read otherwise than EnvFilter does: an empty
        // piece (Targets: `error` for everything), quotes kept from an env
        // file, a space, a level left out; and no filter at all (the
        // default level, as before).
        for other in [
            "debug,",
            "info,,toolhost=debug",
            "\"debug\"",
            "warn, toolhost=debug",
            "toolhost=",
            "info,=x=y",
        ] {
            assert!(
                matches!(log_filter(other, "info"), LogFilter::Spans(_)),
                "{other}"
            );
        }
        assert!(matches!(
            log_filter("WARN,toolhost::call=DEBUG,rmcp=off", "info"),
            LogFilter::Targets(_)
        ));
    }
}
