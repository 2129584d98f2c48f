//! The one-shot commands and the CGI adapter, run as real processes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::{example, fixture, plugin_dir, test_cache_dir, toolhost_bin};
use serde_json::{Value, json};

fn toolhost(args: &[&str], dir: &std::path::Path) -> Command {
    let mut command = Command::new(toolhost_bin());
    command
        .args(args)
        .env("TOOLHOST_PLUGINS", dir)
        .env("TOOLHOST_CACHE_DIR", test_cache_dir());
    command
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn call_prints_the_envelope_and_exits_by_outcome() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let run = |args: &[&str]| toolhost(args, dir.path()).output().unwrap();

    let ok = run(&["call", "add", r#"{"a":1,"b":2}"#]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(
        stdout_json(&ok)["structuredContent"],
        json!({"result": 3.0})
    );

    let tool_error = run(&["call", "divide", r#"{"a":1,"b":0}"#]);
    assert_eq!(tool_error.status.code(), Some(1));
    assert_eq!(
        stdout_json(&tool_error)["error"]["code"],
        "DIVISION_BY_ZERO"
    );

    let unknown = run(&["call", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(stdout_json(&unknown)["error"]["code"], "TOOL_NOT_FOUND");

    let bad_json = run(&["call", "echo", "{"]);
    assert_eq!(bad_json.status.code(), Some(2));
    assert_eq!(stdout_json(&bad_json)["error"]["code"], "INVALID_JSON");

    let usage = run(&["call"]);
    assert_eq!(usage.status.code(), Some(2));

    let mut piped = toolhost(&["call", "echo", "-"], dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"text":"from stdin"}"#)
        .unwrap();
    let piped = piped.wait_with_output().unwrap();
    assert_eq!(stdout_json(&piped)["content"][0]["text"], "from stdin");
}

#[test]
fn check_says_what_a_file_provides_or_why_not() {
    let dir = plugin_dir(&[]);
    let good = toolhost(&["check", example("math").to_str().unwrap()], dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&good.stdout);
    assert_eq!(good.status.code(), Some(0), "{text}");
    assert!(
        text.contains("ok, 3 tool(s)") && text.contains("divide"),
        "{text}"
    );

    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let bad = toolhost(&["check", core.to_str().unwrap()], dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(
        text.contains("rejected: a core WebAssembly module, not a component"),
        "{text}"
    );

    let dupes = toolhost(&["check", fixture("dupes").to_str().unwrap()], dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&dupes.stdout).contains("listed twice"));
}

/// The examples' schemas are derived by the SDK: the host accepts every
/// one and finds nothing a major LLM API refuses. A schema that keeps
/// `$ref` on purpose (the conformance suite's 2020-12 tool) is warned
/// about, with the tool and the path, and still loads.
#[test]
fn check_warns_about_schemas_models_refuse() {
    let dir = plugin_dir(&[]);
    for plugin in ["echo", "math", "users", "weather"] {
        let output = toolhost(&["check", example(plugin).to_str().unwrap()], dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{text}");
        assert!(!text.contains("warning"), "{plugin}: {text}");
    }
    let output = toolhost(
        &["check", example("conformance").to_str().unwrap()],
        dir.path(),
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(!warnings.is_empty(), "{text}");
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("json_schema_2020_12_tool")),
        "{text}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("/properties/address") && w.contains("$ref")),
        "{text}"
    );
}

#[test]
fn list_shows_plugins_states_and_tools() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    std::fs::write(dir.path().join("broken.wasm"), b"nope").unwrap();
    let output = toolhost(&["list"], dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("math") && text.contains("add, divide, stats"),
        "{text}"
    );
    assert!(
        text.contains("broken") && text.contains("rejected"),
        "{text}"
    );
    // The rejection's reason is printed under it (a rejected update
    // is not silent).
    assert!(text.contains("reason: "), "{text}");

    let json = toolhost(&["list", "--json"], dir.path()).output().unwrap();
    let report = stdout_json(&json);
    assert_eq!(report["plugins"].as_array().unwrap().len(), 3);
}

/// Runs `toolhost cgi` as a web server would, and splits its output.
fn cgi(dir: &std::path::Path, env: &[(&str, &str)], body: &[u8]) -> (String, Value) {
    let mut command = toolhost(&["cgi"], dir);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let (headers, body) = text
        .split_once("\r\n\r\n")
        .expect("headers, blank line, body");
    (headers.to_string(), serde_json::from_str(body).unwrap())
}

#[test]
fn cgi_round_trip_uses_the_same_routes_and_envelopes() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let body = br#"{"a":6,"b":3}"#;
    let length = body.len().to_string();
    let post = |path: &str, body: &[u8], length: &str| {
        cgi(
            dir.path(),
            &[
                ("REQUEST_METHOD", "POST"),
                ("PATH_INFO", path),
                ("CONTENT_LENGTH", length),
                ("CONTENT_TYPE", "application/json"),
            ],
            body,
        )
    };

    let (headers, envelope) = post("/tools/divide", body, &length);
    assert!(headers.starts_with("Status: 200 OK\r\n"), "{headers}");
    assert!(
        headers.contains("Content-Type: application/json"),
        "{headers}"
    );
    assert_eq!(envelope["structuredContent"]["result"], 2.0);

    let zero = br#"{"a":6,"b":0}"#;
    let (headers, envelope) = post("/tools/divide", zero, &zero.len().to_string());
    assert!(headers.starts_with("Status: 422"), "{headers}");
    assert_eq!(envelope["error"]["code"], "DIVISION_BY_ZERO");

    let (headers, envelope) = post("/tools/missing", b"{}", "2");
    assert!(headers.starts_with("Status: 404"), "{headers}");
    assert_eq!(envelope["error"]["code"], "TOOL_NOT_FOUND");

    let (headers, manifest) = cgi(
        dir.path(),
        &[("REQUEST_METHOD", "GET"), ("PATH_INFO", "/tools")],
        b"",
    );
    assert!(headers.starts_with("Status: 200"), "{headers}");
    assert_eq!(manifest.as_array().unwrap().len(), 4);
}

/// The compile cache is an optimisation: a cache folder that cannot be
/// created means compiling afresh with one warning, and a host that cannot
/// work at all still answers with a status and a JSON envelope.
#[test]
fn cgi_always_answers_with_a_status_and_json() {
    let dir = plugin_dir(&[&example("echo")]);
    let request = [
        ("REQUEST_METHOD", "POST"),
        ("PATH_INFO", "/tools/echo"),
        ("CONTENT_LENGTH", "15"),
        ("TOOLHOST_CACHE_DIR", "/proc/no-cache-here"),
    ];
    let (headers, envelope) = cgi(dir.path(), &request, br#"{"text":"hey"}"#);
    assert!(headers.starts_with("Status: 200"), "{headers}");
    assert_eq!(envelope["content"][0]["text"], "hey");

    let missing = dir.path().join("missing");
    let plugins = ("TOOLHOST_PLUGINS", missing.to_str().unwrap());
    let (headers, envelope) = cgi(dir.path(), &[request[0], request[1], plugins], b"");
    assert!(headers.starts_with("Status: 500"), "{headers}");
    assert_eq!(envelope["error"]["code"], "HOST_ERROR");
    assert_eq!(envelope["isError"], true);

    let failed = toolhost(&["call", "echo", r#"{"text":"x"}"#], &missing)
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(2));
    assert_eq!(stdout_json(&failed)["error"]["code"], "HOST_ERROR");
}

/// Under a real CGI server: lighttpd (Debian's package) running the script
/// as `nobody`, whose home does not exist, so no cache folder can be made.
#[test]
fn cgi_answers_under_lighttpd_as_another_user() {
    let lighttpd = crate::support::lighttpd();
    let root = tempfile::tempdir().unwrap();
    let site = root.path().join("site");
    let plugins = root.path().join("plugins");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(example("echo"), plugins.join("echo.wasm")).unwrap();
    let binary = root.path().join("toolhost");
    std::fs::copy(toolhost_bin(), &binary).unwrap();
    let script = site.join("toolhost.cgi");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} cgi --plugins {}\n",
            binary.display(),
            plugins.display()
        ),
    )
    .unwrap();
    crate::support::make_world_readable(root.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = root.path().join("lighttpd.conf");
    std::fs::write(
        &config,
        format!(
            "server.modules = (\"mod_cgi\")\n\
             server.document-root = \"{}\"\n\
             server.bind = \"127.0.0.1\"\n\
             server.port = {port}\n\
             server.username = \"nobody\"\n\
             server.groupname = \"nogroup\"\n\
             server.errorlog = \"{}\"\n\
             cgi.assign = (\".cgi\" => \"\")\n",
            site.display(),
            root.path().join("error.log").display()
        ),
    )
    .unwrap();
    // lighttpd opens its error log after it has become `nobody`.
    let error_log = root.path().join("error.log");
    std::fs::write(&error_log, "").unwrap();
    std::fs::set_permissions(
        &error_log,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let mut server = Command::new(lighttpd)
        .args(["-D", "-f"])
        .arg(&config)
        .spawn()
        .expect("starting lighttpd");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("http://127.0.0.1:{port}/toolhost.cgi/tools/echo");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut response = loop {
        match agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(r#"{"text":"via lighttpd"}"#)
        {
            Ok(response) => break response,
            Err(_) if std::time::Instant::now() < deadline => {
                if let Ok(Some(status)) = server.try_wait() {
                    let log = std::fs::read_to_string(&error_log).unwrap_or_default();
                    panic!("lighttpd exited ({status}):\n{log}");
                }
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            Err(error) => panic!("lighttpd does not answer: {error}"),
        }
    };
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let log = std::fs::read_to_string(root.path().join("error.log")).unwrap_or_default();
    assert_eq!(status, 200, "{body}\nlighttpd log:\n{log}");
    let envelope: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(envelope["content"][0]["text"], "via lighttpd");
}
