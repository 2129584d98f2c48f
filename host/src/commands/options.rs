//! The flags more than one command takes, in one place: where plugins are
//! and how they run ([`HostOptions`], every command) and the HTTP request
//! limits ([`HttpOptions`], `serve` and `cgi`). Each flag has a
//! `TOOLHOST_*` environment variable. A command's own flags live in its
//! own file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::call::envelope::TextFormat;
use crate::registry::shares::PersonShares;
use crate::registry::tools::ToolListLimits;
use crate::runtime::{Limits, TierUp};
use crate::{Host, HostConfig};

/// The plugin folder when none is named.
const DEFAULT_PLUGINS: &str = "plugins";

/// Options every subcommand shares: where plugins are and how they run.
#[derive(Args, Clone)]
pub(crate) struct HostOptions {
    /// The plugin folder (`*.wasm` files; not searched recursively)
    /// [default: plugins].
    #[arg(long = "plugins", env = "TOOLHOST_PLUGINS")]
    pub(crate) plugins_given: Option<PathBuf>,
    /// Wall-clock deadline of one call, in milliseconds.
    #[arg(long, env = "TOOLHOST_TIMEOUT_MS", default_value_t = HostConfig::LIMITS.timeout.as_millis() as u64)]
    timeout_ms: u64,
    /// Memory cap of one call, in MiB.
    #[arg(long, env = "TOOLHOST_MEMORY_MIB", default_value_t = HostConfig::LIMITS.memory_bytes / (1024 * 1024))]
    memory_mib: usize,
    /// Where compiled plugins are cached [default: $XDG_CACHE_HOME/toolhost
    /// or ~/.cache/toolhost].
    #[arg(long, env = "TOOLHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// How many calls run plugin code at once, over all plugins. A call past
    /// it waits up to 250 ms for a slot, then gets BUSY. A plugin without a
    /// `max_concurrent` policy may use at most half of them, and one person (a
    /// namespace) a quarter (`--max-calls-per-person`).
    #[arg(long, env = "TOOLHOST_MAX_CALLS", default_value_t = HostConfig::MAX_CALLS as u32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_calls: u32,
    /// How many calls of one person's tools (a namespace's) run at once, over
    /// all their plugins [default: a quarter of --max-calls, at least 1].
    #[arg(long, env = "TOOLHOST_MAX_CALLS_PER_PERSON", value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_calls_per_person: Option<u32>,
    /// How many plugins one person (a namespace) may publish.
    #[arg(long, env = "TOOLHOST_MAX_PLUGINS_PER_PERSON", default_value_t = PersonShares::DEFAULT.max_plugins as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_plugins_per_person: u32,
    /// How large one person's plugins may be together, in MiB.
    #[arg(long, env = "TOOLHOST_MAX_MIB_PER_PERSON", default_value_t = PersonShares::DEFAULT.max_bytes >> 20, value_parser = clap::value_parser!(u64).range(1..))]
    max_mib_per_person: u64,
    /// How many tools one plugin may list; a plugin listing more is rejected.
    #[arg(long, env = "TOOLHOST_MAX_TOOLS", default_value_t = ToolListLimits::DEFAULT.max_tools)]
    max_tools: usize,
    /// How large one plugin's tool list (names, descriptions and schemas
    /// together) may be, in KiB; a plugin listing more is rejected.
    #[arg(long, env = "TOOLHOST_MAX_TOOL_LIST_KIB", default_value_t = ToolListLimits::DEFAULT.max_bytes / 1024)]
    max_tool_list_kib: usize,
    /// Compile every plugin afresh, and cache nothing.
    #[arg(long, env = "TOOLHOST_NO_CACHE")]
    no_cache: bool,
    /// A PEM public key (cosign.pub): every plugin whose policy names an OCI
    /// source must carry a cosign signature by this key over the exact
    /// digest it serves; one without is refused with the reason, and the
    /// previous version keeps serving.
    #[arg(long, env = "TOOLHOST_VERIFY_KEY", value_name = "FILE")]
    verify_key: Option<PathBuf>,
    /// Registry credentials, in docker's config.json format [default:
    /// $DOCKER_CONFIG/config.json or ~/.docker/config.json].
    #[arg(long, env = "TOOLHOST_REGISTRY_CONFIG", value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// How a result that has only structured data is rendered as text.
    #[arg(long, env = "TOOLHOST_TEXT_FORMAT", value_enum, default_value = "json")]
    pub(crate) text_format: TextFormat,
}

/// The HTTP request limits of the commands that answer HTTP requests.
#[derive(Args, Clone, Copy)]
pub(crate) struct HttpOptions {
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "TOOLHOST_MAX_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BODY_BYTES)]
    pub(crate) max_body_bytes: usize,
}

impl HostOptions {
    /// The plugin folder: as given (on the command line or in
    /// `TOOLHOST_PLUGINS`), else `plugins` in the working directory.
    pub(crate) fn plugins(&self) -> PathBuf {
        self.plugins_given
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS))
    }

    /// The host these flags describe, for a server: watched with
    /// `debounce`, baseline code optimised in the background.
    pub(crate) fn config(&self, debounce: Duration) -> HostConfig {
        HostConfig {
            folder: Some(self.plugins()),
            limits: Limits {
                timeout: Duration::from_millis(self.timeout_ms),
                memory_bytes: self.memory_mib.saturating_mul(1024 * 1024),
            },
            max_calls: self.max_calls as usize,
            list_limits: ToolListLimits {
                max_tools: self.max_tools,
                max_bytes: self.max_tool_list_kib.saturating_mul(1024),
            },
            cache_dir: if self.no_cache {
                None
            } else {
                self.cache_dir.clone().or_else(crate::default_cache_dir)
            },
            watch: Some(debounce),
            tier_up: TierUp::InBackground,
            per_person: PersonShares {
                max_plugins: self.max_plugins_per_person as usize,
                max_bytes: self.max_mib_per_person << 20,
                max_calls: self.max_calls_per_person.map(|n| n as usize),
            },
            verify_key: self.verify_key.clone(),
            registry_config: self.registry_config.clone(),
            require_approval: None,
            audit_max_bytes: crate::publishing::audit::MAX_AUDIT_BYTES,
            shared_redis: None,
            policies: None,
        }
    }

    /// The host for a short-lived command: the folder loaded once.
    pub(crate) async fn open_once(&self) -> anyhow::Result<Host> {
        Host::open(self.config(HostConfig::DEBOUNCE).once()).await
    }
}
