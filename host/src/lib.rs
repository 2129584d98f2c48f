//! toolhost: serve WebAssembly component plugins as tools over REST and MCP.
//!
//! A call flows one way, from a front to the runtime:
//!
//! ```text
//!  commands/  the CLI: each subcommand owns its flags and opens a Host
//!     │         (`new` and `dev` are the plugin author's, in Rust, Python
//!     │         or JavaScript: scaffold, then rebuild on save and wait for
//!     │         the load outcome)
//!  host       the front door: HostConfig → Host (runtime, registry,
//!     │         watch), its load events, call, check, serve
//!  server     the fronts assembled: HTTP (REST + MCP), MCP over stdio, CGI
//!     │
//!  front/     the protocols: rest | openapi | plugin routes | mcp
//!     │         (streamable HTTP, stdio) | the page | cgi (protocol in,
//!     │         envelope out; never a wasmtime type)
//!  ops/       what operators read: metrics, traces, the event feed
//!     │
//!  edge/      between a socket and a front: the listener, each body's
//!     │         clock, the outer layer (CORS, lingering close, the
//!     │         finish), the guard (Host/Origin, other sites, who is
//!     │         asking: auth, oauth; what each holds of the connections
//!     │         and streams: holds), responses
//!  publishing/ one source published, whichever front asked: served by
//!     │         its language's runtime, or built; loaded; recorded
//!  tasks/     long calls as durable tasks: records, the store (a folder
//!     │         or Redis), each task's run here (knows nothing of MCP or
//!     │         HTTP; the front says what a run does)
//!  builds/    published Python or JavaScript source into a component:
//!     │         the recipes (`new` and `dev` run the same), what contains
//!     │         a build (bubblewrap), a child process in a scratch folder
//!     │         under limits, the queue, the author's line of a failure
//!     │         (knows nothing of HTTP)
//!  call/      invoke: look up → validate arguments → call → normalize
//!     │         into the one envelope, in one tracing span per call;
//!     │         errors: the one code table
//!  registry/  the live set of plugins: one load path (a generation per
//!     │         file), load events, reports, plugin files, tools, portability
//!     │         (schema warnings), policy, watcher, sources (plugins from
//!     │         OCI registries, polled) ─→ oci/ (artifact layout, cosign
//!     │         signatures; also what `push … oci://` writes with)
//!  runtime/   wasmtime: compile (Winch baseline first for large components,
//!               Cranelift behind) + cache, sandbox, WIT imports, call threads
//!               (knows nothing of HTTP or JSON-RPC)
//! ```
//!
//! The binary (`main.rs`) parses the command line and runs
//! [`commands::Cli`]. A program that embeds the server opens a [`Host`]
//! from a [`HostConfig`] and serves it; hot reload comes with it
//! (`docs/architecture.md` has the whole map). The benchmark harness is a
//! crate of its own (`bench/`) built on this library; the plugin SDKs
//! (`sdk/rust`, `sdk/python`, `sdk/js`) are guest-side and share nothing
//! with it but the WIT contract.

pub mod builds;
pub mod call;
pub mod commands;
mod edge;
mod front;
mod host;
mod oci;
mod ops;
mod publishing;
pub mod registry;
pub mod runtime;
pub mod server;
mod tasks;

pub use host::{Host, HostConfig, default_cache_dir};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every source file under `host/src`, as a path relative to it
    /// (`runtime/compiler.rs`), templates aside.
    fn source_files() -> Vec<String> {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else if path.extension().is_some_and(|ext| ext == "rs") {
                    let relative = path.strip_prefix(root).unwrap();
                    out.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&root, &root, &mut files);
        files.sort();
        files
    }

    /// The maps (this file's and `docs/architecture.md`'s) are how a
    /// newcomer finds their way: each must name every module there is, and
    /// the architecture document no file that is gone.
    #[test]
    fn the_maps_name_every_module() {
        let files = source_files();
        let lib = include_str!("lib.rs");
        let map = &lib[..lib.find("\npub mod").unwrap()];
        for file in &files {
            let top = file.split('/').next().unwrap().trim_end_matches(".rs");
            if ["lib", "main"].contains(&top) {
                continue;
            }
            let named = if file.contains('/') {
                format!("{top}/")
            } else {
                top.to_string()
            };
            assert!(map.contains(&named), "lib.rs's map does not name {named}");
        }
        let architecture = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md"),
        )
        .expect("docs/architecture.md");
        for file in &files {
            assert!(
                architecture.contains(file.as_str()),
                "docs/architecture.md does not name host/src/{file}"
            );
        }
        for word in architecture.split(|c: char| c.is_whitespace() || "`|()[],".contains(c)) {
            let word = word.trim_start_matches("host/src/");
            if word.ends_with(".rs") && word.contains('/') && !word.contains("..") {
                let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
                let known = files.iter().any(|file| file == word)
                    || manifest.join(word).exists()
                    || manifest.join("..").join(word).exists();
                assert!(
                    known,
                    "docs/architecture.md names {word}, which does not exist"
                );
            }
        }
    }

    /// README is a new user's first hour: what one feature or operators
    /// need goes to `docs/`, with a paragraph and a link.
    #[test]
    fn readme_is_a_first_hour_of_at_most_600_lines() {
        let lines = include_str!("../../README.md").lines().count();
        assert!(
            lines <= 600,
            "README has {lines} lines: move a section's detail to docs/"
        );
    }

    /// The architecture's layout names every integration test module, as
    /// its module table names every source file.
    #[test]
    fn the_map_names_every_integration_test_module() {
        let architecture = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md"),
        )
        .expect("docs/architecture.md");
        let row = architecture
            .lines()
            .find(|line| line.starts_with("| `tests/it/` |"))
            .expect("a layout row for tests/it/");
        let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/it");
        for entry in std::fs::read_dir(&tests).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(module) = name.strip_suffix(".rs") else {
                continue;
            };
            if module == "main" {
                continue;
            }
            assert!(
                row.contains(&format!("`{module}`")),
                "docs/architecture.md's tests/it/ row does not name `{module}`"
            );
        }
    }
}
