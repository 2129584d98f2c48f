//! Bounded capture of a plugin's stdout and stderr for the log.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// How much of each of stdout and stderr one call may leave in the log.
/// Beyond it, output is dropped (and the drop is counted), never an error:
/// a chatty plugin must not fail because the host stopped listening.
pub(crate) const LOG_CAPTURE_BYTES: usize = 16 * 1024;

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
