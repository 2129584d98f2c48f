//! `toolhost serve`: the long-running server. Owns start-up order and
//! shutdown; the REST routes are in `rest.rs`, hot reload in `watcher.rs`.

use std::time::Duration;

use crate::rest::{self, RestSettings};
use crate::{ServeOptions, watcher};

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

    let settings = RestSettings {
        max_body_bytes: options.http.max_body_bytes,
        text_format: options.host.text_format,
    };
    let app = rest::router(registry.clone(), settings);
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    let snapshot = registry.snapshot();
    tracing::info!(
        folder = %dir.display(),
        plugins = snapshot.plugins().count(),
        tools = snapshot.tools().count(),
        "toolhost listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    tracing::info!("stopped");
    Ok(())
}

/// Ctrl-C or SIGTERM: stop accepting, let calls in flight finish.
async fn shutdown_signal() {
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
}
