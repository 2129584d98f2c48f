//! The fronts assembled: given a registry, a bound listener and a shutdown
//! signal, serve REST at `/` and MCP Streamable HTTP at `/mcp` on that
//! listener until the signal fires ([`run`]); or MCP over stdin/stdout
//! until the client closes stdin ([`run_stdio`]); or answer one CGI
//! request ([`run_cgi`]). [`crate::Host`] is how callers reach these; the
//! routes are in `front/`, and this file only assembles them.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rmcp::ServiceExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::builds::{BuildSettings, Builds};
use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::call::invoke::Front;
use crate::edge::auth::{Authority, People, Role};
use crate::edge::cors::CorsOrigins;
use crate::edge::guard::{self, GuardSettings, LOOPBACK_HOSTS, Refusals};
use crate::edge::holds::Holds;
use crate::edge::listener::{self, ConnectionLimits};
use crate::edge::oauth::{self, OAuth, OAuthSettings};
use crate::edge::outer::Outer;
use crate::front::mcp::McpFront;
use crate::front::mcp::stdio;
use crate::front::mcp::streamable::{self as mcp_http, McpHttpSettings};
use crate::front::resources;
use crate::front::rest::{self, RestSettings};
use crate::front::{approval_routes, plugin_routes, skill_routes};
use crate::front::{ui, view_frame};
use crate::ops::feed::{self, EventFeed};
use crate::ops::metrics::{self, HttpGauges};
use crate::publishing::publish::Publishing;
use crate::registry::Registry;

/// How the HTTP server answers. [`Settings::default`] gives the defaults
/// `toolhost serve` documents.
#[derive(Clone)]
pub struct Settings {
    /// How a result that has only structured data is rendered as text.
    pub text_format: TextFormat,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Host names beside the loopback names and the listening address that
    /// `Host` and `Origin` may name.
    pub allowed_hosts: Vec<String>,
    /// The one-admin shortcut: every route but `/health` needs
    /// `Authorization: Bearer` with this token (or one of `tokens_file`).
    pub token: Option<String>,
    /// A TOML file of people, their tokens and roles (`front/auth/`),
    /// reloaded when it changes.
    pub tokens_file: Option<std::path::PathBuf>,
    /// The keys file MCP's `requestState` is sealed with; `None`: a random
    /// key of this process.
    pub request_state_keys: Option<std::path::PathBuf>,
    /// The Redis that replicas keep their tasks in (`redis://host:port/db`);
    /// `None`: the plugin folder's `.toolhost/tasks`.
    pub tasks_redis: Option<String>,
    /// How long a task's run may take (past a call's deadline).
    pub task_timeout: Duration,
    /// How long a client may take to send a header; also the keep-alive
    /// idle timeout.
    pub header_timeout: Duration,
    /// How many connections may be open at once.
    pub max_connections: usize,
    /// How many requests one person may have in flight at once (streams
    /// and bodies still coming included; admins are not limited).
    pub max_connections_per_person: usize,
    /// How many streams one person may hold open at once (`/events`, MCP's
    /// GET stream and `subscriptions/listen` together).
    pub max_streams_per_person: usize,
    /// How many MCP sessions may be open at once.
    pub max_sessions: usize,
    /// How many of them one person may hold (with tokens).
    pub max_sessions_per_person: usize,
    /// How many resource subscriptions one person may hold over all their
    /// sessions (with tokens; each session holds 1,000 at most).
    pub max_subscriptions_per_person: usize,
    /// Longest resource URI a read or a subscription may name, in bytes.
    pub max_uri_bytes: usize,
    /// How long a request body may take to arrive whole (a pause longer
    /// than `header_timeout` ends it sooner), for every request, with a
    /// token or without.
    pub body_timeout: Duration,
    /// How many uploads (`PUT /plugins/...`) one person may send at once.
    pub max_uploads_per_person: usize,
    /// How long an MCP session may go without a request.
    pub session_idle: Duration,
    /// Largest component a `PUT /plugins/...` may publish, in bytes.
    pub max_plugin_bytes: usize,
    /// Browser origins (`scheme://host[:port]`) allowed to call across
    /// origins (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// The least role that may read `GET /metrics` (with tokens).
    pub(crate) metrics_role: Role,
    /// OAuth 2.1 access tokens from this issuer (`front/oauth/`), beside
    /// or instead of tokens.
    pub oauth: Option<OAuthSettings>,
    /// Which published source the server builds, and each build's limits
    /// (`builds/`); none by default.
    pub builds: BuildSettings,
}

/// Defaults `toolhost serve`'s flags and [`Settings::default`] share:
/// each written once.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
pub(crate) const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 1024;
pub(crate) const DEFAULT_MAX_SESSIONS: usize = 1000;
pub(crate) const DEFAULT_SESSION_IDLE_SECS: u64 = 300;
pub(crate) const DEFAULT_MAX_PLUGIN_MIB: usize = 64;
pub(crate) const DEFAULT_MAX_SESSIONS_PER_PERSON: usize = 100;
pub(crate) const DEFAULT_MAX_SUBSCRIPTIONS_PER_PERSON: usize = 1000;
pub(crate) const DEFAULT_MAX_URI_BYTES: usize = 2048;
pub(crate) const DEFAULT_BODY_TIMEOUT_SECS: u64 = 60;
pub(crate) const DEFAULT_MAX_UPLOADS_PER_PERSON: usize = 2;
pub(crate) const DEFAULT_MAX_STREAMS_PER_PERSON: usize = 8;

/// One person's share of the connections: an eighth of them, at least 4.
pub(crate) fn default_connections_per_person(max_connections: usize) -> usize {
    (max_connections / 8).max(4)
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            text_format: TextFormat::Json,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            allowed_hosts: Vec::new(),
            token: None,
            tokens_file: None,
            request_state_keys: None,
            tasks_redis: None,
            task_timeout: crate::tasks::DEFAULT_RUN_DEADLINE,
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_person: DEFAULT_MAX_SESSIONS_PER_PERSON,
            max_connections_per_person: default_connections_per_person(DEFAULT_MAX_CONNECTIONS),
            max_streams_per_person: DEFAULT_MAX_STREAMS_PER_PERSON,
            max_subscriptions_per_person: DEFAULT_MAX_SUBSCRIPTIONS_PER_PERSON,
            max_uri_bytes: DEFAULT_MAX_URI_BYTES,
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECS),
            max_uploads_per_person: DEFAULT_MAX_UPLOADS_PER_PERSON,
            session_idle: Duration::from_secs(DEFAULT_SESSION_IDLE_SECS),
            max_plugin_bytes: DEFAULT_MAX_PLUGIN_MIB * 1024 * 1024,
            cors_origins: Vec::new(),
            metrics_role: Role::Metrics,
            oauth: None,
            builds: BuildSettings::default(),
        }
    }
}

/// What every front is built on: the registry (what is served), the call
/// path's books (the ledger, the call slots) and publishing.
#[derive(Clone)]
pub(crate) struct Served {
    pub(crate) registry: Arc<Registry>,
    pub(crate) calls: Arc<Calls>,
    pub(crate) publishing: Arc<Publishing>,
}

/// Serves HTTP on `listener` until `shutdown` completes, then stops
/// accepting, lets calls in flight finish and ends the MCP streams.
pub(crate) async fn run(
    served: Served,
    listener: TcpListener,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        shutdown.await;
        cancel.cancel();
    });
    serve(served, listener, settings, token).await
}

async fn serve(
    Served {
        registry,
        calls,
        publishing,
    }: Served,
    listener: TcpListener,
    settings: Settings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let registry_for_log = registry.clone();
    let mut allowed_hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    if !local.ip().is_unspecified() {
        allowed_hosts.push(local.ip().to_string());
    }
    allowed_hosts.extend(settings.allowed_hosts.iter().cloned());

    let builds = Builds::new(settings.builds.clone())?;
    if let Some(shared) = publishing.shared() {
        crate::publishing::shared_line::share(shared.clone(), builds.clone(), shutdown.clone());
        crate::publishing::shared_builds::share(
            shared.clone(),
            builds.clone(),
            settings.max_plugin_bytes as u64,
            shutdown.clone(),
        )?;
    }
    let oauth = settings.oauth.clone().map(OAuth::new).transpose()?;
    if let Some(oauth) = &oauth {
        oauth.prefetch();
    }
    let authority = Arc::new(Authority {
        people: People::load(
            settings.token.as_deref(),
            settings.tokens_file.as_deref(),
            settings
                .oauth
                .as_ref()
                .map(|oauth| oauth.namespace_prefix.as_str()),
        )?,
        oauth: oauth.clone(),
    });
    tokio::spawn(audit_tokens_file(
        authority.clone(),
        Arc::downgrade(&publishing),
        shutdown.clone(),
    ));
    let holds = Holds::new(
        settings.max_connections_per_person,
        settings.max_streams_per_person,
        settings.max_connections,
    );
    let input_keys = Arc::new(match &settings.request_state_keys {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            crate::front::mcp::InputKeys::from_file_text(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => crate::front::mcp::InputKeys::random(),
    });
    let tasks = match &settings.tasks_redis {
        Some(url) => Some(
            crate::tasks::Store::redis(url)
                .await
                .map_err(|e| anyhow::anyhow!("--tasks-redis {url}: {e}"))?,
        ),
        None => match registry.folder() {
            Some(folder) => Some(crate::tasks::Store::folder(
                folder.join(".toolhost").join("tasks"),
            )?),
            None => None,
        },
    }
    .map(|store| {
        crate::tasks::Tasks::with_run_deadline(
            store,
            crate::tasks::DEFAULT_TTL,
            settings.task_timeout,
        )
    });
    let rounds = crate::front::mcp::Rounds { input_keys, tasks };
    let (mcp, open_sessions) = mcp_http::router(
        registry.clone(),
        calls.clone(),
        McpHttpSettings {
            text_format: settings.text_format,
            allowed_hosts: allowed_hosts.clone(),
            max_body_bytes: settings.max_body_bytes,
            max_sessions: settings.max_sessions,
            max_sessions_per_person: settings.max_sessions_per_person,
            max_uri_bytes: settings.max_uri_bytes,
            max_subscriptions_per_person: settings.max_subscriptions_per_person,
            authority: authority.clone(),
            session_idle: settings.session_idle,
            shutdown: shutdown.clone(),
            holds: holds.clone(),
            rounds: rounds.clone(),
        },
    );
    let open_connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cors_origins = Arc::new(CorsOrigins::parse(&settings.cors_origins)?);
    let guard = GuardSettings {
        cors_origins: cors_origins.clone(),
        allowed_hosts,
        authority: authority.clone(),
        needs: Some(Role::Caller),
        writes_need: None,
        refusals: Refusals::Envelope,
        check_host: true,
        navigable: false,
    };
    // The REST router's guard, which its tool-call shortcut shares.
    let rest_guard = guard.clone();
    let guarded = |router: Router, settings: GuardSettings| {
        router.layer(axum::middleware::from_fn_with_state(
            Arc::new(settings),
            guard::check,
        ))
    };
    let rest_settings = RestSettings {
        max_body_bytes: settings.max_body_bytes,
        text_format: settings.text_format,
        front: Front::Rest,
    };
    let mut app = guarded(
        rest::health_router(registry.clone(), calls.clone(), rest_settings),
        guard.for_probes(),
    )
    .merge(guarded(
        ui::router().merge(view_frame::router()),
        guard.for_the_page(),
    ))
    .merge(guarded(
        metrics::router(
            registry.clone(),
            calls.clone(),
            HttpGauges {
                connections: open_connections.clone(),
                fast_answers: {
                    let open_sessions = open_sessions.clone();
                    Box::new(move || open_sessions.fast_answers())
                },
                sessions: Box::new(move || open_sessions.count()),
            },
        ),
        GuardSettings {
            needs: Some(settings.metrics_role),
            ..guard.clone()
        },
    ))
    .merge(guarded(
        approval_routes::router(publishing.clone()),
        guard.clone(),
    ))
    .merge(guarded(
        skill_routes::router(
            publishing.clone(),
            settings.max_plugin_bytes,
            settings.max_uploads_per_person,
        ),
        GuardSettings {
            writes_need: Some(Role::Publisher),
            ..guard.clone()
        },
    ))
    .merge(guarded(
        plugin_routes::router(
            registry.clone(),
            authority.clone(),
            publishing.clone(),
            builds.clone(),
            settings.max_plugin_bytes,
            settings.max_uploads_per_person,
        ),
        GuardSettings {
            writes_need: Some(Role::Publisher),
            ..guard.clone()
        },
    ))
    .merge(guarded(
        feed::router(
            registry.clone(),
            calls.clone(),
            EventFeed::start(&registry, shutdown.clone()),
            builds,
            publishing.clone(),
            authority.clone(),
            holds.clone(),
        ),
        guard.clone(),
    ))
    .merge(guarded(
        resources::router(
            registry.clone(),
            calls.clone(),
            settings.max_body_bytes,
            settings.max_uri_bytes,
        ),
        guard.clone(),
    ))
    .merge(guarded(
        rest::router(
            registry.clone(),
            calls.clone(),
            rest_settings,
            Some(rounds.clone()),
        ),
        rest_guard.clone(),
    ))
    .merge(guarded(mcp, guard.refusing_as(Refusals::JsonRpc)));
    if let Some(oauth) = oauth {
        app = app.merge(guarded(oauth::router(oauth), guard.without_token()));
    }
    // Tool calls past the router: the same guard and settings as the REST
    // router's, from the same values. A layer added to `rest::router`
    // would not be on this path: `call_shortcut` says so.
    let shortcut = rest::call_shortcut(registry, calls, rest_settings, rest_guard, rounds);
    let outer = Outer {
        cors_origins,
        drain_limit: settings.max_body_bytes.max(settings.max_plugin_bytes) as u64,
    };
    let limits = ConnectionLimits {
        header_timeout: settings.header_timeout,
        max_connections: settings.max_connections,
        body_timeout: settings.body_timeout,
    };
    let snapshot = registry_for_log.snapshot();
    tell_unseen_top_level(&registry_for_log, &authority);
    tracing::info!(
        folder = %registry_for_log.plugins_report().folder.unwrap_or_default(),
        plugins = snapshot.plugins().count(),
        tools = snapshot.tools().count(),
        "toolhost listening on http://{local} (REST at /, MCP at /mcp)",
    );
    listener::serve(
        listener,
        app,
        shortcut,
        outer,
        limits,
        listener::Counts {
            open_connections,
            holds,
        },
        shutdown,
    )
    .await?;
    Ok(())
}

/// MCP over stdin/stdout until the client closes stdin. Nothing but MCP
/// messages is ever written to stdout; logs go to stderr.
pub(crate) async fn run_stdio(
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    text_format: TextFormat,
) -> anyhow::Result<()> {
    tracing::info!("serving MCP on stdio");
    let limits = crate::front::mcp::CatalogLimits::new(
        DEFAULT_MAX_URI_BYTES,
        DEFAULT_MAX_SUBSCRIPTIONS_PER_PERSON,
    );
    let front = McpFront::new(
        registry,
        calls,
        text_format,
        Default::default(),
        limits,
        None,
        crate::front::mcp::Rounds {
            input_keys: Arc::new(crate::front::mcp::InputKeys::random()),
            tasks: None,
        },
    );
    let stdio = stdio::transport();
    let service = front.serve(stdio.transport).await?;
    service.waiting().await?;
    let _ = tokio::time::timeout(Duration::from_secs(2), stdio.stdout_done).await;
    Ok(())
}

/// Answers one CGI/1.1 request on stdout with the REST routes, or, when
/// the host could not be opened, with that failure as a HOST_ERROR
/// envelope: the web server always gets an answer.
pub(crate) async fn run_cgi(
    host: anyhow::Result<(Arc<Registry>, Arc<Calls>)>,
    text_format: TextFormat,
    max_body_bytes: usize,
) -> anyhow::Result<()> {
    let settings = RestSettings {
        max_body_bytes,
        text_format,
        front: Front::Cgi,
    };
    crate::front::cgi::run(host, settings).await
}

/// Warns of each top-level plugin that people of the tokens file do not
/// see (their set leaves the top level out): the instructor's tools
/// dropped into the folder reach nobody limited to `["instructor/*",
/// "{self}/*"]`.
fn tell_unseen_top_level(registry: &crate::registry::Registry, authority: &Authority) {
    for id in authority.unseen_top_level(&registry.plugins_report()) {
        tracing::warn!(
            plugin = %id.plugin,
            people = id.people.len(),
            "the top-level plugin {} is outside the tool set of {} (e.g. {}): they never see its \
             tools; add \"*\" to their group's tools (the top level), or publish it into the \
             instructor's namespace",
            id.plugin,
            if id.people.len() == 1 { "one person".to_string() } else { format!("{} people", id.people.len()) },
            id.people.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
        );
    }
}

/// Writes each reload of the tokens file to the audit log: who was added,
/// removed or changed (role or set), by name. Ends with the server.
async fn audit_tokens_file(
    authority: Arc<Authority>,
    publishing: std::sync::Weak<Publishing>,
    shutdown: CancellationToken,
) {
    let mut changes = authority.changes();
    let mut before = authority.people.summary();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        let after = authority.people.summary();
        let names = |pick: &dyn Fn(&String) -> bool| -> Vec<String> {
            before
                .keys()
                .chain(after.keys())
                .filter(|name| pick(name))
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let added = names(&|name| !before.contains_key(name));
        let removed = names(&|name| !after.contains_key(name));
        let changed = names(&|name| {
            before.contains_key(name) && after.contains_key(name) && before[name] != after[name]
        });
        let Some(publishing) = publishing.upgrade() else {
            return;
        };
        // A reload that changed nobody (a comment, the good file back
        // after a refused one) is no change to audit.
        let unchanged = added.is_empty() && removed.is_empty() && changed.is_empty();
        if let Some(audit) = publishing.audit().filter(|_| !unchanged) {
            audit.record(
                crate::publishing::audit::Action::TokensFileReloaded,
                "operator",
                None,
                serde_json::json!({
                    "added": added,
                    "removed": removed,
                    "changed": changed
                        .iter()
                        .map(|name| serde_json::json!({
                            "name": name, "was": before[name], "now": after[name],
                        }))
                        .collect::<Vec<_>>(),
                }),
            );
        }
        tell_unseen_top_level(publishing.registry(), &authority);
        before = after;
    }
}
