//! Talking to a server under test over plain sockets: one request and its
//! answer, a call whose answer the caller reads, a file dropped into a
//! folder, and waiting (bounded) for a condition.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) fn wait_until(mut condition: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if condition() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    anyhow::bail!("timed out waiting for the server")
}

/// The status of one `POST /tools/{tool}` over a plain socket.
pub(crate) fn call_status(address: SocketAddr, tool: &str) -> Option<u16> {
    let stream = send_call(address, tool, r#"{"text":"x"}"#)?;
    let mut status_line = String::new();
    BufReader::new(stream).read_line(&mut status_line).ok()?;
    status_line.split_whitespace().nth(1)?.parse().ok()
}

/// Sends `POST /tools/{tool}` with `body` on a fresh connection that the
/// server closes after answering; the answer is the caller's to read.
pub(crate) fn send_call(address: SocketAddr, tool: &str, body: &str) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(address).ok()?;
    write!(
        stream,
        "POST /tools/{tool} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    Some(stream)
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
pub(crate) fn drop_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, dir.join(name))?;
    Ok(())
}

pub(crate) fn wait_until_for(
    limit: Duration,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    anyhow::bail!("timed out after {limit:?}")
}

/// One request on a fresh connection: the status and the body.
pub(crate) fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<(u16, String)> {
    request_with(address, method, path, body, "")
}

/// [`request`] with more header lines (each ending in `\r\n`).
pub(crate) fn request_with(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    headers: &str,
) -> anyhow::Result<(u16, String)> {
    let answer = exchange(address, method, path, body, headers)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or(0);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    ))
}

/// A chunked body's data, its chunk-size lines taken out.
fn dechunk(mut body: &str) -> String {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        data.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    data
}

/// Sends one request (JSON, accepting JSON or SSE) on a fresh connection
/// that closes after the answer, and reads the answer whole.
pub(crate) fn exchange(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    headers: &str,
) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}
