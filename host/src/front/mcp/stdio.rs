//! MCP over stdio: the process's stdin and stdout, with rmcp in between
//! and every incoming line checked first (`jsonrpc.rs`), so that a
//! malformed message gets the same JSON-RPC error as over HTTP (rmcp would
//! answer `tools/call` with array arguments as an unknown method, -32601).
//!
//! Lines that pass go to rmcp unchanged; rmcp's answers go to stdout a
//! whole line at a time, with the filter's own error answers between them,
//! never inside one. Nothing but MCP messages is written to stdout.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::front::mcp::jsonrpc;

/// How much is buffered between the filter and rmcp, each way.
const PIPE_BYTES: usize = 1 << 16;

/// The longest message accepted on stdin, as in rmcp's own stdio transport;
/// a longer one is read to its end, dropped and answered with -32600.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// rmcp's side of the transport, and the task that writes stdout (await it
/// once the service has ended, so the last answers are flushed).
pub(crate) struct CheckedStdio {
    pub(crate) transport: (DuplexStream, DuplexStream),
    pub(crate) stdout_done: JoinHandle<()>,
}

pub(crate) fn transport() -> CheckedStdio {
    let (mut to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (lines, mut outgoing) = mpsc::channel::<Vec<u8>>(64);

    let stdout_done = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });

    let answers = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        return;
                    }
                }
            }
        }
    });

    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        while let Ok(Some(fits)) = read_line(&mut stdin, &mut line).await {
            if fits && line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let checked = if fits {
                jsonrpc::parse(&line).map(|_| ())
            } else {
                Err(jsonrpc::Rejection::too_large(MAX_LINE_BYTES))
            };
            let rejection = match checked {
                Ok(()) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if to_rmcp.write_all(&line).await.is_err() {
                        return;
                    }
                    continue;
                }
                Err(rejection) => rejection,
            };
            // A notification gets no answer, even a malformed one (JSON-RPC
            // 2.0, section 4.1): bad params with no id can only be one.
            if rejection.code == jsonrpc::INVALID_PARAMS && rejection.id.is_null() {
                tracing::warn!(reason = %rejection.message, "ignoring a malformed notification");
                continue;
            }
            let mut answer = rejection.to_json().to_string().into_bytes();
            answer.push(b'\n');
            if lines.send(answer).await.is_err() {
                return;
            }
        }
        // End of input: dropping `to_rmcp` ends rmcp's service.
    });

    CheckedStdio {
        transport: (rmcp_reads, rmcp_writes),
        stdout_done,
    }
}

/// Reads one line into `line`, keeping at most [`MAX_LINE_BYTES`]: `Some(true)`
/// for a line that fits, `Some(false)` for one that was longer (read to its
/// end and dropped), `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut fits = true;
    let mut read_any = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(read_any.then_some(fits));
        }
        read_any = true;
        let (taken, ends) = match buffer.iter().position(|&byte| byte == b'\n') {
            Some(newline) => (newline + 1, true),
            None => (buffer.len(), false),
        };
        if fits && line.len() + taken <= MAX_LINE_BYTES {
            line.extend_from_slice(&buffer[..taken]);
        } else {
            fits = false;
            line.clear();
        }
        reader.consume(taken);
        if ends {
            return Ok(Some(fits));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_past_the_limit_are_dropped_whole() {
        let long = vec![b'x'; MAX_LINE_BYTES + 1];
        let mut input = Vec::new();
        input.extend_from_slice(b"{}\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nlast");
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert_eq!(read_line(&mut reader, &mut line).await.unwrap(), Some(true));
        assert_eq!(line, b"{}\n");
        assert_eq!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Some(false)
        );
        assert!(line.is_empty());
        assert_eq!(read_line(&mut reader, &mut line).await.unwrap(), Some(true));
        assert_eq!(line, b"last");
        assert_eq!(read_line(&mut reader, &mut line).await.unwrap(), None);
    }
}
