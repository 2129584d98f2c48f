//! The edit → build → deliver → report loop of `toolhost dev`: watches the
//! project's sources, rebuilds on every save once the save has settled,
//! hands the component to its [`Target`] and says what became of it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use notify::event::ModifyKind;
use notify::{EventKind, RecursiveMode, Watcher as _};

use super::target::{LOAD_DEADLINE, Target};
use crate::commands::project::{Language, Project, other_modules, tool_folder_zip};
use crate::commands::remote::Outcome;
use crate::registry::report::PluginState;

/// Quiet time after the last edit before a build starts: an editor's save
/// is often several events.
const SETTLE: Duration = Duration::from_millis(100);

/// Builds now and on every save, into `target`, until Ctrl-C or until
/// the server `dev` runs (`serving`) stops.
pub(super) async fn watch_and_build(
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

    let mut session = DevSession {
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

impl DevSession {
    /// With a server that builds the project's language: its source is
    /// sent as it is saved, and the server builds it (no toolchain here).
    async fn send_source(&mut self, since: Instant) {
        let Target::Publish(publisher) = &self.target else {
            return;
        };
        let file = self
            .project
            .source
            .clone()
            .unwrap_or_else(|| self.project.dir.join(self.project.language.source_file()));
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) => return say(format!("cannot read {}: {error}", file.display())),
        };
        let hash = crate::registry::plugin::content_hash(text.as_bytes());
        if self.last_hash.as_deref() == Some(hash.as_str()) {
            return say("the source is unchanged, nothing to send".into());
        }
        say(format!(
            "sending {} to the server ...",
            self.project.language.source_file()
        ));
        let outcome = publisher
            .publish_source(&self.project.id, self.project.language, text)
            .await;
        if outcome.is_ok() {
            self.last_hash = Some(hash);
        }
        let took = format!("{:.1} s", since.elapsed().as_secs_f64());
        self.say_published(outcome, &took).await;
    }

    /// What became of a publish, said.
    async fn say_published(&mut self, outcome: anyhow::Result<Outcome>, took: &str) {
        let Target::Publish(publisher) = &self.target else {
            return;
        };
        match outcome {
            Ok(Outcome::Live(report, build)) => {
                say(format!("live in {took}: {}", report.tools.join(", ")));
                for note in build
                    .iter()
                    .flat_map(|build| build["notes"].as_array().cloned().unwrap_or_default())
                {
                    say(format!("note: {}", note.as_str().unwrap_or_default()));
                }
                for warning in &report.schema_warnings {
                    say(format!("warning: {warning}"));
                }
                if !self.shown_usage {
                    self.shown_usage = true;
                    publisher.print_usage(&report).await;
                }
            }
            Ok(Outcome::Refused(reason)) => {
                say(format!(
                    "rejected after {took}; what served before serves on:"
                ));
                say(format!("  {reason}"));
            }
            Ok(Outcome::BuildFailed { headline, log }) => {
                say(format!(
                    "the build failed after {took}; what served before serves on:"
                ));
                say(format!("  {headline}"));
                if !log.trim().is_empty() {
                    say(format!("the build's log (its end):\n{}", log.trim_end()));
                }
            }
            Err(error) => say(format!("cannot publish: {error:#}")),
        }
    }
}

struct DevSession {
    project: Project,
    folder: PathBuf,
    target: Target,
    /// The content hash of the component last dropped.
    last_hash: Option<String>,
    shown_usage: bool,
}

impl DevSession {
    /// Build, drop, and report; `since` is when the edit was seen.
    async fn cycle(&mut self, since: Instant) {
        if let Target::Publish(publisher) = &self.target
            && publisher.builds(self.project.language)
        {
            return self.send_source(since).await;
        }
        // A Python folder of more than app.py, with no toolchain project
        // around it: the folder, zipped, as the server takes it.
        if !matches!(self.target, Target::Publish(_))
            && self.project.language == Language::Python
            && self.project.source.as_deref() == Some(&*self.project.dir.join("app.py"))
            && !self.project.dir.join("wit").is_dir()
            && !other_modules(&self.project.dir, Language::Python).is_empty()
        {
            return match tool_folder_zip(&self.project.dir) {
                Ok(zip) => self.drop_and_report(&zip, "zip", since, None).await,
                Err(error) => say(format!(
                    "cannot zip {}: {error:#}",
                    self.project.dir.display()
                )),
            };
        }
        // A source its language's runtime serves: the file itself, no build.
        if !matches!(self.target, Target::Publish(_))
            && let Some((language, text)) = self.project.runtime_source()
        {
            return self
                .drop_and_report(text.as_bytes(), language.extension(), since, None)
                .await;
        }
        let built = match self.project.build().await {
            Ok(path) => path,
            Err(output) => {
                say(format!(
                    "build failed ({:.1} s); what serves is unchanged:",
                    since.elapsed().as_secs_f64()
                ));
                say(output.to_string());
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
        let hash = crate::registry::plugin::content_hash(&bytes);
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
            if outcome.is_ok() {
                self.last_hash = Some(hash);
            }
            self.say_published(outcome, &took).await;
            return;
        }
        self.drop_and_report(&bytes, "wasm", since, Some(build_time))
            .await;
    }

    /// Drops `bytes` into the folder as the plugin's file with `extension`
    /// (a component, or a source its runtime serves), and says what became
    /// of it.
    async fn drop_and_report(
        &mut self,
        bytes: &[u8],
        extension: &str,
        since: Instant,
        build_time: Option<Duration>,
    ) {
        let hash = crate::registry::plugin::content_hash(bytes);
        if self.last_hash.as_deref() == Some(hash.as_str()) {
            say("the plugin is unchanged, nothing to reload".into());
            return;
        }
        if let Err(error) = self.drop_in(bytes, extension) {
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
            .wait_for_load(self.plugin_file(extension), &self.project.id, &hash)
            .await
        else {
            say(format!(
                "the server at {} did not load {}.{extension} within {} s: does it serve {}?",
                self.target.server().base,
                self.project.id,
                LOAD_DEADLINE.as_secs(),
                self.folder.display()
            ));
            return;
        };
        self.last_hash = Some(hash);
        let took = match build_time {
            Some(build) => format!(
                "{:.1} s (build {:.1} s)",
                since.elapsed().as_secs_f64(),
                build.as_secs_f64()
            ),
            None => format!(
                "{:.1} s (no build: its runtime runs it)",
                since.elapsed().as_secs_f64()
            ),
        };
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
            PluginState::Pending => {
                let reason = report.reason.as_deref().unwrap_or("awaiting approval");
                let serving = if report.serving.is_some() {
                    "the approved version serves until an admin approves"
                } else {
                    "it serves once an admin approves"
                };
                say(format!("held for approval after {took}; {serving}:"));
                say(format!("  {reason}"));
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

    /// Writes the plugin's file beside its final name, then renames it
    /// over: the server never reads half a file. Its other files go (a
    /// component would count before a source of the same name).
    fn drop_in(&self, bytes: &[u8], extension: &str) -> anyhow::Result<()> {
        let id = &self.project.id;
        let temp = self.folder.join(format!(".{id}.{extension}.dev-tmp"));
        std::fs::write(&temp, bytes)?;
        let file = self.plugin_file(extension);
        for other in crate::registry::layout::siblings(&file) {
            std::fs::remove_file(other)?;
        }
        std::fs::rename(&temp, file)?;
        Ok(())
    }

    /// Where the plugin's file with `extension` is dropped.
    fn plugin_file(&self, extension: &str) -> PathBuf {
        self.folder.join(format!("{}.{extension}", self.project.id))
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

/// One line for the person at the terminal, at once.
pub(super) fn say(line: String) {
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
            source: None,
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
