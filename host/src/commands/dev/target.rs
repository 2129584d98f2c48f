//! Where `toolhost dev` delivers a build and reads back its load outcome:
//! the host it opened itself, another toolhost's folder, or a server it
//! publishes onto.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::Host;
use crate::commands::push::{Publisher, request};
use crate::registry::report::{PluginReport, PluginsReport};

/// How long the server may take to load a new version.
pub(super) const LOAD_DEADLINE: Duration = Duration::from_secs(120);

/// Where the load outcome is read: the host `dev` opened itself (its
/// events), or another toolhost's `/plugins`.
pub(super) enum Target {
    Local {
        host: Host,
        server: Server,
    },
    Remote(Server),
    /// Published over HTTP (`dev --server`), as `toolhost push` does.
    Publish(Publisher),
}

impl Target {
    pub(super) fn server(&self) -> &Server {
        match self {
            Target::Local { server, .. } | Target::Remote(server) => server,
            Target::Publish(_) => unreachable!("a publishing session reads no folder"),
        }
    }

    /// The report on `id` once its version with `hash` has settled (loaded
    /// or rejected), or `None` after [`LOAD_DEADLINE`].
    pub(super) async fn wait_for_load(
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
pub(super) struct Server {
    pub(super) base: String,
    pub(super) token: Option<String>,
}

impl Server {
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
