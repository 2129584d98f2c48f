//! Section 10: one table row per language (Rust, Python, JavaScript) for
//! what a workshop feels: the component's size, one rebuild after an edit,
//! the cold compile (`toolhost check --no-cache`: the baseline compiler for
//! components of 1 MiB and more), how long the optimised code takes to
//! take over, the first call after a drop with a cold and with a warm
//! cache, a call in process (instantiate + call, optimised code) and the
//! server's memory with the plugin loaded; then Python and JavaScript
//! loaded together and removed again.
//!
//! The tools are the smallest of each example, so the call rows compare
//! the cost of a fresh instance of each language's runtime: Rust `echo`,
//! Python `slugify`, JavaScript `change_case`.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::call::envelope::TextFormat;
use toolhost::runtime::Limits;
use toolhost::{Host, HostConfig};

use super::options::BenchOptions;
use super::probes::{Spawned, percentile, resident_mib, toolhost_binary};
use super::report::Report;
use super::wire::{send_call, wait_until_for as wait};

/// One language's example and how it is rebuilt.
struct Language {
    label: &'static str,
    id: &'static str,
    component: PathBuf,
    tool: &'static str,
    arguments: Value,
    /// The rebuild after an edit (a touch of the source), from the
    /// repository root.
    build: Vec<&'static str>,
    touch: &'static str,
}

pub(super) async fn section(
    options: &BenchOptions,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (Some(python), Some(javascript)) = (&options.python, &options.javascript) else {
        return Ok(());
    };
    let languages = [
        Language {
            label: "Rust",
            id: "echo",
            component: options.echo.clone(),
            tool: "echo",
            arguments: json!({"text": "hello"}),
            build: vec!["make", "-s", "plugins"],
            touch: "plugins/echo/src/lib.rs",
        },
        Language {
            label: "Python",
            id: "textpy",
            component: python.clone(),
            tool: "slugify",
            arguments: json!({"text": "hello"}),
            build: vec!["make", "-s", "plugins/textpy.wasm"],
            touch: "plugins/textpy/app.py",
        },
        Language {
            label: "JS",
            id: "textjs",
            component: javascript.clone(),
            tool: "change_case",
            arguments: json!({"text": "hello", "to": "upper"}),
            build: vec!["make", "-s", "plugins/textjs.wasm"],
            touch: "plugins/textjs/app.js",
        },
    ];
    let folder = work.join("languages");
    let cache = work.join("cache-languages");
    std::fs::create_dir_all(&folder)?;
    let cold = Spawned::serve(&folder, &cache, &[])?;
    std::thread::sleep(Duration::from_millis(300));
    let empty_mib = resident_mib(cold.child.id())?;
    let mut row = |label: &str, name: &str, value: Value, shown: String| {
        report.record("languages", &format!("{label}: {name}"), value, shown);
    };
    for language in &languages {
        let label = language.label;
        if !options.quick {
            let seconds = rebuild(language)?;
            row(
                label,
                "rebuild after an edit s",
                json!(seconds),
                format!("{seconds:.1}"),
            );
        }
        // Read after the rebuild: the warm rows below drop the same bytes.
        let bytes = std::fs::read(&language.component)?;
        let mb = bytes.len() as f64 / 1e6;
        row(label, "component MB", json!(mb), format!("{mb:.1}"));
        let started = Instant::now();
        let checked = Command::new(toolhost_binary())
            .args(["check", "--no-cache"])
            .arg(&language.component)
            .output()?;
        anyhow::ensure!(checked.status.success(), "check failed for {label}");
        let seconds = started.elapsed().as_secs_f64();
        row(
            label,
            "cold compile (check) s",
            json!(seconds),
            format!("{seconds:.2}"),
        );

        // Cold cache: drop, first answer, then the optimised code.
        let before_mib = resident_mib(cold.child.id())?;
        let dropped = drop_in(&folder, language.id, &bytes)?;
        wait(Duration::from_secs(120), || {
            status(cold.address, language) == Some(200)
        })?;
        let first = dropped.elapsed().as_secs_f64();
        row(
            label,
            "first call after drop, cold cache s",
            json!(first),
            format!("{first:.2}"),
        );
        wait(Duration::from_secs(600), || {
            plugin(cold.address, language.id).is_some_and(|p| p["compiler"] == "optimized")
        })?;
        let optimised = dropped.elapsed().as_secs_f64();
        row(
            label,
            "optimised code serving after s",
            json!(optimised),
            format!("{optimised:.1}"),
        );
        std::thread::sleep(Duration::from_millis(300));
        let loaded = resident_mib(cold.child.id())? - before_mib;
        row(
            label,
            "RSS added, loaded MiB",
            json!(loaded),
            format!("{loaded:.0}"),
        );
    }

    // Both large plugins together, then gone: back near the baseline?
    let all_mib = resident_mib(cold.child.id())?;
    for id in ["textpy", "textjs"] {
        std::fs::remove_file(folder.join(format!("{id}.wasm")))?;
    }
    wait(Duration::from_secs(30), || {
        plugin(cold.address, "textpy").is_none() && plugin(cold.address, "textjs").is_none()
    })?;
    std::thread::sleep(Duration::from_millis(500));
    let after_mib = resident_mib(cold.child.id())?;
    report.record(
        "languages",
        "server RSS MiB: empty / Rust+Python+JS loaded / Python+JS removed",
        json!([empty_mib, all_mib, after_mib]),
        format!("{empty_mib:.0} / {all_mib:.0} / {after_mib:.0}"),
    );
    drop(cold);

    // Warm cache (the optimised code is there now): a new server, a drop.
    let warm_folder = work.join("languages-warm");
    std::fs::create_dir_all(&warm_folder)?;
    let warm = Spawned::serve(&warm_folder, &cache, &[])?;
    for language in &languages {
        let dropped = drop_in(
            &warm_folder,
            language.id,
            &std::fs::read(&language.component)?,
        )?;
        wait(Duration::from_secs(60), || {
            status(warm.address, language) == Some(200)
        })?;
        let ms = dropped.elapsed().as_secs_f64() * 1e3;
        report.record(
            "languages",
            &format!("{}: first call after drop, warm cache ms", language.label),
            json!(ms),
            format!("{ms:.0}"),
        );
    }
    drop(warm);

    // In process, on the optimised code from the cache.
    let host = Host::open(HostConfig {
        limits: Limits {
            timeout: Duration::from_secs(10),
            memory_bytes: 256 << 20,
        },
        cache_dir: Some(cache),
        max_calls: 8,
        ..HostConfig::new(&warm_folder).once()
    })
    .await?;
    let calls = if options.quick { 100 } else { 3000 };
    for language in &languages {
        let arguments = language.arguments.as_object().cloned().unwrap_or_default();
        let mut samples = Vec::with_capacity(calls);
        for round in 0..calls + calls / 10 {
            let started = Instant::now();
            let envelope = host
                .call(language.tool, arguments.clone(), TextFormat::Json)
                .await;
            let us = started.elapsed().as_secs_f64() * 1e6;
            anyhow::ensure!(!envelope.is_error, "{} failed in process", language.tool);
            if round >= calls / 10 {
                samples.push(us);
            }
        }
        let (p50, p99) = (percentile(&samples, 50.0), percentile(&samples, 99.0));
        report.record(
            "languages",
            &format!("{}: call in process p50/p99 us", language.label),
            json!([p50, p99]),
            format!("{p50:.0} / {p99:.0}"),
        );
    }
    Ok(())
}

/// Touches the example's source and rebuilds it the way `make` does.
fn rebuild(language: &Language) -> anyhow::Result<f64> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let source = root.join(language.touch);
    let text = std::fs::read(&source)?;
    std::fs::write(&source, &text)?;
    let started = Instant::now();
    let status = Command::new(language.build[0])
        .args(&language.build[1..])
        .current_dir(root)
        .status()?;
    anyhow::ensure!(status.success(), "rebuilding {} failed", language.label);
    Ok(started.elapsed().as_secs_f64())
}

/// Writes beside, renames into place; returns when the rename happened.
fn drop_in(folder: &Path, id: &str, bytes: &[u8]) -> anyhow::Result<Instant> {
    let temp = folder.join(format!(".{id}.wasm.tmp"));
    std::fs::write(&temp, bytes)?;
    let started = Instant::now();
    std::fs::rename(&temp, folder.join(format!("{id}.wasm")))?;
    Ok(started)
}

/// The status of one REST call of the language's tool.
fn status(address: SocketAddr, language: &Language) -> Option<u16> {
    let stream = send_call(address, language.tool, &language.arguments.to_string())?;
    let mut status_line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut status_line).ok()?;
    status_line.split_whitespace().nth(1)?.parse().ok()
}

/// `GET /plugins`, the entry for `id`.
fn plugin(address: SocketAddr, id: &str) -> Option<Value> {
    let mut stream = TcpStream::connect(address).ok()?;
    write!(
        stream,
        "GET /plugins HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let body = response.split_once("\r\n\r\n")?.1;
    let report: Value = serde_json::from_str(body).ok()?;
    report["plugins"]
        .as_array()?
        .iter()
        .find(|plugin| plugin["id"] == id && plugin["state"] == "loaded")
        .cloned()
}
