//! Published source built into a component on the server: one `app.py` or
//! `app.js`, with the helper library (`toolhost_plugin.py`, `toolhost.js`)
//! and the contract (`wit/plugin.wit`) the server supplies, built by the
//! toolchain the server pins (componentize-py, componentize-qjs) with the
//! same recipe `toolhost dev` runs ([`recipe`]).
//!
//! Both toolchains run the author's code at build time inside a
//! WebAssembly engine (CPython and QuickJS compiled to wasm), never as
//! native code; but the toolchains themselves are native, and decide what
//! that code may touch, so each build is contained ([`contain`]: bubblewrap,
//! a read-only view of the system and the toolchain, its scratch folder the
//! one place it writes, the environment decided here; builds are refused
//! where that cannot run, unless the operator opts out of it). Rust is never
//! built here (build scripts and proc macros run natively). Builds are
//! opt-in (`--builds python,js`), and each one is bounded ([`child`]): a
//! scratch folder removed afterwards, a wall-clock, a memory and a disk
//! limit, a bounded log, no network, a low CPU priority (nice 10). They
//! queue ([`queue`]): a slot each (one per core by default), one at a time
//! per person, a newer source replacing the person's one that waits, and a
//! build past its first slice (`--build-slice-secs`) giving its slot to
//! the next in line and going on at the lowest priority. Builds write in
//! folders of their own ([`scratch`]), and what a build made is read only
//! as a regular file the server opens itself.
//!
//! A failure answers with the author's line first
//! ([`authors_line`]). Each
//! stage is told to whoever listens ([`BuildEvent`]: the event feed).
//! Nothing here knows HTTP: the front turns outcomes into answers.

pub(crate) mod child;
pub(crate) mod contain;
pub(crate) mod line;
mod queue;
pub(crate) mod recipe;
pub(crate) mod room;
pub(crate) mod scratch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;

use self::child::{BuildsIn, Disk, Ended, Limits};
use self::contain::{Containment, Folders};
use self::recipe::{Language, Sources, ToolchainMissing, world_of};
use self::scratch::{OutputRefused, Scratch};
use crate::languages::authors_line;

const PLUGIN_WIT: &str = include_str!("../../../wit/plugin.wit");
const PYTHON_HELPER: &str = include_str!("../../../sdk/python/toolhost_plugin.py");
const JS_HELPER: &str = include_str!("../../../sdk/js/toolhost.js");

/// How builds run on this server; each limit has a flag (`toolhost serve
/// --build-*`).
#[derive(Debug, Clone)]
pub struct BuildSettings {
    /// The languages built here (`--builds`); none: builds are off.
    pub languages: Vec<String>,
    /// `--build-timeout-secs`.
    pub timeout: Duration,
    /// `--build-memory-mib`.
    pub memory_bytes: u64,
    /// `--build-log-kib`: how much of a build's output is kept.
    pub log_bytes: usize,
    /// `--max-source-kib`: the largest source accepted.
    pub max_source_bytes: usize,
    /// `--max-builds`: how many run at once (one per core by default).
    pub slots: usize,
    /// `--build-disk-mib`: how much one build may write, in all.
    pub disk_bytes: u64,
    /// `--build-slice-secs`: how long a build holds its slot while others
    /// wait; past it, it goes on beside the next one.
    pub slice: Duration,
    /// `--builds-uncontained`: build where bubblewrap cannot run, with the
    /// toolchain as the server's user.
    pub uncontained: bool,
}

impl BuildSettings {
    pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
    pub const DEFAULT_MEMORY_MIB: u64 = 2048;
    pub const DEFAULT_LOG_KIB: usize = 64;
    pub const DEFAULT_MAX_SOURCE_KIB: usize = 256;
    pub const DEFAULT_DISK_MIB: u64 = 1024;
    pub const DEFAULT_SLICE_SECS: u64 = 30;

    /// One build per core.
    pub fn default_slots() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

impl Default for BuildSettings {
    fn default() -> Self {
        BuildSettings {
            languages: Vec::new(),
            timeout: Duration::from_secs(Self::DEFAULT_TIMEOUT_SECS),
            memory_bytes: Self::DEFAULT_MEMORY_MIB << 20,
            log_bytes: Self::DEFAULT_LOG_KIB << 10,
            max_source_bytes: Self::DEFAULT_MAX_SOURCE_KIB << 10,
            slots: Self::default_slots(),
            disk_bytes: Self::DEFAULT_DISK_MIB << 20,
            slice: Duration::from_secs(Self::DEFAULT_SLICE_SECS),
            uncontained: false,
        }
    }
}

/// One source to build.
pub(crate) struct Source {
    pub(crate) language: Language,
    pub(crate) text: String,
}

/// A build that made a component.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) wasm: Vec<u8>,
    /// How long the toolchain ran.
    pub(crate) took: Duration,
    /// How long it waited for its turn.
    pub(crate) waited: Duration,
    /// The most memory the build's processes held at once.
    pub(crate) peak_memory_bytes: u64,
    /// The most its scratch folder held at once.
    pub(crate) peak_disk_bytes: u64,
    /// What the author should know though it built (imports only inside
    /// functions, added to the component).
    pub(crate) notes: Vec<String>,
    /// The replica that built it, where it was not this one (`room.rs`).
    pub(crate) replica: Option<String>,
}

/// Why a source made no component.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The server does not build this language.
    #[error("{0}")]
    NotBuiltHere(String),
    /// The toolchain refused the source: its error, the author's line, and
    /// the end of its log.
    #[error("{headline}")]
    Failed {
        headline: String,
        line: Option<u32>,
        log: String,
        took: Duration,
    },
    /// It ran past `--build-timeout-secs`.
    #[error(
        "the build ran past its {}-second limit and was stopped (--build-timeout-secs): \
         is there a loop at import, outside every function?",
        limit.as_secs()
    )]
    TimedOut { limit: Duration, log: String },
    /// Its processes held more than `--build-memory-mib`.
    #[error(
        "the build held more than {} MiB and was stopped (--build-memory-mib): does the \
         code allocate without end at import?",
        limit >> 20
    )]
    OutOfMemory { limit: u64, log: String },
    /// It wrote more than `--build-disk-mib`.
    #[error(
        "the build wrote more than {} MiB and was stopped (--build-disk-mib): does the code \
         write files without end at import?",
        limit >> 20
    )]
    OutOfDisk { limit: u64, log: String },
    /// It left a link or a special file where the server reads, which is
    /// never followed or read.
    #[error(
        "the build left {kind} at {path}, where the server reads what a build made; a link \
         or special file there is never followed: does the code make links at import?"
    )]
    LeftBehind { path: String, kind: &'static str },
    /// What it made is larger than a plugin may be.
    #[error(
        "the component built from this source is {size} bytes, over the {limit} a plugin may \
         be (--max-plugin-mib)"
    )]
    TooLarge { size: u64, limit: u64 },
    /// Builds cannot be contained here, and the operator did not opt out.
    #[error("{0}")]
    Unavailable(String),
    /// Another replica ran it, and it ended so (`room.rs`).
    #[error("{0}")]
    Elsewhere(String),
    /// A newer source from the same person replaced it while it waited.
    #[error("a newer source from the same person replaced this one before it was built")]
    Replaced,
    /// The toolchain is not installed on the server.
    #[error("the server cannot build {language}: {reason}")]
    Toolchain {
        language: &'static str,
        #[source]
        reason: ToolchainMissing,
    },
    /// The toolchain is not installed on the server, said before a build
    /// is asked for ([`Builds::builds`]).
    #[error(transparent)]
    NoToolchain(ToolchainMissing),
    #[error("the build could not run: {0}")]
    Io(#[from] std::io::Error),
}

/// A `--builds` language the server does not build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BuildsFlag {
    #[error(
        "--builds: Rust is never built on a server (its build scripts and macros run \
         natively); publish a Rust tool as a built component"
    )]
    Rust,
    /// No language of that name.
    #[error("--builds: {0:?} is no language built here (python, js)")]
    Unknown(String),
}

/// A build's stage, told as it happens.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BuildEvent {
    /// The plugin (`namespace/name`).
    pub(crate) plugin: String,
    pub(crate) person: String,
    pub(crate) language: &'static str,
    /// `queued`, `building`, `built` or `failed`.
    pub(crate) stage: &'static str,
    /// With `built` and `failed`: how long the toolchain ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seconds: Option<f64>,
    /// With `failed`: the author's line and error (their plugin only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    /// With `queued`: its place in the line (1 is next).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) position: Option<usize>,
    /// With `queued` and `building`: about how long until it is live,
    /// from the server's recent build times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimate_seconds: Option<f64>,
    /// The publisher's own number for this publish (the page's), so that
    /// what belongs to an older publish of theirs can be told apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) publish: Option<String>,
}

/// A build's place in the line: left when it ends ([`LeavesLine::ended`],
/// with its build time), or on any other way out (dropped: a replacement,
/// a panic).
struct LeavesLine<'a> {
    line: &'a line::Line,
    ticket: u64,
    took: Option<Duration>,
}

impl LeavesLine<'_> {
    /// The build ran to an end in `took` (a time for the estimates).
    fn ended(mut self, took: Option<Duration>) {
        self.took = took;
    }
}

impl Drop for LeavesLine<'_> {
    fn drop(&mut self) {
        self.line.leave(self.ticket, self.took);
    }
}

/// The server's builds: settings, the queue, and who listens.
pub(crate) struct Builds {
    settings: BuildSettings,
    languages: Vec<Language>,
    /// How builds are contained here (found at start-up).
    containment: Containment,
    /// This server's folder for builds (none where builds are off).
    scratch: Option<Scratch>,
    queue: queue::Queue,
    /// The line as people see it.
    line: line::Line,
    /// The lines of the other replicas sharing a store, as last heard
    /// (`publishing/shared_line.rs`); its listeners hear each move.
    elsewhere: tokio::sync::watch::Sender<line::LineView>,
    events: broadcast::Sender<BuildEvent>,
    /// Where replicas share a store: the room builds are handed to when
    /// no slot here is free.
    room: std::sync::OnceLock<Arc<dyn room::Room>>,
}

impl Builds {
    /// The builds `settings` turn on; an error names a language that is
    /// not built on a server (Rust) or not known.
    pub(crate) fn new(settings: BuildSettings) -> Result<Arc<Builds>, BuildsFlag> {
        let mut languages = Vec::new();
        for name in &settings.languages {
            let language = match Language::of_name(name) {
                Some(Language::Rust) => return Err(BuildsFlag::Rust),
                Some(language) => language,
                None => {
                    return Err(BuildsFlag::Unknown(name.trim().to_ascii_lowercase()));
                }
            };
            if !languages.contains(&language) {
                languages.push(language);
            }
        }
        let (containment, scratch) = if languages.is_empty() {
            (
                Containment::Unavailable("this server builds no source".into()),
                None,
            )
        } else {
            match Scratch::open() {
                Ok(scratch) => (Containment::find(settings.uncontained), Some(scratch)),
                Err(error) => (
                    Containment::Unavailable(format!(
                        "builds are off: their folder could not be made in {} ({error})",
                        std::env::temp_dir().display()
                    )),
                    None,
                ),
            }
        };
        let named = languages
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join(",");
        match &containment {
            _ if languages.is_empty() => {}
            Containment::Sandbox { bwrap, .. } => tracing::info!(
                languages = %named,
                slots = settings.slots,
                contained = %bwrap.display(),
                "building published source, each build contained by bubblewrap"
            ),
            Containment::Uncontained(network) => tracing::warn!(
                languages = %named,
                slots = settings.slots,
                network = ?network,
                "building published source UNCONTAINED (--builds-uncontained): each toolchain \
                 runs as this server's user and sees its files"
            ),
            Containment::Unavailable(why) => tracing::error!(languages = %named, "{why}"),
        }
        let (events, _) = broadcast::channel(256);
        Ok(Arc::new(Builds {
            containment,
            scratch,
            queue: queue::Queue::new(settings.slots),
            line: line::Line::new(settings.slots),
            elsewhere: tokio::sync::watch::Sender::default(),
            settings,
            languages,
            events,
            room: std::sync::OnceLock::new(),
        }))
    }

    pub(crate) fn settings(&self) -> &BuildSettings {
        &self.settings
    }

    /// How builds are contained here: `bubblewrap`, `uncontained` or `off`.
    pub(crate) fn containment(&self) -> &'static str {
        self.containment.as_str()
    }

    /// Every build stage from now on.
    pub(crate) fn events(&self) -> broadcast::Receiver<BuildEvent> {
        self.events.subscribe()
    }

    /// The room's line now: what waits, in order, and what builds, here
    /// and on the other replicas sharing a store.
    pub(crate) fn line(&self) -> line::LineView {
        self.line.view().with(&self.elsewhere.borrow())
    }

    /// This replica's own line, as it is shared with the others.
    pub(crate) fn own_line(&self) -> line::LineView {
        self.line.view()
    }

    /// The other replicas' lines, as just heard; those listening hear of
    /// it if it moved.
    pub(crate) fn set_elsewhere(&self, view: line::LineView) {
        self.elsewhere.send_if_modified(|elsewhere| {
            let moved = *elsewhere != view;
            if moved {
                *elsewhere = view;
            }
            moved
        });
    }

    /// Told each time another replica's line moved.
    pub(crate) fn moves_elsewhere(&self) -> tokio::sync::watch::Receiver<line::LineView> {
        self.elsewhere.subscribe()
    }

    /// Why a source of `language` is not built here, if it is not.
    pub(crate) fn refuse(&self, language: Option<Language>) -> Option<String> {
        let here = if self.languages.is_empty() {
            "this server builds no source (toolhost serve --builds python,js turns builds on)"
                .to_string()
        } else {
            format!(
                "this server builds {} source (application/wasm is always taken)",
                self.languages
                    .iter()
                    .map(|l| match l {
                        Language::Python => "Python (text/x-python)",
                        _ => "JavaScript (text/javascript)",
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            )
        };
        match language {
            Some(language) if self.languages.contains(&language) => None,
            Some(Language::Rust) => Some(format!(
                "{here}; Rust is never built on a server: build it where you write it \
                 (cargo build --release --target wasm32-wasip2) and publish the component \
                 (toolhost push target/wasm32-wasip2/release/NAME.wasm)"
            )),
            _ => Some(here),
        }
    }

    /// Whether a source of `language` can be built here: the language is
    /// built (`--builds`), builds can be contained, and its toolchain is
    /// installed. Else why not: [`BuildError::NotBuiltHere`],
    /// [`BuildError::Unavailable`] or [`BuildError::NoToolchain`].
    pub(crate) fn builds(&self, language: Language) -> Result<(), BuildError> {
        match self.program(language) {
            Ok(_) => Ok(()),
            Err(BuildError::Toolchain { reason, .. }) => Err(BuildError::NoToolchain(reason)),
            Err(other) => Err(other),
        }
    }

    /// Builds `source` as plugin `plugin` for `person`: waits its turn,
    /// runs the toolchain under the limits, and answers with the component
    /// or why there is none. `publish` is the publisher's own number for
    /// it, told back with each stage.
    pub(crate) async fn build(
        &self,
        person: &str,
        plugin: &str,
        source: &Source,
        max_output: u64,
        publish: Option<&str>,
    ) -> Result<Built, BuildError> {
        let program = self.program(source.language)?;
        let tell = |stage: &'static str,
                    seconds: Option<f64>,
                    error: Option<String>,
                    line: Option<u32>,
                    standing: Option<line::Standing>| {
            let _ = self.events.send(BuildEvent {
                plugin: plugin.to_string(),
                person: person.to_string(),
                language: source.language.as_str(),
                stage,
                seconds,
                error,
                line,
                position: standing.and_then(|s| s.position),
                estimate_seconds: standing.and_then(|s| s.estimate_seconds),
                publish: publish.map(str::to_string),
            });
        };
        let (ticket, standing) = self.line.join(line::Joining {
            plugin,
            person,
            language: source.language.as_str(),
            publish,
        });
        // However this ends (an answer, a replacement, a panic), the
        // build leaves the line.
        let in_line = LeavesLine {
            line: &self.line,
            ticket,
            took: None,
        };
        tell("queued", None, None, None, Some(standing));
        let asked = Instant::now();
        // Behind a build of its own person's, it is told again once it
        // waits for a slot (its lane its own): its place is then the one
        // the slots will serve.
        let behind_own = standing.behind_own;
        let handed = self.room.get().map(|room| {
            let job = room::Job {
                id: room::Job::new_id(),
                origin: room.replica().to_string(),
                person: person.to_string(),
                plugin: plugin.to_string(),
                language: source.language.as_str().to_string(),
                text: source.text.clone(),
                max_output,
            };
            (room.clone(), job)
        });
        let turn = self
            .queue
            .turn_with(person, || async {
                let standing = self.line.waiting_for_slot(ticket);
                if behind_own {
                    tell("queued", None, None, None, Some(standing));
                }
                match handed {
                    Some((room, job)) => room::wait(room, &self.queue, job, |replica| {
                        tracing::info!(plugin, person, %replica, "a build runs on another replica");
                        let standing = self.line.building(ticket);
                        tell("building", None, None, None, Some(standing));
                    })
                    .await,
                    None => room::Place::Here(Some(self.queue.slot().await)),
                }
            })
            .await;
        self.queue.tidy();
        let Ok(turn) = turn else {
            drop(in_line);
            tell(
                "failed",
                None,
                Some(BuildError::Replaced.to_string()),
                None,
                None,
            );
            return Err(BuildError::Replaced);
        };
        let (lane, place) = turn.split();
        // Taken by another replica, it runs: only its outcome is waited for
        // (or a slot here, if that replica stops first).
        let place = match place {
            room::Place::Taken(elsewhere) => elsewhere.outcome(&self.queue).await,
            place => place,
        };
        let outcome = match place {
            room::Place::Done(outcome) => outcome,
            room::Place::Taken(_) => unreachable!("followed to its end"),
            room::Place::Here(slot) => {
                let standing = self.line.building(ticket);
                tell("building", None, None, None, Some(standing));
                self.run_in_slot(&program, source, max_output, slot, plugin, person)
                    .await
            }
        };
        let waited = asked
            .elapsed()
            .saturating_sub(outcome.as_ref().map_or(Duration::ZERO, |built| built.took));
        drop(lane);
        let took = match &outcome {
            Ok(built) => Some(built.took),
            Err(BuildError::Failed { took, .. }) => Some(*took),
            Err(_) => None,
        };
        in_line.ended(took);
        match &outcome {
            Ok(built) => tell("built", Some(built.took.as_secs_f64()), None, None, None),
            Err(BuildError::Failed {
                headline,
                line,
                took,
                ..
            }) => tell(
                "failed",
                Some(took.as_secs_f64()),
                Some(headline.clone()),
                *line,
                None,
            ),
            Err(other) => tell("failed", None, Some(other.to_string()), None, None),
        }
        outcome.map(|built| Built { waited, ..built })
    }

    /// The toolchain that builds `language` here, or why none does: the
    /// language is not built here, builds cannot be contained, or the
    /// toolchain is not installed.
    fn program(&self, language: Language) -> Result<std::path::PathBuf, BuildError> {
        if let Some(reason) = self.refuse(Some(language)) {
            return Err(BuildError::NotBuiltHere(reason));
        }
        if let Some(why) = self.containment.refusal() {
            return Err(BuildError::Unavailable(why.to_string()));
        }
        let toolchain = recipe::toolchain(language)
            .ok_or_else(|| BuildError::NotBuiltHere("no toolchain builds it".into()))?;
        toolchain.find().map_err(|reason| BuildError::Toolchain {
            language: language.as_str(),
            reason,
        })
    }

    /// Runs `source` in `slot`; past its first slice, a build goes on
    /// beside the next in line, at the lowest priority: endless loops at
    /// import hold no slot.
    async fn run_in_slot(
        &self,
        program: &std::path::Path,
        source: &Source,
        max_output: u64,
        mut slot: Option<tokio::sync::OwnedSemaphorePermit>,
        plugin: &str,
        person: &str,
    ) -> Result<Built, BuildError> {
        let gave_way = std::sync::atomic::AtomicBool::new(false);
        let running = self.run(program, source, max_output, &gave_way);
        tokio::pin!(running);
        tokio::select! {
            outcome = &mut running => outcome,
            () = tokio::time::sleep(self.settings.slice) => {
                if slot.take().is_some() {
                    gave_way.store(true, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!(plugin, person, "a build past its first slice gives its slot to the next");
                }
                running.await
            }
        }
    }

    /// Hands the builds that find no free slot here to `room`, from now on.
    pub(crate) fn share_with(&self, room: Arc<dyn room::Room>) {
        let _ = self.room.set(room);
    }

    /// The languages this replica can build now (for the room's offers).
    pub(crate) fn languages_built(&self) -> Vec<Language> {
        self.languages
            .iter()
            .copied()
            .filter(|language| self.builds(*language).is_ok())
            .collect()
    }

    /// A slot here, once one is free.
    pub(crate) async fn slot(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.queue.slot().await
    }

    /// Builds `job`, handed here by the replica it was published on, in
    /// `slot`, into a component of at most `max_output` bytes. It is in
    /// that replica's line, not this one's.
    pub(crate) async fn build_handed(
        &self,
        job: &room::Job,
        slot: tokio::sync::OwnedSemaphorePermit,
        max_output: u64,
    ) -> Result<Built, BuildError> {
        let language = Language::of_name(&job.language).ok_or_else(|| {
            BuildError::NotBuiltHere(format!("{:?} is not built here", job.language))
        })?;
        let program = self.program(language)?;
        let source = Source {
            language,
            text: job.text.clone(),
        };
        self.run_in_slot(
            &program,
            &source,
            max_output,
            Some(slot),
            &job.plugin,
            &job.person,
        )
        .await
    }

    /// One build in folders of its own, removed afterwards.
    async fn run(
        &self,
        program: &std::path::Path,
        source: &Source,
        max_output: u64,
        gave_way: &std::sync::atomic::AtomicBool,
    ) -> Result<Built, BuildError> {
        let folders = self
            .scratch
            .as_ref()
            .ok_or_else(|| BuildError::Unavailable("builds are off here".into()))?
            .build()?;
        let (src, out) = (folders.src(), folders.out());
        let dir = src.as_path();
        contain::prepare(dir)?;
        std::fs::create_dir_all(dir.join("wit"))?;
        std::fs::write(dir.join("wit/plugin.wit"), PLUGIN_WIT)?;
        std::fs::write(dir.join(source.language.source_file()), &source.text)?;
        let mut notes = Vec::new();
        match source.language {
            Language::Python => {
                let late = crate::languages::imports::late_imports(&source.text);
                let mut helper = PYTHON_HELPER.to_string();
                if !late.is_empty() {
                    // Imported at build time through the helper, so that
                    // they are in the component when a tool needs them.
                    let mut preload = String::from("# Modules app.py imports inside functions.\n");
                    for crate::languages::Import { line, module, .. } in &late {
                        preload.push_str(&format!(
                            "try:\n    import {module}  # noqa: F401\nexcept ImportError:\n    pass\n"
                        ));
                        notes.push(format!(
                            "app.py:{line}: `{module}` is imported inside a function; it was \
                             imported at build time too, so that it is in the component (only \
                             what is imported at build time is): import it at the top instead"
                        ));
                    }
                    std::fs::write(dir.join("toolhost_preload.py"), preload)?;
                    helper.push_str(
                        "\n\ntry:  # a server build's modules imported inside functions\n    \
                         import toolhost_preload  # noqa: F401\nexcept ImportError:\n    pass\n",
                    );
                }
                std::fs::write(dir.join("toolhost_plugin.py"), helper)?;
            }
            Language::JavaScript => std::fs::write(dir.join("toolhost.js"), JS_HELPER)?,
            Language::TypeScript | Language::Rust => unreachable!("no toolchain: refused above"),
        }
        let sources = Sources {
            world: Some(world_of(source.language, dir)),
            ..Sources::default()
        };
        let paths = Folders {
            src: dir,
            out: &out,
        };
        let output = "plugin.wasm";
        let recipe = recipe::recipe(
            source.language,
            &self.containment.output(paths, output),
            &sources,
        );
        let limits = Limits {
            wall: self.settings.timeout,
            memory_bytes: self.settings.memory_bytes,
            disk_bytes: self.settings.disk_bytes,
            log_bytes: self.settings.log_bytes,
        };
        let command = self
            .containment
            .command(program, &recipe.args, paths, limits.disk_bytes)
            .ok_or_else(|| BuildError::Unavailable("builds are off here".into()))?;
        let disk = Disk {
            builds_in: if self.containment.tmpfs() {
                BuildsIn::Tmpfs
            } else {
                BuildsIn::Folder(src.clone())
            },
            out: out.clone(),
        };
        let ran = child::run(command, disk, self.containment.network(), &limits, gave_way).await?;
        // The log names the scratch folder as the build saw it.
        let log = authors_line::clean(&ran.log, contain::INSIDE)
            .replace(&format!("{}/", dir.display()), "")
            .replace(&format!("{}/", out.display()), "");
        let log = if ran.dropped > 0 {
            format!(
                "[{} bytes of output before this were dropped]\n{log}",
                ran.dropped
            )
        } else {
            log
        };
        match ran.ended {
            Ended::Exited(true) => {
                // What the server reads of a build: no link or special
                // file left where it reads, and the component opened as
                // `scratch::read_output` says, off the async workers.
                let made = out.join(output);
                let took = ran.took;
                let read = tokio::task::spawn_blocking(move || {
                    for folder in [&out, &src] {
                        if let Some((path, kind)) = scratch::left_behind(folder) {
                            return Err(BuildError::LeftBehind {
                                path: path.display().to_string(),
                                kind,
                            });
                        }
                    }
                    scratch::read_output(&made, max_output).map_err(|refused| match refused {
                        OutputRefused::TooLarge { size, limit } => {
                            BuildError::TooLarge { size, limit }
                        }
                        OutputRefused::NotAFile(kind) => BuildError::LeftBehind {
                            path: output.to_string(),
                            kind,
                        },
                        OutputRefused::Missing => BuildError::Failed {
                            headline: refused.to_string(),
                            line: None,
                            log,
                            took,
                        },
                        OutputRefused::Io(error) => BuildError::Io(error),
                    })
                })
                .await
                .map_err(|_| BuildError::Io(std::io::Error::other("the read was stopped")))?;
                drop(folders);
                Ok(Built {
                    wasm: read?,
                    took: ran.took,
                    waited: Duration::ZERO,
                    peak_memory_bytes: ran.peak_memory_bytes,
                    peak_disk_bytes: ran.peak_disk_bytes,
                    notes,
                    replica: None,
                })
            }
            Ended::Exited(false) => {
                let pointed = authors_line::point(source.language, &log);
                Err(BuildError::Failed {
                    headline: pointed.headline(source.language),
                    line: pointed.line,
                    log,
                    took: ran.took,
                })
            }
            Ended::TimedOut => Err(BuildError::TimedOut {
                limit: limits.wall,
                log,
            }),
            Ended::OutOfMemory => Err(BuildError::OutOfMemory {
                limit: limits.memory_bytes,
                log,
            }),
            Ended::OutOfDisk => Err(BuildError::OutOfDisk {
                limit: limits.disk_bytes,
                log,
            }),
        }
    }
}
