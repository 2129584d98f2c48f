//! Section 11 of the harness: a shared workshop server.
//!
//! - Publishing over HTTP (`PUT /plugins/ada/word_count` with a publisher's
//!   token) to the answer that the tools are live, on a warm server, each
//!   time new bytes (a new version, compiled afresh): the small Rust echo,
//!   and the 1.8 MB JavaScript example.
//! - The instructor's echo, called one after another, while attendees
//!   publish new versions of the JavaScript example (compiles on every
//!   core), beside the same calls on a quiet server.
//! - `/health` on a fresh connection each time, while 2,000 idle
//!   connections are open (1,000 keep-alive after one request, 1,000 that
//!   never sent a byte; `--header-timeout-ms` raised so that none expires
//!   during the measure), and whether calls still succeed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::options::BenchOptions;
use super::probes::{Spawned, percentile};
use super::report::Report;

const TOKEN: &str = "ada-bench-secret-0123456789";

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("workshop");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let tokens = work.join("workshop-tokens.toml");
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"ada\"\nsecret = \"{TOKEN}\"\nrole = \"publisher\"\n"),
    )?;
    let server = Spawned::serve(
        &dir,
        &work.join("cache-workshop"),
        &[
            "--tokens",
            tokens.to_str().unwrap_or_default(),
            "--header-timeout-ms",
            "120000",
        ],
    )?;
    let small = std::fs::read(&options.echo)?;
    let (small_runs, js_runs) = if options.quick { (3, 1) } else { (20, 5) };
    // Warm: one publish first, not measured.
    publish(server.address, &variant(&small, 0))?;
    let small_ms = publish_p50(server.address, &small, small_runs)?;
    report.record(
        "workshop",
        &format!("publish → live p50 ms, Rust echo {} KB", small.len() / 1000),
        json!(small_ms),
        format!("{small_ms:.0}"),
    );
    if let Some(javascript) = &options.javascript {
        let js = std::fs::read(javascript)?;
        let js_ms = publish_p50(server.address, &js, js_runs)?;
        report.record(
            "workshop",
            &format!(
                "publish → live p50 ms, JavaScript {:.1} MB",
                js.len() as f64 / 1e6
            ),
            json!(js_ms),
            format!("{js_ms:.0}"),
        );
    }
    if let Some(javascript) = &options.javascript {
        calls_beside_publishes(options, server.address, &std::fs::read(javascript)?, report)?;
    }
    health_beside_idle(options, server.address, report)?;
    drop(server);
    Ok(())
}

/// The median of `runs` publishes of new versions of `bytes`.
fn publish_p50(address: SocketAddr, bytes: &[u8], runs: usize) -> anyhow::Result<f64> {
    let mut samples = Vec::new();
    for run in 1..=runs {
        let version = variant(bytes, run);
        let started = Instant::now();
        publish(address, &version)?;
        samples.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(percentile(&samples, 50.0))
}

/// `PUT /plugins/ada/word_count`; an error unless the answer is 200 or 201.
fn publish(address: SocketAddr, wasm: &[u8]) -> anyhow::Result<()> {
    publish_as(address, "word_count", wasm)
}

fn publish_as(address: SocketAddr, name: &str, wasm: &[u8]) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(address)?;
    write!(
        stream,
        "PUT /plugins/ada/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        wasm.len()
    )?;
    stream.write_all(wasm)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.split_whitespace().nth(1).unwrap_or("");
    anyhow::ensure!(
        status == "200" || status == "201",
        "the publish was answered {}",
        answer.lines().last().unwrap_or("")
    );
    Ok(())
}

/// `bytes` with a custom section naming `version` appended: the same
/// component, new bytes.
fn variant(bytes: &[u8], version: usize) -> Vec<u8> {
    let name = b"toolhost-bench";
    let payload = version.to_string();
    let mut out = bytes.to_vec();
    out.extend_from_slice(&[0, (1 + name.len() + payload.len()) as u8, name.len() as u8]);
    out.extend_from_slice(name);
    out.extend_from_slice(payload.as_bytes());
    out
}

/// `/health` latency on fresh connections beside 2,000 idle ones.
fn health_beside_idle(
    options: &BenchOptions,
    address: SocketAddr,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (idle, probes) = if options.quick {
        (200, 50)
    } else {
        (1000, 500)
    };
    let mut kept = Vec::new();
    for _ in 0..idle {
        let mut stream = TcpStream::connect(address)?;
        write!(stream, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse()?;
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        kept.push(stream);
    }
    let silent = (0..idle)
        .map(|_| TcpStream::connect(address))
        .collect::<Result<Vec<_>, _>>()?;
    // `connect` returns once the kernel has the connection; give the server
    // a moment to take the burst in (making room for it by closing idle
    // keep-alive ones), so that what is measured is the steady state with
    // all of them open.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut samples = Vec::new();
    let mut failed = 0;
    for _ in 0..probes {
        let started = Instant::now();
        let mut stream = TcpStream::connect(address)?;
        write!(
            stream,
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )?;
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        if !answer.starts_with("HTTP/1.1 200") {
            if failed == 0 {
                eprintln!("workshop: a /health probe got {:?}", answer.lines().next());
            }
            failed += 1;
        }
    }
    let calls = if options.quick { 10 } else { 100 };
    let failed_calls = (0..calls).filter(|_| !echo_answers(address)).count();
    let (p50, p99) = (percentile(&samples, 50.0), percentile(&samples, 99.0));
    report.record(
        "workshop",
        &format!(
            "/health p50/p99 ms beside {} idle connections",
            kept.len() + silent.len()
        ),
        json!([p50, p99]),
        format!("{p50:.2} / {p99:.2}"),
    );
    report.record(
        "workshop",
        "/health and echo calls failed meanwhile",
        json!([failed, failed_calls]),
        format!("{failed} of {probes} / {failed_calls} of {calls}"),
    );
    drop((kept, silent));
    Ok(())
}

/// Whether `POST /tools/echo`, as ada, answers 200.
fn echo_answers(address: SocketAddr) -> bool {
    let body = r#"{"text":"x"}"#;
    let answer = TcpStream::connect(address).and_then(|mut stream| {
        write!(
            stream,
            "POST /tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    });
    answer.is_ok_and(|answer| answer.starts_with("HTTP/1.1 200"))
}

/// Echo latency, p50 and p99 ms, quiet and while publishes compile.
fn calls_beside_publishes(
    options: &BenchOptions,
    address: SocketAddr,
    js: &[u8],
    report: &mut Report,
) -> anyhow::Result<()> {
    let quiet = (0..200)
        .map(|_| timed_echo(address))
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let (publishers, each) = if options.quick { (2, 1) } else { (4, 3) };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles: Vec<_> = (0..publishers)
        .map(|publisher| {
            let (js, done) = (js.to_vec(), done.clone());
            std::thread::spawn(move || {
                for round in 0..each {
                    let version = variant(&js, 1000 + publisher * 100 + round);
                    let _ = publish_as(address, &format!("busy{publisher}"), &version);
                }
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        })
        .collect();
    let mut busy = Vec::new();
    while done.load(std::sync::atomic::Ordering::Relaxed) < publishers {
        busy.push(timed_echo(address)?);
    }
    for handle in handles {
        let _ = handle.join();
    }
    let shown = |samples: &[f64]| (percentile(samples, 50.0), percentile(samples, 99.0));
    let ((quiet_p50, quiet_p99), (busy_p50, busy_p99)) = (shown(&quiet), shown(&busy));
    report.record(
        "workshop",
        &format!("echo p50/p99 ms, quiet / while {publishers} attendees publish JS"),
        json!([quiet_p50, quiet_p99, busy_p50, busy_p99]),
        format!("{quiet_p50:.2} / {quiet_p99:.2}, {busy_p50:.2} / {busy_p99:.2}"),
    );
    Ok(())
}

/// One echo call as ada on a fresh connection, in ms; an error if it
/// fails.
fn timed_echo(address: SocketAddr) -> anyhow::Result<f64> {
    let started = Instant::now();
    anyhow::ensure!(echo_answers(address), "echo failed");
    Ok(started.elapsed().as_secs_f64() * 1e3)
}
