//! toolhost driven by the clients people embed, installed pinned by the
//! tests themselves (`tests/support`): the official TypeScript SDK client
//! 1.32.2 over Streamable HTTP and stdio, the Python SDK 2.3.0 `mcp.Client`
//! in its default mode (2026-07-28 when offered) and in legacy mode over
//! both transports, and the MCP Inspector 2.12.0 CLI over HTTP. Each runs
//! the same steps: list, a successful call, bad arguments (isError), an
//! unknown tool (-32602), a plugin dropped in and the list change seen, a
//! structured call and a business error. The scripts are in
//! `tests/clients/`.

use std::process::Command;

use crate::support::{Server, example, plugin_dir, repo_root, test_cache_dir};
use serde_json::{Value, json};

/// Runs a client script; returns its last stdout line as JSON.
pub(crate) fn run(mut command: Command, what: &str) -> Value {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{what}: {stdout}");
    serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap()
}

/// The TypeScript client script, placed beside the installed npm packages
/// so that Node resolves the SDK from it.
pub(crate) fn ts_client() -> Command {
    let modules = crate::support::node_modules();
    let script = modules.parent().unwrap().join("ts_client.mjs");
    std::fs::copy(repo_root().join("tests/clients/ts_client.mjs"), &script).unwrap();
    let mut command = Command::new(crate::support::node22());
    command.arg(script);
    command
}

fn math() -> String {
    example("math").to_str().unwrap().to_string()
}

#[test]
fn typescript_sdk_client_over_streamable_http() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::process(dir.path(), &[]);
    let mut command = ts_client();
    command.args(["http", &format!("{}/mcp", server.base)]);
    command.arg(dir.path()).arg(math());
    let report = run(command, "TypeScript SDK over HTTP");
    assert_eq!(report["transport"], "http");
    // The client ended its session with DELETE: nothing is left open.
    assert!(server.log().matches("Session termination failed").count() == 0);
}

#[test]
fn typescript_sdk_client_over_stdio() {
    let dir = plugin_dir(&[&example("echo")]);
    let mut command = ts_client();
    command.args(["stdio", crate::support::toolhost_bin()]);
    command.arg(dir.path()).arg(test_cache_dir()).arg(math());
    run(command, "TypeScript SDK over stdio");
}

/// A defect detector, not a speed goal (those are `make bench` rows):
/// without TCP_NODELAY on accepted sockets, each answer on an HTTP session
/// waited for the client's delayed ACK, and the median call took 41 ms
/// (one-shot calls about 1 ms). A median past this bound means that stall
/// is back.
const NAGLE_STALL: f64 = 20.0;

#[test]
fn calls_on_an_http_session_do_not_wait_for_delayed_acks() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    let mut command = ts_client();
    command.args(["latency", &format!("{}/mcp", server.base), "40"]);
    let report = run(command, "TypeScript SDK latency");
    let session = report["sessionP50Ms"].as_f64().unwrap();
    assert!(
        session < NAGLE_STALL,
        "tools/call on a session took {session} ms (median): {report}"
    );
}

fn python_client(mode: &str, transport: &str, dir: &std::path::Path, base: Option<&str>) -> Value {
    let mut command = Command::new(crate::support::python_sdk2_venv().join("python"));
    command
        .arg(repo_root().join("tests/clients/python_client.py"))
        .args([mode, transport]);
    match base {
        Some(base) => command.arg(format!("{base}/mcp")).arg(dir),
        None => command
            .arg(crate::support::toolhost_bin())
            .arg(dir)
            .arg(test_cache_dir()),
    };
    command.arg(math());
    run(command, &format!("Python SDK 2.3 {mode} over {transport}"))
}

#[test]
fn python_sdk_client_in_default_and_legacy_mode_over_http() {
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let dir = plugin_dir(&[&example("echo")]);
        let server = Server::in_process(dir.path());
        let report = python_client(mode, "http", dir.path(), Some(&server.base));
        assert_eq!(report["protocol_version"], version, "{report}");
    }
}

#[test]
fn python_sdk_client_in_default_and_legacy_mode_over_stdio() {
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let dir = plugin_dir(&[&example("echo")]);
        let report = python_client(mode, "stdio", dir.path(), None);
        assert_eq!(report["protocol_version"], version, "{report}");
    }
}

fn inspector(url: &str, home: &std::path::Path, args: &[&str]) -> Value {
    let mut command = Command::new(crate::support::node22());
    command
        .arg(
            crate::support::node_modules()
                .join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        )
        .args(["--cli", url])
        .args(args)
        // The Inspector keeps a catalog in the home folder.
        .env("HOME", home);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(
        output.status.code(),
        Some(0),
        "inspector {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn inspector_cli_lists_and_calls_over_http() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = Server::in_process(dir.path());
    let url = format!("{}/mcp", server.base);
    let home = tempfile::tempdir().unwrap();
    let listed = inspector(&url, home.path(), &["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"add"),
        "{names:?}"
    );
    let added = inspector(
        &url,
        home.path(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "add",
            "--tool-arg",
            "a=2",
            "b=3",
        ],
    );
    assert_eq!(
        added["structuredContent"]["result"].as_f64(),
        Some(5.0),
        "{added}"
    );
    assert_eq!(added["isError"], false);
}

/// A rejected update reaches people who are watching: the MCP session
/// that enabled logging gets a warning with the plugin and the reason,
/// `/health` says `degraded` with the count, and the old version serves.
#[test]
fn a_rejected_update_is_told_to_watchers() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    let mut command = ts_client();
    command.args(["rejected", &format!("{}/mcp", server.base)]);
    command.arg(dir.path());
    let report = run(command, "TypeScript SDK, rejected update");
    assert_eq!(report["plugin"], "echo", "{report}");
    assert!(
        report["reason"].as_str().unwrap_or("").contains("not a"),
        "{report}"
    );
    let health = server.get("/health");
    assert_eq!(health.json["status"], "degraded", "{}", health.json);
    assert_eq!(health.json["rejected"], 1);
    let echo = server.call("echo", json!({"text": "old version"}));
    assert_eq!(echo.json["content"][0]["text"], "old version");
    // Fixed again: healthy.
    std::fs::copy(example("echo"), dir.path().join("echo.wasm")).unwrap();
    server.wait_for("health to recover", |s| {
        s.get("/health").json["status"] == "ok"
    });
}

/// README's Inspector command works, as written, against a server with
/// tokens: the pinned Inspector with the header, its token from
/// TOOLHOST_TOKEN (as an attendee has it exported).
#[test]
fn readme_inspector_command_works_against_a_server_with_tokens() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|line| {
            line.starts_with("npx @modelcontextprotocol/inspector@") && line.contains("--header")
        })
        .expect("README gives the Inspector's command with a header");
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    // As a shell runs it: $TOOLHOST_TOKEN expanded, the README's server
    // replaced by this one, the quotes taken off.
    let command = line
        .replace("$TOOLHOST_TOKEN", crate::publish::ADA)
        .replace("http://127.0.0.1:8000", &server.base);
    let mut words = Vec::new();
    let mut rest = command.as_str();
    while let Some(start) = rest.find(|c: char| c != ' ') {
        rest = &rest[start..];
        let (word, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap();
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        words.push(word.to_string());
        rest = after;
    }
    assert_eq!(words[0], "npx");
    assert_eq!(
        words[1], "@modelcontextprotocol/inspector@2.12.0",
        "README pins the Inspector the tests run"
    );
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(crate::support::node22())
        .arg(
            crate::support::node_modules()
                .join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        )
        .args(&words[2..])
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("\"echo\""),
        "{line}\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A plugin's requests for input (elicitation, sampling, roots; from a
/// tool and from a prompt) reach the Python SDK 2.3 client whichever
/// revision it speaks: as input-required results, answered by calling
/// again, on 2026-07-28, and as server-to-client requests on a 2025-11-25
/// session. The plugin is the same; so is what the client's callbacks see.
#[test]
fn a_plugins_requests_for_input_reach_the_python_sdk_in_both_revisions() {
    let dir = plugin_dir(&[&example("conformance")]);
    let server = Server::in_process(dir.path());
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let mut command = Command::new(crate::support::python_sdk2_venv().join("python"));
        command
            .arg(repo_root().join("tests/clients/python_input.py"))
            .arg(mode)
            .arg(format!("{}/mcp", server.base));
        let report = run(command, &format!("Python SDK 2.3 input, {mode}"));
        assert_eq!(report["protocol_version"], version, "{report}");
        assert_eq!(
            report["asked"],
            serde_json::json!({ "elicitation": 3, "sampling": 1, "roots": 1 }),
            "{report}"
        );
    }
}
