//! MCP over stdio: the process's stdin and stdout, with rmcp in between
//! and every incoming line checked first (`jsonrpc.rs`), so that a
//! malformed message gets the same JSON-RPC error as over HTTP (rmcp would
//! answer `tools/call` with array arguments as an unknown method, -32601).
//!
//! Lines that pass go to rmcp unchanged; rmcp's answers go to stdout a
//! whole line at a time, with the filter's own error answers between them,
//! never inside one. Nothing but MCP messages is written to stdout.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::jsonrpc;

/// How much is buffered between the filter and rmcp, each way.
const PIPE_BYTES: usize = 1 << 16;

/// rmcp's side of the transport, and the task that writes stdout (await it
/// once the service has ended, so the last answers are flushed).
pub(crate) struct CheckedStdio {
    pub transport: (DuplexStream, DuplexStream),
    pub stdout_done: JoinHandle<()>,
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
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let rejection = match jsonrpc::parse(&line) {
                Ok(_) => {
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
