//! The front door: a [`Host`] opened from a [`HostConfig`] owns the
//! runtime, the registry and (when asked) the folder watch, and is what
//! every user of the library starts from: `toolhost serve`, `check`,
//! `list`, `call`, `cgi` and `dev`, the benchmark harness and the tests.
//!
//! Opening a host is the one start-up sequence: build the runtime and an
//! empty registry, watch the folder (before the first scan, so a file
//! dropped during the scan is still seen; the one load path drops a verdict
//! that a newer event overtook), then scan it once. What became of each
//! file, then and later, is a stream of [`LoadEvent`]s ([`Host::events`]).
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! let host = toolhost::Host::open(toolhost::HostConfig::new("plugins")).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! host.serve(listener, Default::default(), std::future::pending()).await
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::net::TcpListener;

use crate::call::Calls;
use crate::call::envelope::{Envelope, TextFormat};
use crate::call::invoke::{self, Front};
use crate::languages::Language;
use crate::oci::signature::VerifyKey;
use crate::publishing::audit::Audit;
use crate::publishing::publish::Publishing;
use crate::registry::events::LoadEvent;
use crate::registry::plugin::{self, LoadError, LoadedPlugin};
use crate::registry::report::PluginsReport;
use crate::registry::shares::PersonShares;
use crate::registry::sources::{self, SourceSettings};
use crate::registry::tools::ToolListLimits;
use crate::registry::watcher::{self, FolderWatch};
use crate::registry::{Registry, Snapshot};
use crate::runtime::{Limits, Runtime, TierUp};
use crate::server::{self, Settings};

/// How a [`Host`] is opened. [`HostConfig::new`] gives the defaults
/// `toolhost serve` documents: a watched folder, the shared compile cache,
/// and plugins on baseline code optimised in the background (`runtime/compiler.rs`).
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The plugin folder (`*.wasm`, not searched recursively); `None` for a
    /// host that serves no folder (`toolhost check` loads one file).
    pub folder: Option<PathBuf>,
    /// Deadline and memory cap of every call.
    pub limits: Limits,
    /// How many calls run guest code at once, over all plugins.
    pub max_calls: usize,
    /// How much one plugin may list.
    pub list_limits: ToolListLimits,
    /// Where compiled plugins are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Hot reload: watch the folder, loading a changed file once it has
    /// been quiet this long. `None` loads the folder once.
    pub watch: Option<Duration>,
    /// Whether plugins' baseline code is optimised in the background
    /// ([`TierUp::InBackground`], a server) or kept ([`TierUp::Never`], a
    /// short-lived command).
    pub tier_up: TierUp,
    /// What one person (a namespace) may hold and run at once.
    pub per_person: PersonShares,
    /// A PEM public key: every plugin from an OCI registry must carry a
    /// cosign signature by it (`--verify-key`).
    pub verify_key: Option<PathBuf>,
    /// Registry credentials in docker's `config.json` format; `None` reads
    /// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`.
    pub registry_config: Option<PathBuf>,
    /// `--require-approval`: a plugin's definitions serve only once an
    /// admin approved them (`registry/approvals.rs`); `None`: no approval.
    pub require_approval: Option<crate::registry::approvals::ApprovalMode>,
    /// The most the audit log keeps on disk (`--audit-max-kib`).
    pub audit_max_bytes: u64,
    /// The Redis replicas share publishes and removals through (`--redis`,
    /// `publishing/shared.rs`); `None`: this server's folder is its own.
    pub shared_redis: Option<String>,
    /// A folder of the operator's policies (`--policies`, a Kubernetes
    /// ConfigMap) mirrored into the plugin folder (`registry/mirror.rs`);
    /// `None`: the plugin folder's own policies are all there are.
    pub policies: Option<PathBuf>,
}

impl HostConfig {
    /// The default limits of a call.
    pub const LIMITS: Limits = Limits {
        timeout: Duration::from_secs(10),
        memory_bytes: 64 * 1024 * 1024,
    };
    /// How many calls run at once by default.
    pub const MAX_CALLS: usize = 64;
    /// How long a changed file must be quiet before it is loaded.
    pub const DEBOUNCE: Duration = Duration::from_millis(50);

    /// A server's defaults over `folder`: watched, cached, tiered up.
    pub fn new(folder: impl Into<PathBuf>) -> Self {
        HostConfig {
            folder: Some(folder.into()),
            limits: Self::LIMITS,
            max_calls: Self::MAX_CALLS,
            list_limits: ToolListLimits::DEFAULT,
            cache_dir: default_cache_dir(),
            watch: Some(Self::DEBOUNCE),
            tier_up: TierUp::InBackground,
            per_person: PersonShares::DEFAULT,
            verify_key: None,
            registry_config: None,
            require_approval: None,
            audit_max_bytes: crate::publishing::audit::MAX_AUDIT_BYTES,
            shared_redis: None,
            policies: None,
        }
    }

    /// A short-lived command's settings: the folder loaded once, baseline
    /// code kept.
    pub fn once(mut self) -> Self {
        self.watch = None;
        self.tier_up = TierUp::Never;
        self
    }
}

/// Where compiled plugins are cached unless told otherwise:
/// `$XDG_CACHE_HOME/toolhost`, else `~/.cache/toolhost`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("toolhost"))
}

/// What plugins from OCI registries need: where pulled components are kept
/// (`<cache>/oci`, or a folder of this process's own without a cache), the
/// key signatures must verify with (read now: a bad key stops the start),
/// and where registry credentials are.
fn source_settings(config: &HostConfig) -> anyhow::Result<SourceSettings> {
    let cache_dir = match &config.cache_dir {
        Some(dir) => dir.join("oci"),
        None => std::env::temp_dir().join(format!("toolhost-oci-{}", std::process::id())),
    };
    let (verify_key, verify_key_id) = match &config.verify_key {
        Some(path) => {
            let pem = crate::oci::read_key(path)?;
            let key = VerifyKey::from_pem(&pem, &path.display().to_string())?;
            (Some(key), Some(sources::key_id(&pem)))
        }
        None => (None, None),
    };
    Ok(SourceSettings {
        cache_dir,
        verify_key,
        verify_key_id,
        credentials: crate::oci::Credentials {
            config_file: config.registry_config.clone(),
        },
    })
}

/// Turns the runtime's "optimised code now serves" into load events, for as
/// long as the registry lives.
async fn tell_optimised(
    mut optimised: tokio::sync::broadcast::Receiver<(Arc<str>, std::time::Duration)>,
    registry: std::sync::Weak<Registry>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match optimised.recv().await {
            Ok((name, took)) => match registry.upgrade() {
                Some(registry) => registry.tell_optimised(&name, took),
                None => return,
            },
            Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
    }
}

/// Loads each plugin whose OCI registry has a new version for it (the
/// sources' pollers say which), through the one load path.
async fn load_new_versions(
    mut paths: tokio::sync::mpsc::UnboundedReceiver<PathBuf>,
    registry: std::sync::Weak<Registry>,
) {
    while let Some(path) = paths.recv().await {
        match registry.upgrade() {
            Some(registry) => registry.reload(vec![path]),
            None => return,
        }
    }
}

/// Forgets the counts of tools no longer served, each time the tool list
/// changes: a plugin's series go with the plugin (label values stay
/// bounded by what is served).
async fn forget_unserved_tools(
    mut changes: tokio::sync::watch::Receiver<u64>,
    registry: std::sync::Weak<Registry>,
    calls: std::sync::Weak<Calls>,
) {
    while changes.changed().await.is_ok() {
        let (Some(registry), Some(calls)) = (registry.upgrade(), calls.upgrade()) else {
            return;
        };
        let snapshot = registry.snapshot();
        calls
            .ledger
            .forget_unserved(|tool| snapshot.tool(tool).is_some());
    }
}

/// A running host: its plugins loaded, its folder watched if asked.
/// Clones share one host; dropping the last stops the watch (calls in
/// flight finish).
#[derive(Clone)]
pub struct Host {
    registry: Arc<Registry>,
    /// The call path's books: the ledger and each person's call slots.
    calls: Arc<Calls>,
    /// Publishing onto the folder: per-plugin locks, per-person shares.
    publishing: Arc<Publishing>,
    _watch: Option<Arc<FolderWatch>>,
    _policies: Option<Arc<crate::registry::mirror::MirrorWatch>>,
}

impl Host {
    /// Builds the runtime and the registry, watches the folder if asked,
    /// and loads it once. A folder that does not exist or cannot be read
    /// is an error (`toolhost serve` creates its folder first; a one-shot
    /// command or a CGI script never creates one).
    pub async fn open(config: HostConfig) -> anyhow::Result<Host> {
        if let Some(cache) = &config.cache_dir {
            crate::languages::runtimes::unpack_into(cache);
        }
        let runtime = Runtime::new(
            config.limits,
            config.cache_dir.clone(),
            config.max_calls,
            config.tier_up,
        )?;
        let optimised = runtime.optimised();
        let (sources, new_versions) = sources::Sources::new(source_settings(&config)?);
        let registry = Registry::new(runtime, config.list_limits, sources);
        tokio::spawn(tell_optimised(optimised, Arc::downgrade(&registry)));
        tokio::spawn(load_new_versions(new_versions, Arc::downgrade(&registry)));
        let mut watch = None;
        let mut policies_watch = None;
        // One spelling of every path from here on: the watcher's events,
        // the loader's ids and publishing's writes all compare paths under
        // this root, and a relative one (the default `plugins`) would not
        // match what the watcher reports for a namespace folder made later.
        let folder = config
            .folder
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
        if let Some(folder) = &folder {
            if let Some(mode) = config.require_approval {
                registry.require_approval(folder, mode);
            }
            if let Some(policies) = &config.policies {
                if crate::registry::mirror::overlap(policies, folder) {
                    anyhow::bail!(
                        "the policies folder {} and the plugin folder {} must not hold one another",
                        policies.display(),
                        folder.display()
                    );
                }
                // Watched first: a change made meanwhile is mirrored again.
                if config.watch.is_some() {
                    let watched =
                        crate::registry::mirror::watch(policies, folder).map_err(|e| {
                            anyhow::anyhow!(
                                "cannot watch the policies folder {}: {e:#}",
                                policies.display()
                            )
                        })?;
                    policies_watch = Some(Arc::new(watched));
                }
                crate::registry::mirror::sync(policies, folder).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot mirror the policies folder {}: {e}",
                        policies.display()
                    )
                })?;
            }
            if let Some(debounce) = config.watch {
                let watched = watcher::watch(registry.clone(), folder, debounce).map_err(|e| {
                    anyhow::anyhow!("cannot watch the plugin folder {}: {e:#}", folder.display())
                })?;
                watch = Some(Arc::new(watched));
            }
            registry.scan(folder).await.map_err(|e| {
                anyhow::anyhow!("cannot read the plugin folder {}: {e}", folder.display())
            })?;
        }
        if watch.is_some() {
            compile_language_runtimes(registry.runtime().clone());
        }
        let calls = Arc::new(Calls::new(&config.per_person, config.max_calls));
        tokio::spawn(forget_unserved_tools(
            registry.tool_list_changes(),
            Arc::downgrade(&registry),
            Arc::downgrade(&calls),
        ));
        let shared = match (&config.shared_redis, &folder) {
            (Some(url), Some(_)) => Some(
                crate::publishing::shared::Shared::open(url)
                    .map_err(|e| anyhow::anyhow!("--redis {url}: {e}"))?,
            ),
            _ => None,
        };
        let audit = folder.as_deref().map(|folder| {
            let audit = Audit::new(folder, config.audit_max_bytes);
            match &shared {
                Some(shared) => audit.shared_through(shared.connection()),
                None => audit,
            }
        });
        let publishing =
            Publishing::new(registry.clone(), config.per_person, audit, shared.clone());
        if let (Some(shared), Some(folder)) = (shared, &folder) {
            let (ready, caught_up) = tokio::sync::watch::channel(false);
            registry.ready_once(caught_up);
            tokio::spawn(crate::publishing::following::follow(
                shared,
                publishing.clone(),
                folder.clone(),
                ready,
            ));
        }
        Ok(Host {
            registry,
            calls,
            publishing,
            _watch: watch,
            _policies: policies_watch,
        })
    }

    /// Every load outcome from now on: loaded, replaced, rejected (with the
    /// reason), removed, compiling, optimised; each with the plugin's
    /// report. Subscribe before causing the change you wait for.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<LoadEvent> {
        self.registry.events()
    }

    /// Loads the plugin file at `path` (in the folder) now and answers
    /// with its report once that load has settled, loaded or rejected
    /// (`None`: the file is gone or is no plugin of the folder). Hot reload
    /// does the same for every change it sees; this is for whoever wrote
    /// the file and wants its outcome (`toolhost dev`).
    pub async fn load(&self, path: PathBuf) -> Option<crate::registry::report::PluginReport> {
        self.registry.load_settled(path).await
    }

    /// Every plugin file and its state: the `GET /plugins` report.
    pub fn plugins(&self) -> PluginsReport {
        self.registry.plugins_report()
    }

    /// The tools serving now; cheap, and stable while held.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.registry.snapshot()
    }

    /// The registry, for callers that go below the envelope (the
    /// benchmark's runtime-only timings).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The call path's books: the one count of calls (the ledger) and each
    /// person's call slots.
    pub fn calls(&self) -> &Arc<Calls> {
        &self.calls
    }

    /// Calls one tool, as `toolhost call` does: the whole call path
    /// (look-up, argument check, call, normalise) into one envelope.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        format: TextFormat,
    ) -> Envelope {
        invoke::call_tool(
            &self.registry,
            &self.calls,
            tool,
            arguments,
            format,
            None,
            Front::Library,
            &crate::registry::view::View::all(),
        )
        .await
    }

    /// Loads one file exactly as the folder's files are loaded, without
    /// serving it: what `toolhost check` reports.
    pub async fn check(&self, file: &Path) -> Result<LoadedPlugin, LoadError> {
        let id = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or("plugin")
            .to_string();
        let source =
            plugin::read_source(file, false)
                .await
                .map_err(|error| LoadError::Unreadable {
                    file: file.to_path_buf(),
                    error,
                })?;
        plugin::load(
            self.registry.runtime(),
            self.registry.list_limits(),
            &id,
            file,
            source,
        )
        .await
    }

    /// Serves REST at `/` and MCP at `/mcp` on `listener` until `shutdown`
    /// completes; then stops accepting and lets calls in flight finish.
    pub async fn serve(
        &self,
        listener: TcpListener,
        settings: Settings,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let served = server::Served {
            registry: self.registry.clone(),
            calls: self.calls.clone(),
            publishing: self.publishing.clone(),
        };
        server::run(served, listener, settings, shutdown).await
    }

    /// Serves MCP on stdin/stdout until the client closes stdin.
    pub async fn serve_stdio(&self, text_format: TextFormat) -> anyhow::Result<()> {
        server::run_stdio(self.registry.clone(), self.calls.clone(), text_format).await
    }

    /// Answers one CGI/1.1 request on stdout through the REST routes; a
    /// host that could not be opened is answered as a HOST_ERROR envelope.
    pub(crate) async fn answer_cgi(
        host: anyhow::Result<Host>,
        text_format: TextFormat,
        max_body_bytes: usize,
    ) -> anyhow::Result<()> {
        server::run_cgi(
            host.map(|host| (host.registry, host.calls)),
            text_format,
            max_body_bytes,
        )
        .await
    }
}

/// The language runtimes compiled (or loaded from the cache) in the
/// background as a watching host opens, and held: the first Python or
/// JavaScript source published to a fresh server is live as fast as the
/// thirtieth. A runtime this binary lacks is skipped; a compile that fails
/// is logged, and the first source tries again.
fn compile_language_runtimes(runtime: Arc<Runtime>) {
    tokio::task::spawn_blocking(move || {
        for language in [Language::Python, Language::JavaScript] {
            let Ok(component) = crate::languages::runtimes::component(language) else {
                continue;
            };
            let name = format!("the {} runtime", language.as_str());
            if let Err(error) = runtime.keep_compiled(&name, &component.wasm, &component.hash) {
                tracing::warn!(%error, runtime = name, "could not compile ahead");
            }
        }
    });
}
