//! Where `toolhost dev` delivers a build and reads back its load outcome:
//! the host it opened itself, another toolhost's folder, or a server it
//! publishes onto.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::Host;
use crate::commands::remote::{Publisher, request};
use crate::registry::report::{PluginReport, PluginsReport};

/// How long the server may take to load a new version.
pub(super) const LOAD_DEADLINE: Duration = Duration::from_secs(120);

/// Where the load outcome is read: the host `dev` opened itself (its
/// events), or another toolhost's `/plugins`.
pub(super) enum Target {
    Local {
        host: Host,
        server: DevServer,
    },
    Remote(DevServer),
    /// Published over HTTP (`dev --server`), as `toolhost push` does.
    Publish(Publisher),
}

impl Target {
    pub(super) fn server(&self) -> &DevServer {
        match self {
            Target::Local { server, .. } | Target::Remote(server) => server,
            Target::Publish(_) => unreachable!("a publishing session reads no folder"),
        }
    }

    /// The report on `id` once its version with `hash`, just written to
    /// `file`, has settled (loaded or rejected): from the own host's load
    /// path, or polled from another server's `/plugins` (`None` after
    /// [`LOAD_DEADLINE`]).
    pub(super) async fn wait_for_load(
        &self,
        file: std::path::PathBuf,
        id: &str,
        hash: &str,
    ) -> Option<PluginReport> {
        match self {
            Target::Local { host, .. } => host.load(file).await,
            target => target.server().wait_for_load(id, hash).await,
        }
    }
}

/// Whether `report` shows the version with `hash` settled.
fn settled(report: &PluginReport, hash: &str) -> bool {
    report.content_hash.as_deref() == Some(hash) && report.compiling.is_none()
}

/// A toolhost server, over its own REST API.
pub(super) struct DevServer {
    pub(super) base: String,
    pub(super) token: Option<String>,
}

impl DevServer {
    async fn plugins(&self) -> Option<PluginsReport> {
        let (_, body) = request(
            &self.base,
            self.token.as_deref(),
            ("GET", "/plugins"),
            None,
            Duration::from_secs(5),
        )
        .await
        .ok()?;
        serde_json::from_value(body).ok()
    }

    /// The folder the server serves, if a toolhost answers.
    pub(super) async fn folder(&self) -> Option<PathBuf> {
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
