//! The flags more than one command takes, in one place: where plugins are
//! and how they run ([`HostOptions`], every command) and the HTTP request
//! limits ([`HttpOptions`], `serve` and `cgi`). Each flag has a
//! `TOOLHOST_*` environment variable. A command's own flags live in its
//! own file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::call::envelope::TextFormat;
use crate::registry::Registry;
use crate::registry::tools::ToolListLimits;
use crate::runtime::{Limits, Runtime, TierUp};

/// Options every subcommand shares: where plugins are and how they run.
#[derive(Args, Clone)]
pub(crate) struct HostOptions {
    /// The plugin folder (`*.wasm` files; not searched recursively).
    #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
    pub(crate) plugins: PathBuf,
    /// Wall-clock deadline of one call, in milliseconds.
    #[arg(long, env = "TOOLHOST_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Memory cap of one call, in MiB.
    #[arg(long, env = "TOOLHOST_MEMORY_MIB", default_value_t = 64)]
    memory_mib: usize,
    /// Where compiled plugins are cached [default: $XDG_CACHE_HOME/toolhost
    /// or ~/.cache/toolhost].
    #[arg(long, env = "TOOLHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// How many calls run plugin code at once, over all plugins. A call past
    /// it waits up to 250 ms for a slot, then gets BUSY. A plugin without a
    /// `max_concurrent` policy may use at most half of them.
    #[arg(long, env = "TOOLHOST_MAX_CALLS", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_calls: u32,
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
    /// How a result that has only structured data is rendered as text.
    #[arg(long, env = "TOOLHOST_TEXT_FORMAT", value_enum, default_value = "json")]
    pub(crate) text_format: TextFormat,
}

/// The HTTP request limits of the commands that answer HTTP requests.
#[derive(Args, Clone, Copy)]
pub(crate) struct HttpOptions {
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "TOOLHOST_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub(crate) max_body_bytes: usize,
}

impl HostOptions {
    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir.clone().or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache"))
                })?;
            Some(base.join("toolhost"))
        })
    }

    /// Builds the runtime and an empty registry over it. A server passes
    /// [`TierUp::InBackground`]; a short-lived command [`TierUp::Never`].
    pub(crate) fn registry(&self, tier_up: TierUp) -> anyhow::Result<Arc<Registry>> {
        let limits = Limits {
            timeout: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_mib.saturating_mul(1024 * 1024),
        };
        let list_limits = ToolListLimits {
            max_tools: self.max_tools,
            max_bytes: self.max_tool_list_kib.saturating_mul(1024),
        };
        let runtime = Runtime::new(limits, self.cache_dir(), self.max_calls as usize, tier_up)?;
        Ok(Registry::new(runtime, list_limits))
    }

    /// Builds the registry and loads the plugin folder once, for a
    /// short-lived command.
    pub(crate) async fn loaded_registry(&self) -> anyhow::Result<Arc<Registry>> {
        let registry = self.registry(TierUp::Never)?;
        registry.scan(&self.plugins).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot read the plugin folder {}: {e}",
                self.plugins.display()
            )
        })?;
        Ok(registry)
    }
}
