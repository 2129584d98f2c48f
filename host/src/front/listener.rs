//! The HTTP server under REST and MCP: accepts connections and serves the
//! router on each, with the transport limits `axum::serve` does not offer.
//!
//! - TCP_NODELAY on every accepted socket. A response often goes out in
//!   more than one write (headers then body, SSE events); with Nagle's
//!   algorithm the second small write waits for the client's delayed ACK,
//!   about 40 ms per call on an MCP session.
//! - A header-read timeout (`--header-timeout-ms`, default 10 s): a client
//!   must send a request's whole header within it, and a keep-alive
//!   connection that sends no next request is closed after it (hyper runs
//!   the same timer while it waits for the next request). A response in
//!   progress, such as an SSE stream, is not affected.
//! - A connection cap (`--max-connections`, default 1024): past it a new
//!   connection gets a 503 BUSY envelope and is closed, so idle or slow
//!   clients cannot take every file descriptor.
//! - Graceful shutdown: on the shutdown signal it stops accepting, and open
//!   connections get a short grace period to finish.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;

/// How long open connections may take to finish once shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) header_timeout: Duration,
    pub(crate) max_connections: usize,
}

/// Serves `app` on `listener` until `shutdown` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    // Out of descriptors, say: back off instead of spinning.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(refuse(stream, limits.max_connections));
            continue;
        };
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("closing connections still open after the grace period");
    }
    Ok(())
}

/// Answers a connection past the cap with 503 and closes it, without
/// parsing its request. What the client sent is read and dropped (briefly,
/// and bounded) before closing: closing a socket with unread data makes the
/// kernel send a reset, and the client would see that instead of the 503.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let envelope = Envelope::host_error(
        ErrorCode::Busy,
        format!("the server already has its maximum of {max_connections} connections open"),
        Some(serde_json::json!({ "maxConnections": max_connections, "retryAfterMs": 1000 })),
    );
    let body = crate::front::http::http_body(&envelope).to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                read => drained += read,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
