//! `toolhost dev [PROJECT]`: edit, save, live. Watches a plugin project's
//! sources, rebuilds it on every save (`cargo build --release --target
//! wasm32-wasip2`), drops the component into the served folder atomically
//! (write beside, then rename), and prints what became of it: the build
//! error, or the tools now live, or the exact reason the host rejected the
//! new version while the old one keeps serving.
//!
//! Which server: if a toolhost already answers at `--listen` (default
//! 127.0.0.1:8000), the component goes into the folder that server serves
//! (`GET /plugins` says which); otherwise `dev` serves itself, exactly as
//! `toolhost serve` would with the same flags (`--plugins`, default
//! `plugins`). Either way the load result is read back from that server's
//! `/plugins`, so what `dev` prints is what callers get.
//!
//! What counts as an edit: a write, create, rename or removal of a `.rs`,
//! `.wit` or `Cargo.toml` file: `Cargo.toml` and `build.rs` at the top of
//! the project, anything under `src/` and `wit/` (hidden files aside).
//! Reads (cargo's own) never count and `target/` is never watched, so a
//! build never triggers the next one.
//!
//! Ctrl-C stops it; when it serves itself, it stops with its server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use notify::event::ModifyKind;
use notify::{EventKind, RecursiveMode, Watcher as _};
use serde_json::Value;

use super::project::Project;
use super::serve::{DEFAULT_LISTEN, ServeOptions};

/// Quiet time after the last edit before a build starts: an editor's save
/// is often several events.
const SETTLE: Duration = Duration::from_millis(100);
/// How long the server may take to load a new version.
const LOAD_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Args)]
pub(super) struct DevOptions {
    /// The plugin project: a Cargo crate with `crate-type = ["cdylib"]`, or
    /// a folder with `app.py` (Python) or `app.js` (JavaScript).
    #[arg(default_value = ".")]
    project: PathBuf,
    /// Every `serve` flag; they apply when `dev` serves itself.
    #[command(flatten)]
    serve: ServeOptions,
}

impl DevOptions {
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        // Ctrl-C ends `dev` at once, mid-build too (and with it the server
        // it runs, if any).
        tokio::spawn(async {
            let _ = tokio::signal::ctrl_c().await;
            std::process::exit(0);
        });
        let project = Project::inspect(&self.project).await?;
        let address = self.serve.listen.unwrap_or(DEFAULT_LISTEN.parse()?);
        let server = Server {
            base: format!("http://{address}"),
            token: self.serve.token.clone(),
        };
        let mut serving = None;
        let folder = match server.folder().await {
            Some(folder) => {
                say(format!(
                    "toolhost at {} serves {}: {}.wasm goes there",
                    server.base,
                    folder.display(),
                    project.id
                ));
                folder
            }
            None => {
                let folder = absolute(&self.serve.host.plugins)?;
                std::fs::create_dir_all(&folder)
                    .with_context(|| format!("cannot create {}", folder.display()))?;
                let task = tokio::spawn(self.serve.run());
                let started = Instant::now();
                while server.folder().await.is_none() {
                    if task.is_finished() {
                        return task.await?.map(|()| 0);
                    }
                    if started.elapsed() > Duration::from_secs(30) {
                        bail!("the server did not start on {address}");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                say(format!(
                    "serving {} on {} (REST at /, MCP at /mcp); Ctrl-C stops",
                    folder.display(),
                    server.base
                ));
                serving = Some(task);
                folder
            }
        };

        let (edits, mut edited) = tokio::sync::mpsc::unbounded_channel::<()>();
        let watched = project.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && is_edit(&event, &watched)
                {
                    let _ = edits.send(());
                }
            })?;
        watcher.watch(&project.dir, RecursiveMode::NonRecursive)?;
        for dir in project.source_dirs() {
            watcher.watch(&dir, RecursiveMode::Recursive)?;
        }
        // Ends when the server `dev` runs stops (Ctrl-C reaches it first).
        let server_stopped = async move {
            match serving {
                Some(task) => {
                    let _ = task.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(server_stopped);

        let mut session = Session {
            project,
            folder,
            server,
            last_hash: None,
            shown_usage: false,
        };
        session.cycle(Instant::now()).await;
        loop {
            tokio::select! {
                edit = edited.recv() => if edit.is_none() { return Ok(0) },
                () = &mut server_stopped => return Ok(0),
            }
            let edit_at = Instant::now();
            // Let the save finish: wait until no edit came for SETTLE.
            while let Ok(Some(())) = tokio::time::timeout(SETTLE, edited.recv()).await {}
            say(String::new());
            say("change seen: building ...".into());
            session.cycle(edit_at).await;
        }
    }
}

struct Session {
    project: Project,
    folder: PathBuf,
    server: Server,
    /// The content hash of the component last dropped.
    last_hash: Option<String>,
    shown_usage: bool,
}

impl Session {
    /// Build, drop, and report; `since` is when the edit was seen.
    async fn cycle(&mut self, since: Instant) {
        let built = match self.project.build().await {
            Ok(path) => path,
            Err(output) => {
                say(format!(
                    "build failed ({:.1} s); what serves is unchanged:",
                    since.elapsed().as_secs_f64()
                ));
                say(output);
                return;
            }
        };
        let build_time = since.elapsed();
        let bytes = match std::fs::read(&built) {
            Ok(bytes) => bytes,
            Err(error) => {
                say(format!(
                    "built, but cannot read {}: {error} (is the crate a cdylib?)",
                    built.display()
                ));
                return;
            }
        };
        let hash = crate::registry::loader::content_hash(&bytes);
        if self.last_hash.as_deref() == Some(hash.as_str()) {
            say("built: the component is unchanged, nothing to reload".into());
            return;
        }
        if let Err(error) = self.drop_in(&bytes) {
            say(format!(
                "cannot write into {}: {error:#}",
                self.folder.display()
            ));
            return;
        }
        // Kept only once the server settled on it: after a timeout the same
        // bytes are dropped again on the next build.
        let Some(report) = self.server.wait_for_load(&self.project.id, &hash).await else {
            say(format!(
                "the server at {} did not load {}.wasm within {} s: does it serve {}?",
                self.server.base,
                self.project.id,
                LOAD_DEADLINE.as_secs(),
                self.folder.display()
            ));
            return;
        };
        self.last_hash = Some(hash);
        let took = format!(
            "{:.1} s (build {:.1} s)",
            since.elapsed().as_secs_f64(),
            build_time.as_secs_f64()
        );
        match report["state"].as_str() {
            Some("loaded") => {
                let tools: Vec<&str> = report["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                say(format!("live in {took}: {}", tools.join(", ")));
                for warning in report["schemaWarnings"].as_array().into_iter().flatten() {
                    say(format!("warning: {}", warning.as_str().unwrap_or_default()));
                }
                if !self.shown_usage
                    && let Some(tool) = tools.first()
                {
                    self.shown_usage = true;
                    say(format!(
                        "  try: curl -s -X POST {}/tools/{tool} -H 'Content-Type: application/json' -d '{{...}}'",
                        self.server.base
                    ));
                    say(format!("  MCP: {}/mcp", self.server.base));
                }
            }
            _ => {
                let reason = report["reason"].as_str().unwrap_or("(no reason given)");
                let serving = if report["serving"].is_object() {
                    "the previous version still serves"
                } else {
                    "nothing serves yet"
                };
                say(format!("rejected after {took}; {serving}:"));
                say(format!("  {reason}"));
            }
        }
    }

    /// Writes the component beside its final name, then renames it over:
    /// the server never reads half a file.
    fn drop_in(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let id = &self.project.id;
        let temp = self.folder.join(format!(".{id}.wasm.dev-tmp"));
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, self.folder.join(format!("{id}.wasm")))?;
        Ok(())
    }
}

/// The server whose folder `dev` drops into, over its own REST API.
struct Server {
    base: String,
    token: Option<String>,
}

impl Server {
    async fn plugins(&self) -> Option<Value> {
        let url = format!("{}/plugins", self.base);
        let token = self.token.clone();
        tokio::task::spawn_blocking(move || {
            let agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(5)))
                .http_status_as_error(false)
                .build()
                .new_agent();
            let mut request = agent.get(&url);
            if let Some(token) = token {
                request = request.header("Authorization", &format!("Bearer {token}"));
            }
            let mut response = request.call().ok()?;
            response.body_mut().read_json::<Value>().ok()
        })
        .await
        .ok()
        .flatten()
    }

    /// The folder the server serves, if a toolhost answers.
    async fn folder(&self) -> Option<PathBuf> {
        let plugins = self.plugins().await?;
        plugins["folder"].as_str().map(PathBuf::from)
    }

    /// The server's report on `id` once it has settled on the version
    /// with `hash` (loaded or rejected).
    async fn wait_for_load(&self, id: &str, hash: &str) -> Option<Value> {
        let started = Instant::now();
        while started.elapsed() < LOAD_DEADLINE {
            if let Some(plugins) = self.plugins().await
                && let Some(report) = plugins["plugins"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|plugin| plugin["id"] == id)
                && report["contentHash"] == hash
                && report["state"] != "compiling"
            {
                return Some(report.clone());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        None
    }
}

/// Whether an event changes a source file of the project.
fn is_edit(event: &notify::Event, project: &Project) -> bool {
    let changes = matches!(
        event.kind,
        EventKind::Create(_)
            | EventKind::Remove(_)
            | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Name(_) | ModifyKind::Any)
    );
    changes
        && event.paths.iter().any(|path| {
            let source = project.is_source(path);
            let hidden = path
                .strip_prefix(&project.dir)
                .map(|inner| {
                    inner
                        .components()
                        .any(|part| part.as_os_str().to_string_lossy().starts_with('.'))
                })
                .unwrap_or(true);
            source && !hidden && !path.starts_with(&project.target_dir)
        })
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}

/// One line for the person at the terminal, at once.
fn say(line: String) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::project::Language;
    use notify::event::{AccessKind, AccessMode, CreateKind, DataChange};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    fn project(language: Language) -> Project {
        Project {
            dir: PathBuf::from("/p"),
            language,
            target_dir: PathBuf::from("/p/target"),
            id: "p".into(),
        }
    }

    #[test]
    fn only_source_edits_outside_target_count() {
        let project = project(Language::Rust);
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        let edit = |kind, path| is_edit(&event(kind, path), &project);
        assert!(edit(write, "/p/src/lib.rs"));
        assert!(edit(write, "/p/Cargo.toml"));
        assert!(edit(EventKind::Create(CreateKind::File), "/p/src/new.rs"));
        assert!(
            !edit(write, "/p/Cargo.lock"),
            "cargo writes it while building"
        );
        assert!(!edit(write, "/p/target/release/build/x.rs"));
        assert!(!edit(write, "/p/plugins/x.wasm"), "the served folder");
        assert!(!edit(write, "/p/.git/x.rs"));
        let read = EventKind::Access(AccessKind::Close(AccessMode::Read));
        assert!(!edit(read, "/p/src/lib.rs"), "cargo's own reads");
    }

    #[test]
    fn python_and_js_sources_count_and_their_builds_do_not() {
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        let python = project(Language::Python);
        let edit = |path| is_edit(&event(write, path), &python);
        assert!(edit("/p/app.py"));
        assert!(edit("/p/wit/plugin.wit"));
        assert!(!edit("/p/__pycache__/app.cpython-312.pyc"));
        assert!(!edit("/p/target/p.wasm"));
        assert!(!edit("/p/app.js"));
        let js = project(Language::JavaScript);
        assert!(is_edit(&event(write, "/p/app.js"), &js));
        assert!(!is_edit(&event(write, "/p/app.py"), &js));
    }
}
