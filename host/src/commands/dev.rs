//! `toolhost dev [PROJECT]`: edit, save, live. Watches a plugin project's
//! sources, rebuilds it on every save (`cargo build --release --target
//! wasm32-wasip2`), drops the component into the served folder atomically
//! (write beside, then rename), and prints what became of it: the build
//! error, or the tools now live, or the exact reason the host rejected the
//! new version while the old one keeps serving.
//!
//! Which server: if a toolhost already answers at `--listen` (default
//! 127.0.0.1:8000), the component goes into the folder that server serves
//! (`GET /plugins` says which) and the load result is read back from that
//! server's `/plugins`; otherwise `dev` opens a [`Host`] itself, exactly as
//! `toolhost serve` would with the same flags (`--plugins`, default
//! `plugins`), serves it, and waits on the host's load events. A folder
//! given with `--plugins` (or `TOOLHOST_PLUGINS`) is always the one built
//! into: when the server at `--listen` serves another, `dev` serves that
//! folder itself on a free port of the same address and says so. Either
//! way what `dev` prints is what callers get.
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

use anyhow::Context;
use clap::Args;
use notify::event::ModifyKind;
use notify::{EventKind, RecursiveMode, Watcher as _};

use super::project::Project;
use super::push::{Outcome, Publisher, ServerOptions};
use super::serve::{DEFAULT_LISTEN, ServeOptions};
use crate::Host;
use crate::registry::report::{PluginReport, PluginState, PluginsReport};

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
    /// Publish each build onto this toolhost server (into your namespace,
    /// with `--token`), instead of serving or writing a folder.
    #[arg(long = "server", env = "TOOLHOST_SERVER")]
    server_url: Option<String>,
    /// Every `serve` flag; they apply when `dev` serves itself.
    #[command(flatten)]
    serve: ServeOptions,
}

impl DevOptions {
    pub(super) async fn run(mut self) -> anyhow::Result<u8> {
        // Ctrl-C ends `dev` at once, mid-build too (and with it the server
        // it runs, if any).
        tokio::spawn(async {
            let _ = tokio::signal::ctrl_c().await;
            std::process::exit(0);
        });
        let project = Project::inspect(&self.project).await?;
        if let Some(url) = self.server_url.clone() {
            let options = ServerOptions {
                url,
                token: self.serve.token.clone(),
            };
            let publisher = Publisher::connect(&options).await?;
            say(format!(
                "publishing {} as {} on {}",
                project.id,
                publisher.plugin_id(&project.id),
                options.url
            ));
            return watch_and_build(project, PathBuf::new(), Target::Publish(publisher), None)
                .await;
        }
        let address = self.serve.listen.unwrap_or(DEFAULT_LISTEN.parse()?);
        let mut server = Server {
            base: format!("http://{address}"),
            token: self.serve.token.clone(),
        };
        let mut serving = None;
        let asked_for = plugins_given().then(|| absolute(&self.serve.host.plugins));
        let remote = match (server.folder().await, asked_for) {
            (Some(folder), Some(Ok(asked))) if !same_folder(&folder, &asked) => {
                // The folder asked for is not the one that server serves:
                // serve it here, beside that server.
                let free = std::net::TcpListener::bind((address.ip(), 0))?.local_addr()?;
                say(format!(
                    "toolhost at {} serves {}, not {}: serving {} on http://{free} instead",
                    server.base,
                    folder.display(),
                    asked.display(),
                    asked.display()
                ));
                self.serve.listen = Some(free);
                server.base = format!("http://{free}");
                None
            }
            (found, _) => found,
        };
        let (folder, target) = match remote {
            Some(folder) => {
                say(format!(
                    "toolhost at {} serves {}: {}.wasm goes there",
                    server.base,
                    folder.display(),
                    project.id
                ));
                (folder, Target::Remote(server))
            }
            None => {
                let folder = absolute(&self.serve.host.plugins)?;
                std::fs::create_dir_all(&folder)
                    .with_context(|| format!("cannot create {}", folder.display()))?;
                let host = Host::open(self.serve.host_config()).await?;
                let served = host.clone();
                let serve = self.serve;
                let task = tokio::spawn(async move { serve.serve(served).await });
                say(format!(
                    "serving {} on {} (REST at /, MCP at /mcp); Ctrl-C stops",
                    folder.display(),
                    server.base
                ));
                serving = Some(task);
                (folder, Target::Local { host, server })
            }
        };

        watch_and_build(project, folder, target, serving).await
    }
}

/// Builds now and on every save, into `target`, until Ctrl-C or until
/// the server `dev` runs (`serving`) stops.
async fn watch_and_build(
    project: Project,
    folder: PathBuf,
    target: Target,
    serving: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
) -> anyhow::Result<u8> {
    let (edits, mut edited) = tokio::sync::mpsc::unbounded_channel::<()>();
    let watched = project.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
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
            Some(task) => task.await?,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(server_stopped);

    let mut session = Session {
        project,
        folder,
        target,
        last_hash: None,
        shown_usage: false,
    };
    session.cycle(Instant::now()).await;
    loop {
        tokio::select! {
            edit = edited.recv() => if edit.is_none() { return Ok(0) },
            stopped = &mut server_stopped => return stopped.map(|()| 0),
        }
        let edit_at = Instant::now();
        // Let the save finish: wait until no edit came for SETTLE.
        while let Ok(Some(())) = tokio::time::timeout(SETTLE, edited.recv()).await {}
        say(String::new());
        say("change seen: building ...".into());
        session.cycle(edit_at).await;
    }
}

struct Session {
    project: Project,
    folder: PathBuf,
    target: Target,
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
        if let Target::Publish(publisher) = &self.target {
            let outcome = publisher.publish(&self.project.id, bytes).await;
            let took = format!(
                "{:.1} s (build {:.1} s)",
                since.elapsed().as_secs_f64(),
                build_time.as_secs_f64()
            );
            match outcome {
                Ok(Outcome::Live(report)) => {
                    self.last_hash = Some(hash);
                    say(format!("live in {took}: {}", report.tools.join(", ")));
                    for warning in &report.schema_warnings {
                        say(format!("warning: {warning}"));
                    }
                    if !self.shown_usage {
                        self.shown_usage = true;
                        publisher.print_usage(&report);
                    }
                }
                Ok(Outcome::Refused(reason)) => {
                    self.last_hash = Some(hash);
                    say(format!(
                        "rejected after {took}; what served before serves on:"
                    ));
                    say(format!("  {reason}"));
                }
                Err(error) => say(format!("cannot publish: {error:#}")),
            }
            return;
        }
        // Listen before dropping, so the outcome cannot slip past.
        let events = match &self.target {
            Target::Local { host, .. } => Some(host.events()),
            Target::Remote(_) | Target::Publish(_) => None,
        };
        if let Err(error) = self.drop_in(&bytes) {
            say(format!(
                "cannot write into {}: {error:#}",
                self.folder.display()
            ));
            return;
        }
        // Kept only once the server settled on it: after a timeout the same
        // bytes are dropped again on the next build.
        let Some(report) = self
            .target
            .wait_for_load(events, &self.project.id, &hash)
            .await
        else {
            say(format!(
                "the server at {} did not load {}.wasm within {} s: does it serve {}?",
                self.target.server().base,
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
        let base = &self.target.server().base;
        match report.state {
            PluginState::Loaded => {
                let tools = &report.tools;
                say(format!("live in {took}: {}", tools.join(", ")));
                for warning in &report.schema_warnings {
                    say(format!("warning: {warning}"));
                }
                if !self.shown_usage
                    && let Some(tool) = tools.first()
                {
                    self.shown_usage = true;
                    say(format!(
                        "  try: curl -s -X POST {base}/tools/{tool} -H 'Content-Type: application/json' -d '{{...}}'"
                    ));
                    say(format!("  MCP: {base}/mcp"));
                }
            }
            PluginState::Rejected | PluginState::Compiling => {
                let reason = report.reason.as_deref().unwrap_or("(no reason given)");
                let serving = if report.serving.is_some() {
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

/// Where the load outcome is read: the host `dev` opened itself (its
/// events), or another toolhost's `/plugins`.
enum Target {
    Local {
        host: Host,
        server: Server,
    },
    Remote(Server),
    /// Published over HTTP (`dev --server`), as `toolhost push` does.
    Publish(Publisher),
}

impl Target {
    fn server(&self) -> &Server {
        match self {
            Target::Local { server, .. } | Target::Remote(server) => server,
            Target::Publish(_) => unreachable!("a publishing session reads no folder"),
        }
    }

    /// The report on `id` once its version with `hash` has settled (loaded
    /// or rejected), or `None` after [`LOAD_DEADLINE`].
    async fn wait_for_load(
        &self,
        events: Option<tokio::sync::broadcast::Receiver<crate::registry::events::LoadEvent>>,
        id: &str,
        hash: &str,
    ) -> Option<PluginReport> {
        match (self, events) {
            (Target::Local { host, .. }, Some(mut events)) => {
                let settled = async {
                    // The same bytes as what already serves (or was refused)
                    // are not loaded again, so no event comes for them.
                    if let Some(report) = host.plugins().plugin(id)
                        && settled(report, hash)
                    {
                        return Some(report.clone());
                    }
                    loop {
                        match events.recv().await {
                            Ok(event) if event.plugin == id && event.settles(hash) => {
                                return Some(event.report);
                            }
                            Ok(_) => {}
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                                if let Some(report) = host.plugins().plugin(id)
                                    && settled(report, hash)
                                {
                                    return Some(report.clone());
                                }
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                };
                tokio::time::timeout(LOAD_DEADLINE, settled)
                    .await
                    .ok()
                    .flatten()
            }
            (target, _) => target.server().wait_for_load(id, hash).await,
        }
    }
}

/// Whether `report` shows the version with `hash` settled.
fn settled(report: &PluginReport, hash: &str) -> bool {
    report.content_hash.as_deref() == Some(hash) && report.compiling.is_none()
}

/// A toolhost server, over its own REST API.
struct Server {
    base: String,
    token: Option<String>,
}

impl Server {
    async fn plugins(&self) -> Option<PluginsReport> {
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
            response.body_mut().read_json::<PluginsReport>().ok()
        })
        .await
        .ok()
        .flatten()
    }

    /// The folder the server serves, if a toolhost answers.
    async fn folder(&self) -> Option<PathBuf> {
        self.plugins().await?.folder.map(PathBuf::from)
    }

    /// The server's report on `id` once it has settled on the version
    /// with `hash` (loaded or rejected).
    async fn wait_for_load(&self, id: &str, hash: &str) -> Option<PluginReport> {
        let started = Instant::now();
        while started.elapsed() < LOAD_DEADLINE {
            if let Some(plugins) = self.plugins().await
                && let Some(report) = plugins.plugin(id)
                && settled(report, hash)
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

/// Whether the plugin folder was named on the command line or in the
/// environment (and so must be the one built into), not defaulted. Only
/// the long form exists, `--plugins DIR` or `--plugins=DIR`.
fn plugins_given() -> bool {
    std::env::var_os("TOOLHOST_PLUGINS").is_some()
        || std::env::args_os().any(|arg| {
            let arg = arg.to_string_lossy();
            arg == "--plugins" || arg.starts_with("--plugins=")
        })
}

/// Whether two paths name the same folder (one may not exist yet).
fn same_folder(a: &Path, b: &Path) -> bool {
    let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    canonical(a) == canonical(b)
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
