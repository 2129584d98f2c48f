//! One source published: the whole workflow, each step once, for every
//! front that takes source (`PUT` of `text/x-python` or
//! `text/javascript`, which the page, `toolhost push` and `toolhost dev
//! --server` send). Nothing here knows HTTP.
//!
//! 1. The namespace's share is checked before anything runs.
//! 2. The tier: a source that imports only what its language's runtime
//!    carries (`languages/runtimes.rs`) is **served by the runtime**: the
//!    file itself is published (`x.py`, `x.js`) and loads in a moment,
//!    with nothing compiled. A source that imports more, or whose
//!    publisher asked for it ([`Tier::Build`]), is **built** into a
//!    component of its own (`builds/`), where the server builds that
//!    language (`--builds`); where it does not, an import outside the set
//!    is answered with the module, the set and what to do.
//! 3. It is published through the one load path (`publishing/publish.rs`)
//!    and its outcome answered; an exception or a syntax error as the
//!    runtime ran it is answered as a failed build is, with the author's
//!    line.
//! 4. The room's record (`Noted`) says what became of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::builds::{BuildError, Builds, Source};
use crate::languages::{self, Language};
use crate::publishing::publish::{
    KeptSource, Noted, PublishError, PublishOutcome, Published, Publishing,
};
use crate::registry::plugin::LoadError;

/// Which tier a publisher asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// The runtime when the source imports only what it carries, else a
    /// build where the server builds.
    Auto,
    /// A component of its own, built here (`?build=full`).
    Build,
}

/// How a source went live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// By its language's runtime: nothing was built.
    Runtime,
    /// As a component built from it.
    Built,
}

impl Served {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Served::Runtime => "runtime",
            Served::Built => "build",
        }
    }
}

/// What publishing a source did.
#[derive(Debug)]
pub(crate) struct SourcePublished {
    pub(crate) published: Published,
    pub(crate) served: Served,
    /// How long the build ran and waited, and what it held, for a build.
    pub(crate) build: Option<BuildFacts>,
    /// How long it took from the source to its outcome.
    pub(crate) took: Duration,
}

#[derive(Debug)]
pub(crate) struct BuildFacts {
    pub(crate) seconds: f64,
    pub(crate) waited_seconds: f64,
    pub(crate) peak_memory_bytes: u64,
    pub(crate) peak_disk_bytes: u64,
    pub(crate) notes: Vec<String>,
    /// The replica that built it, where that was not the one published on.
    pub(crate) replica: Option<String>,
}

/// Why a source did not go live.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("the source is not UTF-8 text: send {0} as it is saved")]
    NotText(&'static str),
    /// A zip that is not a tool folder (`languages/folder.rs`).
    #[error("the tool folder: {0}")]
    Folder(#[from] crate::languages::folder::FolderError),
    /// It imports what the runtime does not carry, and is not built here.
    #[error("{message}")]
    Outside {
        message: String,
        line: Option<u32>,
        modules: Vec<String>,
    },
    /// A full build was asked for, and this server does not build the
    /// language (or cannot: builds are off, or its toolchain is missing).
    #[error(transparent)]
    NoBuilds(BuildError),
    /// The build failed or was stopped.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The runtime ran it and it raised (or did not compile): the author's
    /// line first.
    #[error("{headline}")]
    Raised {
        headline: String,
        line: Option<u32>,
        log: String,
    },
    /// Publishing refused it before or after it loaded.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// The source workflow's settings and what it uses.
pub(crate) struct SourceFlow {
    pub(crate) builds: Arc<Builds>,
    pub(crate) publishing: Arc<Publishing>,
    /// The largest component a build may make (`--max-plugin-mib`).
    pub(crate) max_plugin_bytes: u64,
}

impl SourceFlow {
    /// Publishes `text`, the `language` source of plugin `id`, for `by`;
    /// `publish` is their own number for it (told back with a build's
    /// stages).
    pub(crate) async fn publish(
        &self,
        id: &str,
        by: &str,
        language: Language,
        text: Vec<u8>,
        tier: Tier,
        publish: Option<&str>,
    ) -> Result<SourcePublished, SourceError> {
        let outcome = self.run(id, by, language, text, tier, publish).await;
        self.note(id, by, language, &outcome);
        outcome
    }

    /// Publishes `zip`, a tool folder (`app.py` and its own files), as
    /// plugin `id` for `by`: checked whole, its imports answered as a
    /// source's are, then published as `<id>.zip` through the one load
    /// path (no build: its runtime runs it).
    pub(crate) async fn publish_folder(
        &self,
        id: &str,
        by: &str,
        zip: Vec<u8>,
    ) -> Result<SourcePublished, SourceError> {
        let outcome = self.run_folder(id, by, zip).await;
        self.note(id, by, Language::Python, &outcome);
        outcome
    }

    /// [`SourceFlow::publish_folder`] but for the room's record.
    async fn run_folder(
        &self,
        id: &str,
        by: &str,
        zip: Vec<u8>,
    ) -> Result<SourcePublished, SourceError> {
        let started = Instant::now();
        self.publishing.has_room(id).await?;
        let folder = crate::languages::folder::ToolFolder::read(&zip)?;
        let language = folder.language;
        let mut carried = self.room_packages(language);
        carried.extend(folder.modules());
        let outside = languages::outside_with(language, &folder.text, &carried);
        if !outside.is_empty() {
            return Err(outside_error(language, outside, &carried));
        }
        self.serve_as_source(id, by, "zip", &zip, started).await
    }

    /// The modules the room's package store gives `language`'s sources.
    fn room_packages(&self, language: Language) -> std::collections::BTreeSet<String> {
        self.publishing
            .registry()
            .folder()
            .and_then(|root| languages::packages::Lock::read(root).ok())
            .map(|lock| lock.modules(language))
            .unwrap_or_default()
    }

    /// `bytes` published as plugin `id`'s file (`extension`), served by its
    /// language's runtime; an exception or syntax error as it loaded is
    /// answered with the author's line.
    async fn serve_as_source(
        &self,
        id: &str,
        by: &str,
        extension: &str,
        bytes: &[u8],
        started: Instant,
    ) -> Result<SourcePublished, SourceError> {
        let mut upload = self
            .publishing
            .upload(id, extension, self.max_plugin_bytes)
            .await?;
        upload.write(bytes).await?;
        let published = self.publishing.publish(upload, by, None).await?;
        if let Published::Refused { why, .. } = &published
            && let Some(LoadError::SourceRaised {
                headline,
                line,
                printed,
            }) = why.as_deref()
        {
            return Err(SourceError::Raised {
                headline: headline.clone(),
                line: *line,
                log: printed.clone(),
            });
        }
        Ok(SourcePublished {
            published,
            served: Served::Runtime,
            build: None,
            took: started.elapsed(),
        })
    }

    /// [`SourceFlow::publish`] but for the room's record.
    async fn run(
        &self,
        id: &str,
        by: &str,
        language: Language,
        text: Vec<u8>,
        tier: Tier,
        publish: Option<&str>,
    ) -> Result<SourcePublished, SourceError> {
        let started = Instant::now();
        // A namespace already at its share runs nothing.
        self.publishing.has_room(id).await?;
        let text =
            String::from_utf8(text).map_err(|_| SourceError::NotText(language.source_file()))?;
        // What the room's package store gives, beyond the runtime.
        let packages = self.room_packages(language);
        let outside = languages::outside_with(language, &text, &packages);
        // A build helps only a Python module the runtime leaves out (one
        // of the standard library's that needs sockets, threads or
        // processes): any other import would be missing from a build too.
        let a_build_helps = language == Language::Python
            && !outside.is_empty()
            && outside
                .iter()
                .all(|import| languages::runtimes::left_out(&import.module));
        let builds_here = self.builds.builds(language);
        if tier == Tier::Build || !outside.is_empty() {
            return match builds_here {
                Ok(()) if tier == Tier::Build || a_build_helps => {
                    self.build(id, by, language, text, started, publish).await
                }
                Err(why) if outside.is_empty() => Err(SourceError::NoBuilds(why)),
                _ => Err(outside_error(language, outside, &packages)),
            };
        }
        self.serve_as_source(id, by, language.extension(), text.as_bytes(), started)
            .await
    }

    /// The full tier: a component built from `text`, published.
    async fn build(
        &self,
        id: &str,
        by: &str,
        language: Language,
        text: String,
        started: Instant,
        publish: Option<&str>,
    ) -> Result<SourcePublished, SourceError> {
        let source = Source { language, text };
        let built = self
            .builds
            .build(by, id, &source, self.max_plugin_bytes, publish)
            .await?;
        let mut upload = self
            .publishing
            .upload(id, "wasm", self.max_plugin_bytes)
            .await?;
        upload.write(&built.wasm).await?;
        let kept = KeptSource {
            language: language.as_str(),
            text: source.text,
            seconds: built.took.as_secs_f64(),
        };
        let published = self.publishing.publish(upload, by, Some(kept)).await?;
        Ok(SourcePublished {
            published,
            served: Served::Built,
            build: Some(BuildFacts {
                seconds: built.took.as_secs_f64(),
                waited_seconds: built.waited.as_secs_f64(),
                peak_memory_bytes: built.peak_memory_bytes,
                peak_disk_bytes: built.peak_disk_bytes,
                notes: built.notes,
                replica: built.replica,
            }),
            took: started.elapsed(),
        })
    }

    /// The room's record of what became of it.
    fn note(
        &self,
        id: &str,
        by: &str,
        language: Language,
        outcome: &Result<SourcePublished, SourceError>,
    ) {
        let seconds = |s: f64| (s * 1000.0).round() / 1000.0;
        let (outcome, reason, line, build_seconds): (PublishOutcome, _, _, _) = match outcome {
            Ok(done) => {
                let build_seconds = done.build.as_ref().map(|build| seconds(build.seconds));
                match &done.published {
                    Published::Live { report, .. } => {
                        (PublishOutcome::of_loaded(report), None, None, build_seconds)
                    }
                    Published::Refused { report, .. } => (
                        PublishOutcome::Refused,
                        report.reason.clone(),
                        None,
                        build_seconds,
                    ),
                }
            }
            Err(SourceError::Build(BuildError::Replaced)) => {
                (PublishOutcome::Replaced, None, None, None)
            }
            Err(SourceError::Publish(_)) => return,
            Err(error) => {
                let line = match error {
                    SourceError::Raised { line, .. } | SourceError::Outside { line, .. } => *line,
                    SourceError::Build(BuildError::Failed { line, .. }) => *line,
                    _ => None,
                };
                if !matches!(error, SourceError::Raised { .. }) {
                    tracing::info!(plugin = %id, person = %by, %error, "source not published");
                }
                (
                    PublishOutcome::BuildFailed,
                    Some(error.to_string()),
                    line,
                    None,
                )
            }
        };
        self.publishing.note(Noted {
            language: Some(language.as_str()),
            build_seconds,
            reason,
            line,
            ..Noted::now(id, by, outcome)
        });
    }
}

/// The answer for a source importing what neither its runtime nor the
/// room's packages carry: the sentence, its first line, the modules.
fn outside_error(
    language: Language,
    outside: Vec<languages::Import>,
    packages: &std::collections::BTreeSet<String>,
) -> SourceError {
    let error = LoadError::OutsideRuntime {
        language,
        imports: outside.clone(),
        packages: packages.iter().cloned().collect(),
    };
    SourceError::Outside {
        message: error.to_string(),
        line: outside.first().map(|import| import.line),
        modules: outside.into_iter().map(|import| import.module).collect(),
    }
}
