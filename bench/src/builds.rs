//! Section 16 of the harness: Python and JavaScript source published to
//! a server, served by its language's runtime (nothing built) beside the
//! full build (`?build=full`, componentize-py and componentize-qjs on the
//! server), each from `PUT` to its first successful call.
//!
//! - One source at a time, on a quiet server (new source each time): the
//!   p50 from `PUT` to the first call answered, runtime and full build.
//! - Thirty people publishing at once (`--max-builds` one per core): when
//!   the last one is live, Python by the runtime and by full builds,
//!   JavaScript by the runtime, with the instructor's echo latency
//!   meanwhile (calls 20 ms apart).
//! - A runtime-served tool's calls: the p50 over its first 200 calls, 10 ms
//!   apart (a room's pace).
//! - Memory and disk: the server's RSS with thirty Python tools live (each
//!   called once, the runtime's optimised code serving) beyond the server
//!   with none, and 3 s after they are removed; what one published Python
//!   version keeps on disk beyond its source.
//! - `toolhost dev word_count.py` with no toolchain: a save to live.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::options::BenchOptions;
use super::probes::{Spawned, percentile, resident_mib, toolhost_binary};
use super::report::Report;

const SECTION: &str = "sources";
const ADMIN: &str = "bench-admin-secret-0123456789";

const PYTHON: &str = r#"from dataclasses import dataclass

from toolhost_plugin import Tools, tool  # noqa: F401


@dataclass
class Count:
    words: int


@tool(name="word_count", read_only=True)
def word_count(text: str) -> Count:
    """Counts the words of a text.

    Args:
        text: The text to count
    """
    return Count(words=len(text.split()))
"#;

const JAVASCRIPT: &str = r#"import { tool, exportPlugin } from "./toolhost.js";

const shout = tool({
  name: "shout",
  description: "Says the text louder.",
  input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run: ({ text }) => text.toUpperCase(),
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [shout] });
"#;

fn secret(person: usize) -> String {
    format!("person-{person}-bench-secret-0123456789")
}

/// The two ways a source goes live.
#[derive(Clone, Copy)]
enum Tier {
    Runtime,
    Build,
}

impl Tier {
    fn query(self) -> &'static str {
        match self {
            Tier::Runtime => "",
            Tier::Build => "?build=full",
        }
    }
}

/// The tool a language's source serves, and its arguments.
fn tool_of(kind: &str) -> (&'static str, &'static str) {
    if kind == "text/x-python" {
        ("word_count", r#"{"text":"a b c"}"#)
    } else {
        ("shout", r#"{"text":"hey"}"#)
    }
}

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let people = if options.quick { 3 } else { 30 };
    let tokens = work.join("builds-tokens.toml");
    let mut text = format!("[[token]]\nname = \"admin\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n");
    for person in 0..people {
        text.push_str(&format!(
            "[[token]]\nname = \"p{person}\"\nsecret = \"{}\"\nrole = \"publisher\"\n",
            secret(person)
        ));
    }
    std::fs::write(&tokens, text)?;
    let serve = |name: &str| -> anyhow::Result<(Spawned, std::path::PathBuf)> {
        let dir = work.join(name);
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
        let server = Spawned::serve(
            &dir,
            &work.join(format!("cache-{name}")),
            &[
                "--tokens",
                tokens.to_str().unwrap_or_default(),
                "--builds",
                "python,js",
            ],
        )?;
        Ok((server, dir))
    };
    let (server, _) = serve("builds")?;
    let runs = if options.quick { 1 } else { 5 };
    for (language, kind, source) in [
        ("Python", "text/x-python", PYTHON),
        ("JavaScript", "text/javascript", JAVASCRIPT),
    ] {
        let mut medians = Vec::new();
        for tier in [Tier::Runtime, Tier::Build] {
            let mut took = Vec::new();
            for run in 0..runs {
                // New source each time: a new version, nothing cached of it.
                let source = format!("{source}{}{run}\n", comment(kind));
                took.push(publish_and_call(server.address, tier, kind, &source, run)?);
            }
            medians.push(percentile(&took, 50.0));
        }
        report.record(
            SECTION,
            &format!("{language} source → first call p50 ms: runtime / full build"),
            json!(medians),
            format!("{:.0} / {:.0}", medians[0], medians[1]),
        );
    }
    calls_at_a_rooms_pace(server.address, options.quick, report)?;
    drop(server);

    let (server, dir) = serve("room")?;
    let before = resident_mib(server.child.id())?;
    let mut lasts = Vec::new();
    let mut echoes = Vec::new();
    for (kind, tier, name) in [
        ("text/x-python", Tier::Runtime, "count"),
        ("text/javascript", Tier::Runtime, "loud"),
    ] {
        let (last, echo) = everyone_at_once(server.address, people, kind, tier, name)?;
        lasts.push(last);
        echoes.push(echo);
    }
    // Every Python tool called once (a room uses what it made), then the
    // memory they hold.
    for person in 0..people {
        let (status, answer) = post(
            server.address,
            &format!("/tools/p{person}__word_count"),
            r#"{"text":"a b"}"#,
        )?;
        anyhow::ensure!(
            status == 200,
            "p{person}'s tool answered {status}: {answer}"
        );
    }
    // Measured once the runtime's optimised code serves (its compile, a
    // few hundred MiB for a minute, happens once per compile cache), as a
    // room runs after its first minutes.
    let settled = Instant::now();
    if !options.quick {
        loop {
            let (_, report) = get(server.address, "/plugins/p0/count")?;
            if report["compiler"] == "optimized" {
                break;
            }
            anyhow::ensure!(
                settled.elapsed() < Duration::from_secs(600),
                "the Python runtime was not optimised within 600 s: {report}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    std::thread::sleep(Duration::from_secs(3));
    let with_them = resident_mib(server.child.id())?;
    let per_version = disk_beyond_source(&dir.join("p0"), "count.py")?;
    for person in 0..people {
        for name in ["count", "loud"] {
            let (status, answer) = delete(server.address, &format!("p{person}/{name}"))?;
            anyhow::ensure!(
                status == 204 || status == 200,
                "removal answered {status}: {answer}"
            );
        }
    }
    std::thread::sleep(Duration::from_secs(3));
    let after = resident_mib(server.child.id())?;
    drop(server);

    // The same room on full builds (Python), on a server of its own.
    let (server, _) = serve("room-builds")?;
    let (last_built, echo_built) = everyone_at_once(
        server.address,
        people,
        "text/x-python",
        Tier::Build,
        "count",
    )?;
    drop(server);
    report.record(
        SECTION,
        &format!("{people} people publish at once, last live s: Python runtime / JS runtime / Python full build"),
        json!([lasts[0], lasts[1], last_built]),
        format!("{:.1} / {:.1} / {last_built:.1}", lasts[0], lasts[1]),
    );
    report.record(
        SECTION,
        "instructor's echo during each burst, p99 ms: Python runtime / JS runtime / Python full build",
        json!([echoes[0], echoes[1], echo_built]),
        format!("{:.1} / {:.1} / {echo_built:.1}", echoes[0], echoes[1]),
    );
    report.record(
        SECTION,
        &format!("RSS with {people} live Python tools beyond none / 3 s after their removal beyond before, MiB"),
        json!([with_them - before, after - before]),
        format!("+{:.0} / +{:.0}", with_them - before, after - before),
    );
    report.record(
        SECTION,
        "disk per published Python version beyond its source, bytes",
        json!(per_version),
        format!("{per_version}"),
    );
    dev_save_to_live(work, report)?;
    Ok(())
}

/// `# ` for Python, `// ` for JavaScript.
fn comment(kind: &str) -> &'static str {
    if kind == "text/x-python" {
        "\n# "
    } else {
        "\n// "
    }
}

/// Publishes `source` as `p0/tool<run>` by `tier`, then calls its tool
/// until it answers: the milliseconds from the `PUT` to that answer.
fn publish_and_call(
    address: SocketAddr,
    tier: Tier,
    kind: &str,
    source: &str,
    run: usize,
) -> anyhow::Result<f64> {
    let (tool, arguments) = tool_of(kind);
    // A plugin per tier and run: a tool name belongs to one plugin, so the
    // previous one goes first.
    let id = "p0/tool";
    let _ = delete(address, id);
    let started = Instant::now();
    let (status, answer) = put(
        address,
        &format!("{id}{}", tier.query()),
        &secret(0),
        kind,
        source,
    )?;
    anyhow::ensure!(
        status == 200 || status == 201,
        "run {run}: the source was answered {status}: {answer}"
    );
    let (status, answer) = post(address, &format!("/tools/p0__{tool}"), arguments)?;
    anyhow::ensure!(status == 200, "its first call answered {status}: {answer}");
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// A runtime-served tool's first calls at a room's pace (10 ms apart):
/// their p50 in each language.
fn calls_at_a_rooms_pace(
    address: SocketAddr,
    quick: bool,
    report: &mut Report,
) -> anyhow::Result<()> {
    let count = if quick { 20 } else { 200 };
    let mut medians = Vec::new();
    for (kind, source) in [("text/x-python", PYTHON), ("text/javascript", JAVASCRIPT)] {
        let (tool, arguments) = tool_of(kind);
        let _ = delete(address, "p0/tool");
        let (status, answer) = put(address, "p0/tool", &secret(0), kind, source)?;
        anyhow::ensure!(
            status == 200 || status == 201,
            "answered {status}: {answer}"
        );
        let mut took = Vec::with_capacity(count);
        for _ in 0..count {
            let started = Instant::now();
            let (status, answer) = post(address, &format!("/tools/p0__{tool}"), arguments)?;
            anyhow::ensure!(status == 200, "a call answered {status}: {answer}");
            took.push(started.elapsed().as_secs_f64() * 1e3);
            std::thread::sleep(Duration::from_millis(10));
        }
        medians.push(percentile(&took, 50.0));
    }
    report.record(
        SECTION,
        &format!(
            "runtime-served tool, first {count} calls 10 ms apart, p50 ms: Python / JavaScript"
        ),
        json!(medians),
        format!("{:.2} / {:.2}", medians[0], medians[1]),
    );
    Ok(())
}

/// `people` publish the `kind` source `name` at once by `tier` while the
/// instructor calls echo: when the last is live (s), and the echo's p99
/// meanwhile (ms).
fn everyone_at_once(
    address: SocketAddr,
    people: usize,
    kind: &'static str,
    tier: Tier,
    name: &'static str,
) -> anyhow::Result<(f64, f64)> {
    let source = if kind == "text/x-python" {
        PYTHON
    } else {
        JAVASCRIPT
    };
    let started = Instant::now();
    let publishes: Vec<_> = (0..people)
        .map(|person| {
            let source = format!("{source}{}person {person}\n", comment(kind));
            std::thread::spawn(move || {
                put(
                    address,
                    &format!("p{person}/{name}{}", tier.query()),
                    &secret(person),
                    kind,
                    &source,
                )
            })
        })
        .collect();
    let mut echo = Vec::new();
    while publishes.iter().any(|publish| !publish.is_finished()) {
        let call = Instant::now();
        let (status, answer) = post(address, "/tools/echo", r#"{"text":"calm"}"#)?;
        anyhow::ensure!(status == 200, "echo answered {status}: {answer}");
        echo.push(call.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut last_live = Duration::ZERO;
    for publish in publishes {
        let (status, answer) = publish
            .join()
            .map_err(|_| anyhow::anyhow!("a publish panicked"))??;
        anyhow::ensure!(
            status == 201 || status == 200,
            "a publish was answered {status}: {answer}"
        );
        last_live = last_live.max(started.elapsed());
    }
    Ok((last_live.as_secs_f64(), percentile(&echo, 99.0)))
}

/// What a published source's plugin keeps in `folder` beyond the source
/// itself: its files' bytes (hidden ones too) less the source's.
fn disk_beyond_source(folder: &Path, file: &str) -> anyhow::Result<u64> {
    let source = std::fs::metadata(folder.join(file))?.len();
    let stem = file.split('.').next().unwrap_or(file);
    let mut total = 0;
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name
            .trim_start_matches('.')
            .starts_with(&format!("{stem}."))
        {
            total += entry.metadata()?.len();
        }
    }
    Ok(total.saturating_sub(source))
}

/// `toolhost dev word_count.py` with no toolchain: the milliseconds from a
/// save to `live in` (p50 of three saves).
fn dev_save_to_live(work: &Path, report: &mut Report) -> anyhow::Result<()> {
    let project = work.join("dev-source");
    std::fs::create_dir_all(&project)?;
    let file = project.join("word_count.py");
    std::fs::write(&file, PYTHON)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    drop(listener);
    let mut child = Command::new(toolhost_binary())
        .arg("dev")
        .arg(&file)
        .args(["--listen", &address.to_string(), "--plugins"])
        .arg(project.join("served"))
        .arg("--cache-dir")
        .arg(work.join("cache-dev-source"))
        .env("TOOLHOST_COMPONENTIZE_PY", project.join("no-toolchain"))
        .env("PATH", "/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let live = |lines: &std::sync::mpsc::Receiver<String>| -> anyhow::Result<()> {
        loop {
            let line = lines.recv_timeout(Duration::from_secs(120))?;
            if line.contains("live in") {
                return Ok(());
            }
        }
    };
    let outcome = (|| {
        live(&lines)?;
        let mut took = Vec::new();
        for save in 0..3 {
            let temp = project.join(".word_count.py.swp");
            std::fs::write(&temp, format!("{PYTHON}\n# save {save}\n"))?;
            let saved = Instant::now();
            std::fs::rename(&temp, &file)?;
            live(&lines)?;
            took.push(saved.elapsed().as_secs_f64() * 1e3);
        }
        anyhow::Ok(percentile(&took, 50.0))
    })();
    let _ = child.kill();
    let _ = child.wait();
    let took = outcome?;
    report.record(
        SECTION,
        "toolhost dev word_count.py, no toolchain: save → live p50 ms",
        json!(took),
        format!("{took:.0}"),
    );
    Ok(())
}

/// `PUT /plugins/{id}` with `source` of media type `kind`: the status and
/// the JSON answer.
fn put(
    address: SocketAddr,
    id: &str,
    token: &str,
    kind: &str,
    source: &str,
) -> anyhow::Result<(u16, Value)> {
    exchange(
        address,
        &format!(
            "PUT /plugins/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{source}",
            source.len()
        ),
    )
}

/// `GET {path}` as the admin.
fn get(address: SocketAddr, path: &str) -> anyhow::Result<(u16, Value)> {
    exchange(
        address,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
             Connection: close\r\n\r\n"
        ),
    )
}

/// `DELETE /plugins/{id}` as the admin.
fn delete(address: SocketAddr, id: &str) -> anyhow::Result<(u16, Value)> {
    exchange(
        address,
        &format!(
            "DELETE /plugins/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
             Connection: close\r\n\r\n"
        ),
    )
}

fn post(address: SocketAddr, path: &str, body: &str) -> anyhow::Result<(u16, Value)> {
    exchange(
        address,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

fn exchange(address: SocketAddr, request: &str) -> anyhow::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(900)))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}
