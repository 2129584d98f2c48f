//! What one call's sandbox holds: a WASI context with exactly the plugin's
//! grants (nothing by default), the outbound-HTTP allowlist hook, a memory
//! limiter that remembers when it refused, and bounded capture of the
//! plugin's stdout and stderr.
//!
//! A new [`Sandbox`] is built for every call (and every tool listing), so
//! nothing a plugin did in one call is visible in the next.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::grants::{Grants, HttpAllowlist};

/// How much of each of stdout and stderr one call may leave in the log.
/// Beyond it, output is dropped (and the drop is counted), never an error:
/// a chatty plugin must not fail because the host stopped listening.
pub(crate) const LOG_CAPTURE_BYTES: usize = 16 * 1024;

/// The data of a wasmtime `Store` for one call.
pub(crate) struct Sandbox {
    /// The client behind the call, for the `client` import.
    pub(crate) client: super::client::CallClient,
    /// What the plugin's policy grants (read by the `config` import).
    pub(crate) grants: Arc<Grants>,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_hooks: HttpAllowlist,
    table: ResourceTable,
    pub(crate) limiter: MemoryCap,
    pub(crate) stdout: LogCapture,
    pub(crate) stderr: LogCapture,
}

impl Sandbox {
    /// A fresh sandbox for one call of `plugin`. Fails only if a granted
    /// directory can no longer be opened.
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: Arc<Grants>,
        client: super::client::CallClient,
    ) -> std::io::Result<Self> {
        let stdout = LogCapture::default();
        let stderr = LogCapture::default();
        // Deny by default: no arguments, no stdin, no sockets and no name
        // lookups ever (outbound HTTP goes through wasi:http and its
        // allowlist instead); environment and directories only as granted.
        // Clocks and randomness stay, because they open nothing.
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .envs(&grants.env);
        for dir in &grants.dirs {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.host.display())))?;
        }
        let http_hooks = HttpAllowlist {
            plugin,
            allow: grants.http_allow.clone(),
        };
        Ok(Sandbox {
            client,
            limiter: MemoryCap::new(grants.limits.memory_bytes),
            grants,
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            http_hooks,
            table: ResourceTable::new(),
            stdout,
            stderr,
        })
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Sandbox {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl super::bindings::toolhost::plugin::config::Host for Sandbox {
    async fn get(&mut self, key: String) -> Option<String> {
        self.grants.config.get(&key).cloned()
    }
}

/// One memory budget for the whole call: the bytes of every linear memory
/// and every table of the instance, summed, may not pass the cap (a
/// component with several memories gets no more than one with one). It
/// remembers a refusal, so that the trap that usually follows (a guest
/// aborting on allocation failure) is reported as OUT_OF_MEMORY rather
/// than as a generic trap.
pub(crate) struct MemoryCap {
    cap_bytes: usize,
    used_bytes: usize,
    pub(crate) refused: bool,
}

/// What one table element is counted as: a function reference is a
/// pointer-sized slot in host memory.
const TABLE_ELEMENT_BYTES: usize = 8;

impl MemoryCap {
    fn new(cap_bytes: usize) -> Self {
        MemoryCap {
            cap_bytes,
            used_bytes: 0,
            refused: false,
        }
    }

    /// Grows the call's total from `current` to `desired` bytes for one
    /// memory or table, if the total stays within the cap.
    fn grow(&mut self, current: usize, desired: usize) -> bool {
        let total = (self.used_bytes - current.min(self.used_bytes)).saturating_add(desired);
        let allowed = total <= self.cap_bytes;
        if allowed {
            self.used_bytes = total;
        }
        self.refused |= !allowed;
        allowed
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(current, desired))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
        ))
    }

    fn instances(&self) -> usize {
        super::MAX_CORE_INSTANCES_PER_COMPONENT as usize
    }

    fn memories(&self) -> usize {
        super::MAX_MEMORIES_PER_COMPONENT as usize
    }

    fn tables(&self) -> usize {
        super::MAX_TABLES_PER_COMPONENT as usize
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryCap;

    #[test]
    fn the_budget_covers_every_memory_together() {
        let mut cap = MemoryCap::new(100);
        assert!(cap.grow(0, 60), "a first memory within the cap");
        assert!(!cap.grow(0, 60), "a second memory may not add past the cap");
        assert!(cap.refused);
        assert!(cap.grow(0, 40), "but may use what is left");
        assert!(
            cap.grow(40, 30),
            "shrinking frees budget for growth elsewhere"
        );
        assert!(!cap.grow(60, 71));
    }
}

/// A bounded buffer standing in for a plugin's stdout or stderr. Writes
/// always succeed; bytes past [`LOG_CAPTURE_BYTES`] are counted and dropped.
#[derive(Clone, Default)]
pub(crate) struct LogCapture {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: usize,
}

impl LogCapture {
    fn append(&self, bytes: &[u8]) {
        let mut captured = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = LOG_CAPTURE_BYTES.saturating_sub(captured.bytes.len());
        let kept = bytes.len().min(room);
        captured.bytes.extend_from_slice(&bytes[..kept]);
        captured.dropped += bytes.len() - kept;
    }

    /// The captured text (lossily decoded) and how many bytes were dropped.
    pub(crate) fn take(&self) -> (String, usize) {
        let mut captured = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&captured.bytes).into_owned();
        let dropped = captured.dropped;
        *captured = Captured::default();
        (text, dropped)
    }
}

impl IsTerminal for LogCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for LogCapture {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always ready; large writes are simply truncated by `append`.
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogCapture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LogCapture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
