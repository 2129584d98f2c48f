//! Section 12: what operating the host costs. REST `POST /tools/echo` at
//! 16 connections under wrk, on three servers in the same run:
//! - `default`: every call counted (the call ledger is always on), no
//!   exporter: what `toolhost serve` does out of the box;
//! - `metrics scraped`: the same, with `GET /metrics` read every second
//!   during the run, as a Prometheus would;
//! - `traces exported`: `OTEL_EXPORTER_OTLP_ENDPOINT` set, a trace of five
//!   spans per call sent by OTLP/HTTP (protobuf) to a sink in this process;
//! - `1 in 10 traced`: the same with the SDK's standard sampler variables
//!   (`OTEL_TRACES_SAMPLER=traceidratio`, `OTEL_TRACES_SAMPLER_ARG=0.1`).
//!
//! Each is reported in requests per second, with its ratio to `default`
//! (the mean of one run before and one after the scraped run, on the same
//! server: each server gets a second of warm-up, and order still shows on
//! this machine).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::options::BenchOptions;
use crate::probes::{Spawned, toolhost_binary, wrk_echo};
use crate::report::Report;

pub(crate) fn section(
    options: &BenchOptions,
    work: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = work.join("operations");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let cache = work.join("cache-operations");
    let load = |server: &Spawned, seconds: &str| wrk_echo(work, server, "/tools/echo", seconds);
    // Each server is warmed for a second first: the first calls after a
    // start pay for the pool's first slots and the allocator's growth.
    let run = |server: &Spawned| {
        load(server, "1s")?;
        load(server, duration)
    };

    let plain = Spawned::serve(&dir, &cache, &[])?;
    let default = run(&plain)?;

    let scraping = Arc::new(AtomicBool::new(true));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraper = {
        let (scraping, scrapes, address) = (scraping.clone(), scrapes.clone(), plain.address);
        std::thread::spawn(move || {
            while scraping.load(Ordering::Relaxed) {
                if scrape(address).is_ok() {
                    scrapes.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let scraped = run(&plain);
    scraping.store(false, Ordering::Relaxed);
    let _ = scraper.join();
    let scraped = scraped?;
    anyhow::ensure!(
        scrapes.load(Ordering::Relaxed) > 0,
        "/metrics was never read"
    );
    // The default measured again after the scraped run, on the same
    // server: the two runs' mean is the default (order costs otherwise).
    let again = run(&plain)?;
    drop(plain);
    let default_rps = (default.rps + again.rps) / 2.0;

    let (sink, exports) = otlp_sink()?;
    let traced_server = |sampler: &[(&str, &str)]| {
        let mut command = Command::new(toolhost_binary());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--plugins"])
            .arg(&dir)
            .arg("--cache-dir")
            .arg(&cache)
            .env("TOOLHOST_LOG", "info,rmcp=warn")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{sink}"))
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            .envs(sampler.iter().copied());
        Spawned::start(&mut command)
    };
    let traced = run(&traced_server(&[])?)?;
    anyhow::ensure!(
        exports.load(Ordering::Relaxed) > 0,
        "no trace reached the sink"
    );
    // One call in ten traced, by the SDK's standard sampler variables.
    let sampled = run(&traced_server(&[
        ("OTEL_TRACES_SAMPLER", "traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
    ])?)?;

    let section = "operations";
    report.record(
        section,
        "REST c=16 default req/s (before and after the scraped run)",
        json!([default.rps, again.rps]),
        format!("{:.0} / {:.0}", default.rps, again.rps),
    );
    report.requests_per_second(section, "REST c=16 metrics scraped", &scraped);
    report.requests_per_second(section, "REST c=16 traces exported", &traced);
    report.requests_per_second(section, "REST c=16 1 in 10 traced", &sampled);
    for (name, run) in [
        ("metrics scraped / default", &scraped),
        ("traces exported / default", &traced),
        ("1 in 10 traced / default", &sampled),
    ] {
        report.ratio(section, name, run.rps / default_rps);
    }
    let exported = exports.load(Ordering::Relaxed);
    report.record(
        section,
        "OTLP exports received",
        json!(exported),
        exported.to_string(),
    );
    Ok(())
}

/// One `GET /metrics`, read whole.
fn scrape(address: SocketAddr) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(address)?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(())
}

/// An OTLP/HTTP receiver that reads each export and answers 200, counting
/// the exports.
fn otlp_sink() -> anyhow::Result<(SocketAddr, Arc<AtomicU64>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let exports = Arc::new(AtomicU64::new(0));
    let counted = exports.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || -> std::io::Result<()> {
                let mut reader = BufReader::new(stream.try_clone()?);
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line)? == 0 {
                        return Ok(());
                    }
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header)?;
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body)?;
                    counted.fetch_add(1, Ordering::Relaxed);
                    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")?;
                }
            });
        }
    });
    Ok((address, exports))
}
