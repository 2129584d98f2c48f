//! `toolhost serve`: the long-running server. Owns start-up order, which
//! fronts run (HTTP with REST and MCP, MCP over stdio, or both) and shutdown.
//! The routes are in `rest.rs` and `mcp.rs`, guards in `guard.rs`, hot reload
//! in `watcher.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::guard::{self, GuardSettings, LOOPBACK_HOSTS};
use crate::http_server::{self, ConnectionLimits};
use crate::mcp::McpFront;
use crate::mcp_http::{self, McpHttpSettings};
use crate::mcp_stdio;
use crate::registry::Registry;
use crate::rest::{self, RestSettings};
use crate::{ServeOptions, watcher};

/// Where HTTP listens when neither `--listen` nor `--stdio` is given.
const DEFAULT_LISTEN: &str = "127.0.0.1:8000";

pub async fn run(options: ServeOptions) -> anyhow::Result<()> {
    let dir = &options.host.plugins;
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        tracing::info!(folder = %dir.display(), "created the plugin folder");
    }
    let registry = options.host.registry()?;
    // Watch before the first scan, so a file dropped during the scan is
    // still seen (a file seen twice is loaded once: its hash is the same).
    let debounce = Duration::from_millis(options.debounce_ms);
    let _watch = watcher::watch(registry.clone(), dir, debounce)?;
    registry.scan(dir).await?;

    // With --stdio, HTTP runs only when asked for with --listen: an MCP
    // client that starts toolhost must not collide with a server on 8000.
    let listen = match (options.listen, options.stdio) {
        (Some(address), _) => Some(address),
        (None, false) => Some(DEFAULT_LISTEN.parse()?),
        (None, true) => None,
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));

    let http = match listen {
        Some(address) => {
            let server = serve_http(&options, registry.clone(), address, shutdown.clone()).await?;
            Some(tokio::spawn(server))
        }
        None => None,
    };
    if options.stdio {
        serve_stdio(&options, registry).await?;
        shutdown.cancel();
    }
    if let Some(http) = http {
        http.await??;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Binds the listener now (so a port conflict is an immediate error) and
/// returns the server future: REST at `/`, MCP Streamable HTTP at `/mcp`.
async fn serve_http(
    options: &ServeOptions,
    registry: Arc<Registry>,
    address: SocketAddr,
    shutdown: CancellationToken,
) -> anyhow::Result<impl Future<Output = anyhow::Result<()>> + use<>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    let mut allowed_hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    if !local.ip().is_unspecified() {
        allowed_hosts.push(local.ip().to_string());
    }
    allowed_hosts.extend(options.allowed_hosts.iter().cloned());

    let text_format = options.host.text_format;
    let mcp = mcp_http::router(
        registry.clone(),
        McpHttpSettings {
            text_format,
            allowed_hosts: allowed_hosts.clone(),
            max_body_bytes: options.http.max_body_bytes,
            max_sessions: options.max_sessions as usize,
            session_idle: Duration::from_secs(options.session_idle_secs),
            shutdown: shutdown.clone(),
        },
    );

    let guard_settings = Arc::new(GuardSettings {
        allowed_hosts,
        token: options.token.clone(),
    });
    let settings = RestSettings {
        max_body_bytes: options.http.max_body_bytes,
        text_format,
    };
    let app = rest::router(registry.clone(), settings).merge(mcp).layer(
        axum::middleware::from_fn_with_state(guard_settings, guard::check),
    );

    let snapshot = registry.snapshot();
    tracing::info!(
        folder = %options.host.plugins.display(),
        plugins = snapshot.plugins().count(),
        tools = snapshot.tools().count(),
        "toolhost listening on http://{local} (REST at /, MCP at /mcp)"
    );
    let limits = ConnectionLimits {
        header_timeout: Duration::from_millis(options.header_timeout_ms),
        max_connections: options.max_connections as usize,
    };
    Ok(async move {
        http_server::serve(listener, app, limits, shutdown).await?;
        Ok(())
    })
}

/// MCP over stdin/stdout until the client closes stdin. Nothing but MCP
/// messages is ever written to stdout; logs go to stderr.
async fn serve_stdio(options: &ServeOptions, registry: Arc<Registry>) -> anyhow::Result<()> {
    tracing::info!("serving MCP on stdio");
    let front = McpFront::new(registry, options.host.text_format);
    let stdio = mcp_stdio::transport();
    let service = front.serve(stdio.transport).await?;
    service.waiting().await?;
    let _ = tokio::time::timeout(Duration::from_secs(2), stdio.stdout_done).await;
    Ok(())
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
