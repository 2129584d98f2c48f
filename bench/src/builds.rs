//! Section 16 of the harness: source built on the server (`--builds
//! python,js`), from `PUT` to the tools live.
//!
//! - A Python `app.py` and a JavaScript `app.js` (each time new source, so
//!   a new component compiled afresh): p50 of the whole publish, and of
//!   the build alone (the answer's `build.seconds`); the rest is the
//!   server loading the component.
//! - Thirty people publishing Python at once (`--max-builds` one per
//!   core): the time until the last one is live, and the instructor's echo
//!   latency meanwhile (calls one after another).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::options::BenchOptions;
use super::probes::{Spawned, percentile};
use super::report::Report;

const SECTION: &str = "builds";
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

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let people = if options.quick { 3 } else { 30 };
    let dir = work.join("builds");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&options.echo, dir.join("echo.wasm"))?;
    let tokens = work.join("builds-tokens.toml");
    let mut text = format!("[[token]]\nname = \"admin\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n");
    for person in 0..people {
        text.push_str(&format!(
            "[[token]]\nname = \"p{person}\"\nsecret = \"{}\"\nrole = \"publisher\"\n",
            secret(person)
        ));
    }
    std::fs::write(&tokens, text)?;
    let server = Spawned::serve(
        &dir,
        &work.join("cache-builds"),
        &[
            "--tokens",
            tokens.to_str().unwrap_or_default(),
            "--builds",
            "python,js",
        ],
    )?;
    let runs = if options.quick { 1 } else { 5 };
    for (language, kind, source) in [
        ("Python", "text/x-python", PYTHON),
        ("JavaScript", "text/javascript", JAVASCRIPT),
    ] {
        let (mut whole, mut built) = (Vec::new(), Vec::new());
        for run in 0..runs {
            // New source each time: a new component, compiled afresh.
            let source = format!("{source}{}{run}\n", comment(kind));
            let started = Instant::now();
            let (status, answer) = put(server.address, "p0/tool", &secret(0), kind, &source)?;
            anyhow::ensure!(
                status == 200 || status == 201,
                "{language} source was answered {status}: {answer}"
            );
            whole.push(started.elapsed().as_secs_f64() * 1e3);
            built.push(answer["build"]["seconds"].as_f64().unwrap_or_default() * 1e3);
        }
        let (whole, built) = (percentile(&whole, 50.0), percentile(&built, 50.0));
        report.record(
            SECTION,
            &format!("{language} source → live p50 ms (build / load)"),
            json!([whole, built, whole - built]),
            format!("{whole:.0} ({built:.0} / {:.0})", whole - built),
        );
    }
    everyone_at_once(server.address, people, report)?;
    drop(server);
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

/// `people` publish Python at once while the instructor calls echo.
fn everyone_at_once(address: SocketAddr, people: usize, report: &mut Report) -> anyhow::Result<()> {
    let started = Instant::now();
    let publishes: Vec<_> = (0..people)
        .map(|person| {
            let source = format!("{PYTHON}\n# person {person}\n");
            std::thread::spawn(move || {
                put(
                    address,
                    &format!("p{person}/word_count"),
                    &secret(person),
                    "text/x-python",
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
    let p99 = percentile(&echo, 99.0);
    report.record(
        SECTION,
        &format!("{people} people publish Python at once: last live s"),
        json!(last_live.as_secs_f64()),
        format!("{:.1}", last_live.as_secs_f64()),
    );
    report.record(
        SECTION,
        &format!(
            "instructor's echo meanwhile: p50 / p99 ms ({} calls)",
            echo.len()
        ),
        json!([percentile(&echo, 50.0), p99]),
        format!("{:.1} / {p99:.1}", percentile(&echo, 50.0)),
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
