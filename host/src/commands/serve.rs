//! `toolhost serve`: the long-running server. Owns its flags, start-up
//! order (watch, then scan, then bind), which fronts run (HTTP with REST
//! and MCP, MCP over stdio, or both) and shutdown on a signal. The server
//! itself is `server.rs`; hot reload is `registry/watcher.rs`.

use super::build_flags::BuildOptions;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::options::{HostOptions, HttpOptions};
use crate::edge::auth::Role;
use crate::edge::oauth::OAuthSettings;
use crate::registry::approvals::ApprovalMode;
use crate::server::Settings;
use crate::{Host, HostConfig};

/// Where HTTP listens when neither `--listen` nor `--stdio` is given.
pub(super) const DEFAULT_LISTEN: &str = "127.0.0.1:8000";

/// What `--require-approval` pins.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum RequireApproval {
    /// The definitions: a code-only replacement goes live.
    Definitions,
    /// The definitions and the component's hash.
    All,
}

#[derive(Args)]
pub(super) struct ServeOptions {
    #[command(flatten)]
    pub(super) host: HostOptions,
    #[command(flatten)]
    http: HttpOptions,
    #[command(flatten)]
    builds: BuildOptions,
    /// Address for HTTP (REST at /, MCP at /mcp) [default: 127.0.0.1:8000,
    /// or none with --stdio]. Loopback by default: expose it on purpose.
    #[arg(long, env = "TOOLHOST_LISTEN")]
    pub(super) listen: Option<SocketAddr>,
    /// Also serve MCP on stdin/stdout, for MCP clients that start toolhost.
    #[arg(long, env = "TOOLHOST_STDIO")]
    stdio: bool,
    /// Require `Authorization: Bearer <TOKEN>` on every HTTP route but /health.
    #[arg(long, env = "TOOLHOST_SERVER_TOKEN", hide_env_values = true)]
    pub(super) token: Option<String>,
    /// People and their roles: a TOML file with one `[[token]]` table per
    /// person (`name`, `secret` or `sha256`, `role` = admin | publisher |
    /// caller | metrics), reloaded when it changes. With neither this nor `--token`,
    /// every route is open (loopback's single-user default).
    #[arg(long, env = "TOOLHOST_TOKENS")]
    pub(super) tokens: Option<std::path::PathBuf>,
    /// Hold each new plugin, and each replacement whose definitions (tool
    /// names, titles, descriptions, schemas, annotations; resources and
    /// prompts) differ from the approved ones, until an admin approves it;
    /// the approved version serves meanwhile. `all` pins the component's
    /// hash too. Approvals are kept in the plugin folder's `.toolhost/`.
    #[arg(
        long,
        env = "TOOLHOST_REQUIRE_APPROVAL",
        num_args = 0..=1,
        default_missing_value = "definitions",
        value_enum
    )]
    require_approval: Option<RequireApproval>,
    /// Accept OAuth 2.1 access tokens (JWTs) from this authorization server
    /// (its issuer identifier, `iss`), beside or instead of tokens. Needs
    /// --auth-audience. HTTPS, or plain HTTP on loopback.
    #[arg(long, env = "TOOLHOST_AUTH_ISSUER", requires = "auth_audience")]
    auth_issuer: Option<String>,
    /// What an access token's `aud` must hold: this server's identifier,
    /// best its public URL (such as https://tools.example.com/mcp), which
    /// is then the resource its /.well-known/oauth-protected-resource names.
    #[arg(long, env = "TOOLHOST_AUTH_AUDIENCE", requires = "auth_issuer")]
    auth_audience: Option<String>,
    /// Where the issuer's signing keys are (a JWKS URL) [default: the
    /// `jwks_uri` of the issuer's metadata].
    #[arg(long, env = "TOOLHOST_AUTH_JWKS", requires = "auth_issuer")]
    auth_jwks: Option<String>,
    /// The access-token claim whose value names its holder's namespace
    /// (after --auth-namespace-prefix). A token whose claim is missing or
    /// cannot be a namespace may call, not publish.
    #[arg(long, env = "TOOLHOST_AUTH_NAMESPACE_CLAIM", default_value = crate::edge::oauth::DEFAULT_NAMESPACE_CLAIM)]
    auth_namespace_claim: String,
    /// What every token holder's namespace starts with; the tokens file
    /// may name nobody with it, so that no token takes a person's
    /// namespace.
    #[arg(long, env = "TOOLHOST_AUTH_NAMESPACE_PREFIX", default_value = crate::edge::oauth::DEFAULT_NAMESPACE_PREFIX)]
    auth_namespace_prefix: String,
    /// The access-token claim whose values (a list, or space-separated)
    /// name the tokens file's `[[group]]`s its holder sees; values that name
    /// no group are ignored (so `scope` works). A token without one sees
    /// nothing. Without this flag, token holders see every tool.
    #[arg(long, env = "TOOLHOST_AUTH_TOOLS_CLAIM", requires = "auth_issuer")]
    auth_tools_claim: Option<String>,
    /// Another host name that Host and Origin headers may name (repeatable;
    /// comma-separated in the variable). Loopback names are always allowed.
    #[arg(
        long = "allowed-host",
        env = "TOOLHOST_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// A browser origin allowed to call from another site (CORS), exactly
    /// `scheme://host[:port]`, such as the MCP Inspector's
    /// `http://localhost:6274` (repeatable; comma-separated in the
    /// variable). None by default; never `*`.
    #[arg(
        long = "cors-origin",
        env = "TOOLHOST_CORS_ORIGINS",
        value_delimiter = ','
    )]
    cors_origins: Vec<String>,
    /// The least role whose token may read `GET /metrics` when tokens are
    /// configured: metrics (a scrape-only token, and every role above it),
    /// caller, publisher or admin. Open with no tokens, like every route.
    #[arg(long, env = "TOOLHOST_METRICS_ROLE", default_value = "metrics", value_parser = parse_role)]
    metrics_role: Role,
    /// How long a plugin file must be quiet before it is (re)loaded, in ms.
    #[arg(long, env = "TOOLHOST_DEBOUNCE_MS", default_value_t = crate::HostConfig::DEBOUNCE.as_millis() as u64)]
    debounce_ms: u64,
    /// How long a client may take to send a request's header, and how long
    /// an idle keep-alive connection stays open, in ms.
    #[arg(long, env = "TOOLHOST_HEADER_TIMEOUT_MS", default_value_t = crate::server::DEFAULT_HEADER_TIMEOUT_MS)]
    header_timeout_ms: u64,
    /// How many HTTP connections may be open at once; at it the oldest idle
    /// keep-alive connection is closed to make room, and only when none is
    /// idle does a new one get 503 BUSY.
    #[arg(long, env = "TOOLHOST_MAX_CONNECTIONS", default_value_t = crate::server::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// How many requests one person (token; an address without one) may
    /// have in flight at once, streams and bodies still coming included;
    /// one more gets 503 BUSY before its body is read. Admins are not
    /// limited [default: an eighth of --max-connections, at least 4].
    #[arg(long, env = "TOOLHOST_MAX_CONNECTIONS_PER_PERSON", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_person: Option<u32>,
    /// How many streams one person may hold open at once: GET /events,
    /// MCP's GET stream and subscriptions/listen together.
    #[arg(long, env = "TOOLHOST_MAX_STREAMS_PER_PERSON", default_value_t = crate::server::DEFAULT_MAX_STREAMS_PER_PERSON as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_streams_per_person: u32,
    /// A TOML file of the keys MCP's `requestState` is sealed with
    /// (`active = "id"` and a `[keys]` table of id = secret, each secret at
    /// least 32 characters): every replica behind one address needs the
    /// same file, and a key is rotated by adding the new one, making it
    /// active, and removing the old one after 15 minutes [default: a random
    /// key of this process].
    #[arg(long, env = "TOOLHOST_REQUEST_STATE_KEYS")]
    request_state_keys: Option<std::path::PathBuf>,
    /// Keep MCP's and REST's tasks in this Redis (`redis://host:port/db`),
    /// which every replica behind one address shares: a task made on one
    /// is read, answered and cancelled on any [default: the plugin
    /// folder's .toolhost/tasks, for one server]
    #[arg(long, env = "TOOLHOST_TASKS_REDIS")]
    tasks_redis: Option<String>,
    /// How long a task's run may take, in seconds: a tool run as a task
    /// (MCP's tasks, REST's `Prefer: respond-async`) is past a call's
    /// deadline (its policy's `timeout_ms`, 10 s by default) until this,
    /// or until that deadline if it is longer
    #[arg(long, env = "TOOLHOST_TASK_TIMEOUT_SECS", default_value_t = crate::tasks::DEFAULT_RUN_DEADLINE.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    task_timeout_secs: u64,
    /// Share this server's write side with every replica that names the
    /// same Redis (`redis://host:port/db`): each publish and removal,
    /// made on any of them, is written into every one's plugin folder, and
    /// tasks are kept there too (as --tasks-redis). A publish answers once
    /// Redis holds it, and is refused with 503 while Redis cannot be
    /// reached; calls never wait on it (docs/many-machines.md) [default:
    /// none, the folder is this server's own]
    #[arg(long, env = "TOOLHOST_REDIS")]
    redis: Option<String>,
    /// A folder of the operator's policies (a Kubernetes ConfigMap):
    /// `_room.toml`, each plugin's `<name>.toml` and each namespace's
    /// `<namespace>/_namespace.toml`, mirrored into the plugin folder and
    /// again whenever they change, so the plugin folder can stay writable
    /// for publishing [default: none, the plugin folder's own policies]
    #[arg(long, env = "TOOLHOST_POLICIES")]
    policies: Option<std::path::PathBuf>,
    /// How many MCP sessions may be open at once; `initialize` past it gets
    /// HTTP 503 with a JSON-RPC error.
    #[arg(long, env = "TOOLHOST_MAX_SESSIONS", default_value_t = crate::server::DEFAULT_MAX_SESSIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// How many MCP sessions one person (token) may hold at once; their
    /// `initialize` past it gets HTTP 503 naming this flag.
    #[arg(long, env = "TOOLHOST_MAX_SESSIONS_PER_PERSON", default_value_t = crate::server::DEFAULT_MAX_SESSIONS_PER_PERSON as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions_per_person: u32,
    /// How many resource subscriptions one person may hold over all their
    /// MCP sessions (one session holds 1,000 at most).
    #[arg(long, env = "TOOLHOST_MAX_SUBSCRIPTIONS_PER_PERSON", default_value_t = crate::server::DEFAULT_MAX_SUBSCRIPTIONS_PER_PERSON as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_subscriptions_per_person: u32,
    /// Longest resource URI a read or subscription may name, in bytes.
    #[arg(long, env = "TOOLHOST_MAX_URI_BYTES", default_value_t = crate::server::DEFAULT_MAX_URI_BYTES as u32, value_parser = clap::value_parser!(u32).range(64..))]
    max_uri_bytes: u32,
    /// How long a request body may take to arrive whole, in seconds, with
    /// a token or without (a pause longer than --header-timeout-ms ends it
    /// sooner); then 408 REQUEST_TIMEOUT and the connection is closed.
    #[arg(long, env = "TOOLHOST_BODY_TIMEOUT_SECS", default_value_t = crate::server::DEFAULT_BODY_TIMEOUT_SECS, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout_secs: u64,
    /// How many uploads (PUT /plugins/...) one person may send at once;
    /// one more gets 503 BUSY before its body is read.
    #[arg(long, env = "TOOLHOST_MAX_UPLOADS_PER_PERSON", default_value_t = crate::server::DEFAULT_MAX_UPLOADS_PER_PERSON as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_uploads_per_person: u32,
    /// An MCP session that sends no request for this long, and has no
    /// client listening on its GET stream, is closed, in seconds.
    #[arg(long, env = "TOOLHOST_SESSION_IDLE_SECS", default_value_t = crate::server::DEFAULT_SESSION_IDLE_SECS, value_parser = clap::value_parser!(u64).range(1..))]
    session_idle_secs: u64,
    /// The most the audit log (`.toolhost/audit.jsonl`, `GET /audit`) keeps,
    /// in KiB; past it, each person keeps an equal share of its newest
    /// entries, and the admins' decisions are kept first.
    #[arg(long, env = "TOOLHOST_AUDIT_MAX_KIB", default_value_t = crate::publishing::audit::MAX_AUDIT_BYTES >> 10, value_parser = clap::value_parser!(u64).range(4..))]
    audit_max_kib: u64,
    /// Largest component `PUT /plugins/...` accepts, in MiB; a larger body
    /// gets 413 before anything is stored.
    #[arg(long, env = "TOOLHOST_MAX_PLUGIN_MIB", default_value_t = crate::server::DEFAULT_MAX_PLUGIN_MIB as u64, value_parser = clap::value_parser!(u64).range(1..=256))]
    max_plugin_mib: u64,
}

impl ServeOptions {
    pub(super) async fn run(self) -> anyhow::Result<()> {
        self.check()?;
        let dir = &self.host.plugins();
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            tracing::info!(folder = %dir.display(), "created the plugin folder");
        }
        let host = Host::open(self.host_config()).await?;
        self.serve(host).await
    }

    /// Refuses flags that cannot work, before anything loads or listens
    /// (`serve` and `dev` ask first).
    pub(super) fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.auth_tools_claim.is_none() || self.tokens.is_some(),
            "--auth-tools-claim names groups of the tokens file: give --tokens FILE with \
             the [[group]]s (a file of groups alone will do)"
        );
        match &self.settings().oauth {
            Some(oauth) => oauth.check(),
            None => Ok(()),
        }
    }

    /// The host `serve` opens: the folder watched.
    pub(super) fn host_config(&self) -> HostConfig {
        HostConfig {
            require_approval: self.require_approval.map(|mode| match mode {
                RequireApproval::Definitions => ApprovalMode::Definitions,
                RequireApproval::All => ApprovalMode::All,
            }),
            audit_max_bytes: self.audit_max_kib << 10,
            shared_redis: self.redis.clone(),
            policies: self.policies.clone(),
            ..self.host.config(Duration::from_millis(self.debounce_ms))
        }
    }

    /// Serves an open host with these flags until Ctrl-C or SIGTERM (or,
    /// with `--stdio` alone, until the MCP client closes stdin).
    pub(super) async fn serve(&self, host: Host) -> anyhow::Result<()> {
        // With --stdio, HTTP runs only when asked for with --listen: an MCP
        // client that starts toolhost must not collide with a server on 8000.
        let listen = match (self.listen, self.stdio) {
            (Some(address), _) => Some(address),
            (None, false) => Some(DEFAULT_LISTEN.parse()?),
            (None, true) => None,
        };
        let settings = self.settings();
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));

        let http = match listen {
            Some(address) => {
                // Bound now, so a port conflict is an immediate error. The
                // server says it listens once its fronts are built (the
                // tokens file read among them).
                let listener = tokio::net::TcpListener::bind(address)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {address}: {e}"))?;
                let stop = shutdown.clone();
                Some(host.serve(listener, settings, async move { stop.cancelled().await }))
            }
            None => None,
        };
        let stdio = async {
            if self.stdio {
                host.serve_stdio(self.host.text_format).await?;
                shutdown.cancel();
            }
            anyhow::Ok(())
        };
        let http = async {
            match http {
                Some(http) => http.await,
                None => Ok(()),
            }
        };
        let (stdio, http) = tokio::join!(stdio, http);
        stdio?;
        http?;
        tracing::info!("stopped");
        Ok(())
    }

    fn settings(&self) -> Settings {
        Settings {
            text_format: self.host.text_format,
            max_body_bytes: self.http.max_body_bytes,
            allowed_hosts: self.allowed_hosts.clone(),
            token: self.token.clone(),
            tokens_file: self.tokens.clone(),
            request_state_keys: self.request_state_keys.clone(),
            tasks_redis: self.tasks_redis.clone().or_else(|| self.redis.clone()),
            task_timeout: Duration::from_secs(self.task_timeout_secs),
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            max_connections: self.max_connections as usize,
            max_sessions: self.max_sessions as usize,
            max_sessions_per_person: self.max_sessions_per_person as usize,
            max_connections_per_person: self.max_connections_per_person.map_or_else(
                || crate::server::default_connections_per_person(self.max_connections as usize),
                |n| n as usize,
            ),
            max_streams_per_person: self.max_streams_per_person as usize,
            max_subscriptions_per_person: self.max_subscriptions_per_person as usize,
            max_uri_bytes: self.max_uri_bytes as usize,
            body_timeout: Duration::from_secs(self.body_timeout_secs),
            max_uploads_per_person: self.max_uploads_per_person as usize,
            session_idle: Duration::from_secs(self.session_idle_secs),
            max_plugin_bytes: (self.max_plugin_mib as usize) * 1024 * 1024,
            cors_origins: self.cors_origins.clone(),
            metrics_role: self.metrics_role,
            oauth: self.auth_issuer.clone().map(|issuer| OAuthSettings {
                issuer,
                audience: self.auth_audience.clone().unwrap_or_default(),
                jwks: self.auth_jwks.clone(),
                namespace_claim: self.auth_namespace_claim.clone(),
                namespace_prefix: self.auth_namespace_prefix.clone(),
                tools_claim: self.auth_tools_claim.clone(),
            }),
            builds: self.builds.settings(),
        }
    }
}

/// `toolhost serve FLAGS…` in this process, on `listener`, until
/// `shutdown` completes: the same flags the binary takes, parsed and
/// checked by the same code, the host opened and served as `serve` does.
/// For programs that embed the server with a command line of their own,
/// and for the integration tests, which then need no process per server.
/// `--listen` and `--stdio` are the binary's (the listener is given).
pub async fn serve_in_process(
    flags: &[&str],
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        options: ServeOptions,
    }
    let parsed = <Serve as clap::Parser>::try_parse_from(
        std::iter::once("serve").chain(flags.iter().copied()),
    )?;
    let options = parsed.options;
    anyhow::ensure!(
        options.listen.is_none() && !options.stdio,
        "--listen and --stdio are the binary's: this server serves the listener it is given"
    );
    options.check()?;
    let host = Host::open(options.host_config()).await?;
    host.serve(listener, options.settings(), shutdown).await
}

/// A `--metrics-role` that names no role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a role: metrics, caller, publisher or admin")]
struct NotARole(String);

fn parse_role(text: &str) -> Result<Role, NotARole> {
    match text {
        "metrics" => Ok(Role::Metrics),
        "caller" => Ok(Role::Caller),
        "publisher" => Ok(Role::Publisher),
        "admin" => Ok(Role::Admin),
        other => Err(NotARole(other.to_string())),
    }
}

/// Ctrl-C or SIGTERM: stop accepting, let calls in flight finish, and end
/// the MCP streams (which would otherwise hold shutdown open forever).
async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    shutdown.cancel();
}
