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
//!     │         file), load events, reports, plugin files, tools, skills, invisible
//!     │         (no hidden characters in definitions), portability
//!     │         (schema warnings), policy, watcher, sources (plugins from
//!     │         OCI registries, polled) ─→ oci/ (artifact layout, cosign
//!     │         signatures; also what `push … oci://` writes with)
//!  runtime/   wasmtime: compile (Winch baseline first for large components,
//!     │         Cranelift behind) + cache, sandbox, WIT imports, call threads
//!     │         (knows nothing of HTTP or JSON-RPC)
//!  languages/ what a language is, for every room above: one `Language`,
//!               what a source imports, the author's line in what printed
//!     │         it, the embedded runtimes (asks no other room but zipped)
//!  zipped     a folder sent as a zip (a tool folder, a skill), read whole
//!               and checked (a leaf)
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
pub mod languages;
mod oci;
mod ops;
mod publishing;
pub mod registry;
pub mod runtime;
pub mod server;
mod tasks;
mod zipped;

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

    /// Every file and folder under the repository (`.git`, `target` and
    /// `node_modules` aside), relative to it, folders ending in `/`.
    fn repository_paths(root: &Path) -> std::collections::BTreeSet<String> {
        fn walk(dir: &Path, root: &Path, out: &mut std::collections::BTreeSet<String>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if [".git", "target", "node_modules", "__pycache__"].contains(&name.as_str()) {
                    continue;
                }
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if path.is_dir() {
                    out.insert(format!("{relative}/"));
                    walk(&path, root, out);
                } else {
                    out.insert(relative);
                }
            }
        }
        let mut out = std::collections::BTreeSet::new();
        walk(root, root, &mut out);
        out
    }

    /// The paths a text names that do not exist: a word with a `/` under
    /// one of the repository's folders or the host's rooms (a file with an
    /// extension, or a folder ending in `/`), looked for from the
    /// repository, from `host/src` and from the text's own folder; and a
    /// bare `name.rs`, which some source file must bear.
    fn stale_paths(
        text: &str,
        own_folder: &str,
        paths: &std::collections::BTreeSet<String>,
    ) -> Vec<String> {
        const TOPS: [&str; 9] = [
            "host/", "docs/", "sdk/", "plugins/", "bench/", "tests/", "wit/", "deploy/", ".ci/",
        ];
        const FILES: [&str; 9] = [
            ".rs", ".md", ".toml", ".wit", ".py", ".js", ".mjs", ".yaml", ".sh",
        ];
        let rooms: Vec<String> = paths
            .iter()
            .filter_map(|path| path.strip_prefix("host/src/"))
            .filter(|room| room.ends_with('/') && room.matches('/').count() == 1)
            .map(String::from)
            .collect();
        let exists = |path: &str| {
            let folder = format!("{}/", path.trim_end_matches('/'));
            let near = Path::new(own_folder).join(path);
            let near = near.to_string_lossy();
            [path, folder.as_str()]
                .iter()
                .any(|path| paths.contains(*path) || paths.contains(&format!("host/src/{path}")))
                || paths.contains(near.as_ref())
                || paths.contains(&format!("{}/", near.trim_end_matches('/')))
        };
        let mut stale = Vec::new();
        let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || "_.-/".contains(c)));
        for word in words {
            let word = word.trim_end_matches(['.', '-']);
            let is_file = FILES.iter().any(|ext| word.ends_with(ext)) && !word.starts_with('.');
            let named = if word.contains('/') {
                let under = TOPS.iter().any(|top| word.starts_with(top))
                    || rooms.iter().any(|room| word.starts_with(room.as_str()));
                // Under plugins/, an example plugin's own folder of the
                // repository, not a namespace or a policy a reader makes.
                let example = word.starts_with("plugins/") && {
                    let second = word.split('/').nth(1).unwrap_or("");
                    !paths.contains(&format!("plugins/{second}/"))
                };
                under && !example && (is_file || word.ends_with('/')) && !word.contains("..")
            } else {
                false
            };
            if named && !exists(word) {
                stale.push(word.to_string());
            } else if !word.contains('/') && word.ends_with(".rs") && !word.starts_with('.') {
                let known = paths
                    .iter()
                    .any(|path| path.rsplit('/').next() == Some(word));
                if !known {
                    stale.push(word.to_string());
                }
            }
        }
        stale
    }

    /// A path in a document or in a file's `//!` header is how a reader
    /// finds the code it speaks of: after a rename or a move, none may name
    /// what is gone. (The notes under bench/notes are history, as written;
    /// a vendored crate is upstream's, as written, but for what says how it
    /// was patched.)
    #[test]
    fn docs_and_headers_name_only_paths_that_exist() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let paths = repository_paths(&root);
        let mut stale = Vec::new();
        for path in &paths {
            if path.starts_with("vendor/") && !path.ends_with("/PATCHED.md") {
                continue;
            }
            let folder = path.rsplit_once('/').map_or("", |(folder, _)| folder);
            let text = if path.ends_with(".md") && !path.starts_with("bench/notes/") {
                std::fs::read_to_string(root.join(path)).unwrap()
            } else if path.ends_with(".rs") && !path.starts_with("tests/fixtures/") {
                let text = std::fs::read_to_string(root.join(path)).unwrap();
                text.lines()
                    .filter_map(|line| line.trim_start().strip_prefix("//!"))
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                continue;
            };
            for word in stale_paths(&text, folder, &paths) {
                stale.push(format!("{path} names {word}"));
            }
        }
        assert!(
            stale.is_empty(),
            "paths that do not exist:\n{}",
            stale.join("\n")
        );
    }

    /// docs/architecture.md says no module imports one above it, inside
    /// every folder too (`farm-studio look`'s "0 arrows back up"): within a
    /// folder, the files' imports of each other (a child naming `super::x`
    /// or the folder's own path, `mod.rs` naming a child's `x::`) make no
    /// loop, `mod.rs` with its children included. Tests inside a file
    /// (`mod tests`) are the file's own and not read.
    #[test]
    fn no_folder_has_an_import_loop() {
        use std::collections::{BTreeMap, BTreeSet};
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let paths = repository_paths(&root);
        let mut loops = Vec::new();
        for crate_root in ["host/src/", "sdk/rust/src/", "bench/src/"] {
            // Each folder's files by module name; the folder's own module
            // ("mod.rs", or the crate root) is "".
            let mut folders: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
            for path in paths.iter().filter(|path| path.starts_with(crate_root)) {
                let Some(stem) = path
                    .strip_prefix(crate_root)
                    .and_then(|p| p.strip_suffix(".rs"))
                else {
                    continue;
                };
                let (folder, name) = stem.rsplit_once('/').unwrap_or(("", stem));
                let name = if ["mod", "lib", "main"].contains(&name) {
                    ""
                } else {
                    name
                };
                folders
                    .entry(folder.to_string())
                    .or_default()
                    .insert(name.to_string(), path.clone());
                if !folder.is_empty() && name.is_empty() {
                    // A subfolder is one node of its parent folder.
                    let (parent, sub) = folder.rsplit_once('/').unwrap_or(("", folder));
                    folders
                        .entry(parent.to_string())
                        .or_default()
                        .insert(sub.to_string(), path.clone());
                }
            }
            for (folder, files) in &folders {
                let own_path = if folder.is_empty() {
                    "crate::".to_string()
                } else {
                    format!("crate::{}::", folder.replace('/', "::"))
                };
                let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
                for (name, path) in files {
                    let text = std::fs::read_to_string(root.join(path)).unwrap();
                    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
                    let named = |prefix: &str| -> Vec<String> {
                        text.match_indices(prefix)
                            .filter(|(at, _)| {
                                let before = text[..*at].chars().last().unwrap_or(' ');
                                !(before.is_alphanumeric() || before == '_' || before == ':')
                            })
                            .map(|(at, _)| {
                                text[at + prefix.len()..]
                                    .chars()
                                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                                    .collect()
                            })
                            .collect()
                    };
                    let mut to = BTreeSet::new();
                    if name.is_empty() {
                        // The folder's own module: a child named `x::…`.
                        for child in files.keys().filter(|child| !child.is_empty()) {
                            let uses = [" ", "(", "&", "!", "<", "self::", own_path.as_str()]
                                .iter()
                                .any(|before| text.contains(&format!("{before}{child}::")));
                            if uses {
                                to.insert(child.as_str());
                            }
                        }
                    } else {
                        for other in named("super::").into_iter().chain(named(&own_path)) {
                            let target = files
                                .get_key_value(other.as_str())
                                .map_or("", |(key, _)| key.as_str());
                            if target != name.as_str() && !other.is_empty() && other != "super" {
                                to.insert(target);
                            }
                        }
                    }
                    to.remove(name.as_str());
                    edges.insert(name.as_str(), to);
                }
                // A loop: a file that reaches itself.
                for start in edges.keys() {
                    let mut seen = BTreeSet::new();
                    let mut stack: Vec<&str> = edges[start].iter().copied().collect();
                    while let Some(next) = stack.pop() {
                        if next == *start {
                            loops.push(format!(
                                "{crate_root}{folder}: {start:?} reaches itself ({:?})",
                                edges[start]
                            ));
                            break;
                        }
                        if seen.insert(next) {
                            stack.extend(edges.get(next).into_iter().flatten().copied());
                        }
                    }
                }
            }
        }
        assert!(
            loops.is_empty(),
            "import loops (\"\" is the folder's own module):\n{}",
            loops.join("\n")
        );
    }

    /// Code comments say what was measured or why, never an issue's number:
    /// a reader has the code, not the tracker.
    #[test]
    fn code_comments_name_no_issue_numbers() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for path in repository_paths(&root) {
            let commented = path.ends_with(".rs")
                || path.ends_with(".toml")
                || path.ends_with(".py")
                || path.ends_with(".js")
                || path == "Makefile";
            if !commented || path.starts_with("tests/fixtures/") || path.contains("vendor/") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(root.join(&path)) else {
                continue;
            };
            for (number, line) in text.lines().enumerate() {
                let comment = ["//", "# "]
                    .iter()
                    .filter_map(|mark| line.find(mark).map(|at| &line[at..]))
                    .next();
                let Some(comment) = comment else { continue };
                let numbered = comment.match_indices('#').any(|(at, _)| {
                    let after = &comment[at + 1..];
                    let digits = after.chars().take_while(char::is_ascii_digit).count();
                    digits > 0 && digits <= 3 && !comment[..at].ends_with("PKCS")
                });
                if numbered {
                    found.push(format!("{path}:{}: {}", number + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "issue numbers in comments:\n{}",
            found.join("\n")
        );
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
