//! Publishing over HTTP through the real binary: `PUT`, `GET` and `DELETE`
//! on `/plugins/{namespace}/{name}` and `/plugins/{name}`, with people and
//! roles from a tokens file. Each refusal is checked to write nothing; a
//! refused component keeps the previous version serving, on disk too; a
//! restart serves what was published; concurrent publishes of one name
//! end whole.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{
    Server, example, file_hash, plugin_as, plugin_dir, plugins_as, send, variant_of,
};
use toolhost::registry::report::PluginState;

pub(crate) const ADMIN: &str = "bob-secret-0123456789";
pub(crate) const ADA: &str = "ada-secret-0123456789";
pub(crate) const CAROL: &str = "carol-secret-0123456789";
pub(crate) const DAVE: &str = "dave-secret-0123456789";

pub(crate) fn tokens_file(dir: &Path) -> PathBuf {
    let file = dir.join("tokens.toml");
    std::fs::write(
        &file,
        format!(
            "[[token]]\nname = \"bob\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n\
             [[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n\
             [[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"publisher\"\n\
             [[token]]\nname = \"dave\"\nsecret = \"{DAVE}\"\nrole = \"caller\"\n"
        ),
    )
    .unwrap();
    file
}

/// Calls a tool as the admin; its envelope.
fn call(server: &Server, tool: &str, text: &str) -> Value {
    crate::support::call_as(server, tool, ADMIN, &json!({ "text": text }).to_string()).1
}

/// The tools served, as the admin lists them.
fn tool_names(server: &Server) -> Vec<String> {
    let (_, tools) = send(server, "GET", "/tools", Some(ADMIN), "", b"");
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn put(server: &Server, path: &str, token: Option<&str>, wasm: &Path) -> (u16, Value) {
    send(
        server,
        "PUT",
        path,
        token,
        "application/wasm",
        &std::fs::read(wasm).unwrap(),
    )
}

/// Every file under `dir` with its size: what a refused request must leave
/// as it was.
pub(crate) fn contents(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push((path.clone(), entry.metadata().unwrap().len()));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn publishing_over_http_with_people_and_roles() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--max-plugin-mib",
            "8",
        ],
    );
    let adas = variant_of(&example("echo"), "pub-ada");
    let carols = variant_of(&example("echo"), "pub-carol");

    // Two publishers' same-named plugins both serve, under their names.
    let (status, report) = put(&server, "/plugins/ada/word_count", Some(ADA), &adas);
    assert_eq!(status, 201, "{report}");
    assert_eq!(report["tools"], json!(["ada__echo"]), "{report}");
    assert_eq!(report["publishedBy"], "ada", "{report}");
    assert_eq!(
        report["file"], "word_count.wasm",
        "a publisher sees no server path: {report}"
    );
    let (status, report) = put(&server, "/plugins/carol/word_count", Some(CAROL), &carols);
    assert_eq!(status, 201, "{report}");
    for tool in ["ada__echo", "carol__echo", "echo"] {
        let answer = call(&server, tool, tool);
        assert_eq!(answer["content"][0]["text"], tool, "{answer}");
    }
    assert!(dir.path().join("ada/word_count.wasm").is_file());
    // Replacing answers 200.
    let newer = variant_of(&example("echo"), "pub-ada-2");
    assert_eq!(
        put(&server, "/plugins/ada/word_count", Some(ADA), &newer).0,
        200
    );

    // Every refusal writes nothing.
    let before = contents(dir.path());
    let wasm = std::fs::read(&adas).unwrap();
    let refusals: Vec<(&str, Option<&str>, &str, u16)> = vec![
        ("/plugins/ada/w", None, "application/wasm", 401),
        (
            "/plugins/ada/w",
            Some("nobody-knows-this-token"),
            "application/wasm",
            401,
        ),
        ("/plugins/dave/w", Some(DAVE), "application/wasm", 403),
        ("/plugins/carol/w", Some(ADA), "application/wasm", 403),
        ("/plugins/w", Some(ADA), "application/wasm", 403),
        // Not a component, nor a source this server builds: 415 (was 400
        // before source publishing made the content type a real choice).
        ("/plugins/ada/w", Some(ADA), "application/json", 415),
        ("/plugins/ada/..", Some(ADA), "application/wasm", 400),
        ("/plugins/ada/a.b", Some(ADA), "application/wasm", 400),
        ("/plugins/ada/.hidden", Some(ADA), "application/wasm", 400),
        ("/plugins/ada/x%2Fy", Some(ADA), "application/wasm", 400),
        ("/plugins/ada/x%00y", Some(ADA), "application/wasm", 400),
        ("/plugins/ada/x%0Ay", Some(ADA), "application/wasm", 400),
        (
            "/plugins/ada/x%E2%80%AEy",
            Some(ADA),
            "application/wasm",
            400,
        ),
        (
            "/plugins/ada/w.wasm.tmp",
            Some(ADA),
            "application/wasm",
            400,
        ),
        ("/plugins/a__b/w", Some(ADMIN), "application/wasm", 400),
        (
            "/plugins/..%2F..%2Fetc/w",
            Some(ADMIN),
            "application/wasm",
            400,
        ),
    ];
    let long = format!("/plugins/ada/{}", "a".repeat(65));
    for (path, token, kind, expected) in
        refusals
            .iter()
            .copied()
            .chain([(long.as_str(), Some(ADA), "application/wasm", 400)])
    {
        let (status, body) = send(&server, "PUT", path, token, kind, &wasm);
        assert_eq!(status, expected, "{path}: {body}");
        assert!(body["error"]["code"].is_string(), "{path}: {body}");
    }
    // A refused upload is still read to its end (and thrown away), so a
    // client that writes its whole body before reading, as curl and ureq
    // do, gets the 401 rather than a reset connection: 8 MiB is more than
    // loopback's socket buffers hold.
    let address = server.base.trim_start_matches("http://").to_string();
    for token in ["not-a-token-anyone-has", ADA] {
        let mut stream = TcpStream::connect(&address).unwrap();
        let body = vec![7u8; 8 << 20];
        let head = format!(
            "PUT /plugins/carol/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
            .write_all(&body)
            .expect("the server reads a refused body instead of resetting");
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).unwrap();
        let expected: &[u8] = if token == ADA {
            b"HTTP/1.1 403"
        } else {
            b"HTTP/1.1 401"
        };
        assert_eq!(&answer, expected);
    }
    assert_eq!(
        contents(dir.path()),
        before,
        "a refused request wrote something"
    );

    // A 200 MiB body is refused (413) before it is stored.
    let mut stream = TcpStream::connect(&address).unwrap();
    let head = format!(
        "PUT /plugins/ada/big HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADA}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        200u64 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(&vec![0u8; 1 << 20]);
    let mut answer = [0u8; 12];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");
    drop(stream);
    assert_eq!(
        contents(dir.path()),
        before,
        "a refused request wrote something"
    );

    // A component the loader refuses: 422 with the reason; the previous
    // version serves on, and is what is on disk.
    let serving = file_hash(&dir.path().join("ada/word_count.wasm"));
    let (status, body) = send(
        &server,
        "PUT",
        "/plugins/ada/word_count",
        Some(ADA),
        "application/wasm",
        b"not a component",
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "PLUGIN_REJECTED", "{body}");
    assert!(
        body["error"]["details"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("not a WebAssembly file")),
        "{body}"
    );
    assert_eq!(
        call(&server, "ada__echo", "still")["content"][0]["text"],
        "still"
    );
    server.wait_for("the previous bytes back on disk", |_| {
        file_hash(&dir.path().join("ada/word_count.wasm")) == serving
    });
    // A first publish refused leaves nothing behind.
    let (status, _) = send(
        &server,
        "PUT",
        "/plugins/ada/broken",
        Some(ADA),
        "application/wasm",
        b"nope",
    );
    assert_eq!(status, 422);
    assert!(!dir.path().join("ada/broken.wasm").exists());

    // GET reports; DELETE removes one's own; an admin may publish anywhere.
    let (status, report) = send(
        &server,
        "GET",
        "/plugins/carol/word_count",
        Some(DAVE),
        "",
        b"",
    );
    assert_eq!(
        (status, &report["tools"]),
        (200, &json!(["carol__echo"])),
        "{report}"
    );
    assert_eq!(
        send(
            &server,
            "DELETE",
            "/plugins/carol/word_count",
            Some(ADA),
            "",
            b""
        )
        .0,
        403
    );
    let (status, body) = send(
        &server,
        "DELETE",
        "/plugins/ada/word_count",
        Some(ADA),
        "",
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert!(!tool_names(&server).contains(&"ada__echo".to_string()));
    assert_eq!(
        send(
            &server,
            "DELETE",
            "/plugins/ada/word_count",
            Some(ADA),
            "",
            b""
        )
        .0,
        404
    );
    assert_eq!(
        put(&server, "/plugins/ada/word_count", Some(ADMIN), &adas).0,
        201
    );

    // Concurrent publishes of one name: every answer whole, the last wins.
    let variants: Vec<PathBuf> = (0..4)
        .map(|i| variant_of(&example("echo"), &format!("race-{i}")))
        .collect();
    let base = server.base.clone();
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = variants
            .iter()
            .map(|wasm| {
                let base = base.clone();
                scope.spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .build()
                        .into();
                    agent
                        .put(format!("{base}/plugins/racer/race"))
                        .header("Authorization", &format!("Bearer {ADMIN}"))
                        .header("Content-Type", "application/wasm")
                        .send(&std::fs::read(wasm).unwrap()[..])
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        answers.iter().all(|s| *s == 200 || *s == 201),
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|s| **s == 201).count(),
        1,
        "{answers:?}"
    );
    let on_disk = file_hash(&dir.path().join("racer/race.wasm"));
    assert!(variants.iter().any(|v| file_hash(v) == on_disk));
    let race = plugin_as(&server, "racer/race", Some(ADMIN)).unwrap();
    assert_eq!(race.content_hash, Some(on_disk), "{race:?}");

    // A restart serves what was published, and who published it.
    drop(server);
    let again = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let report = plugin_as(&again, "carol/word_count", Some(ADMIN)).unwrap();
    assert_eq!(report.tools, ["carol__echo"], "{report:?}");
    assert_eq!(report.published_by.as_deref(), Some("carol"), "{report:?}");
}

/// `toolhost push` and `toolhost dev --server`: an attendee publishes from
/// their own folder, into their namespace, with nothing of the server's
/// filesystem; clear errors for a wrong token, an unreachable server and a
/// refused component; `push --delete` removes one's own plugin.
#[test]
fn push_and_dev_publish_from_the_attendees_own_folder() {
    use std::process::Command;

    use crate::support::{repo_root, toolhost_bin};

    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    // The folder named relatively, as `make serve` names it: a namespace
    // folder made by the first publish is followed all the same.
    let server = Server::start_relative(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let push = |args: &[&str], token: &str| {
        let output = Command::new(toolhost_bin())
            .arg("push")
            .args(args)
            .env("TOOLHOST_SERVER", &server.base)
            .env("TOOLHOST_TOKEN", token)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let wasm = variant_of(&example("echo"), "pushed");
    let (code, out, err) = push(&[wasm.to_str().unwrap(), "--name", "word_count"], ADA);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("live: ada__echo (ada/word_count)"), "{out}");
    assert!(
        out.contains("Authorization: Bearer $TOOLHOST_TOKEN"),
        "{out}"
    );
    assert!(out.contains(r#"-d '{"text":"..."}'"#), "{out}");
    assert_eq!(
        call(&server, "ada__echo", "pushed")["content"][0]["text"],
        "pushed"
    );

    let (code, _, err) = push(&[wasm.to_str().unwrap()], "not-the-right-token-at-all");
    assert_eq!(code, Some(2));
    assert!(err.contains("does not know this token"), "{err}");
    let (code, _, err) = push(&[wasm.to_str().unwrap()], "");
    assert_eq!(code, Some(2));
    assert!(err.contains("needs a token"), "{err}");
    let (code, _, err) = push(&[wasm.to_str().unwrap()], DAVE);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("dave's token may list and call tools, not publish"),
        "{err}"
    );
    let garbage = config.path().join("garbage.wasm");
    std::fs::write(&garbage, b"not a component").unwrap();
    let (code, out, _) = push(&[garbage.to_str().unwrap(), "--name", "word_count"], ADA);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("refused") && out.contains("not a WebAssembly file"),
        "{out}"
    );
    assert_eq!(
        call(&server, "ada__echo", "still")["content"][0]["text"],
        "still"
    );
    let unreachable = Command::new(toolhost_bin())
        .args([
            "push",
            wasm.to_str().unwrap(),
            "--server",
            "http://127.0.0.1:9",
            "--token",
            ADA,
        ])
        .output()
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cannot reach the server"));

    let (code, out, err) = push(&["--delete", "word_count"], ADA);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("removed ada/word_count"), "{out}");
    assert!(!tool_names(&server).contains(&"ada__echo".to_string()));

    // dev --server: the edit → build → publish loop, remote.
    let made = Command::new("make")
        .args(["-s", "toolchains"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(made.status.success(), "make toolchains: {made:?}");
    let work = tempfile::tempdir().unwrap();
    let created = Command::new(toolhost_bin())
        .args(["new", "greet_py", "--lang", "python", "--path"])
        .arg(work.path())
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let dev = crate::dev::Dev::start(
        &work.path().join("greet_py"),
        &["--server", &server.base, "--token", CAROL],
    );
    dev.wait_for("live in", 1, std::time::Duration::from_secs(180));
    let printed = dev.output();
    drop(dev);
    assert!(printed.contains("carol/greet_py"), "{printed}");
    assert!(printed.contains("carol__greet_py"), "{printed}");
    let body = json!({ "name": "Ada" }).to_string();
    let (status, greeting) = send(
        &server,
        "POST",
        "/tools/carol__greet_py",
        Some(CAROL),
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{greeting}");
    assert!(
        !dir.path().join("greet_py.wasm").exists(),
        "dev --server writes no folder"
    );
}

/// An uploaded plugin never brings a policy: it has no grants until an
/// admin writes its namespace's `_namespace.toml` (or one beside it), and
/// picks that up when it changes.
#[test]
fn a_published_plugin_gets_only_what_its_namespace_policy_grants() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let probe = crate::support::fixture("misbehave");
    let (status, body) = put(&server, "/plugins/ada/probe", Some(ADA), &probe);
    assert_eq!(status, 201, "{body}");
    let read_env = |server: &Server| {
        send(
            server,
            "POST",
            "/tools/ada__read_env",
            Some(ADA),
            "application/json",
            b"{}",
        )
        .1["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(read_env(&server), "0 variables: ");
    // The policy's name is not a plugin name anyone can publish under.
    let (status, _) = put(&server, "/plugins/ada/_namespace", Some(ADA), &probe);
    assert_eq!(status, 400);

    std::fs::write(
        dir.path().join("ada/_namespace.toml"),
        "[env]\nGREETING = \"granted-by-the-admin\"\n",
    )
    .unwrap();
    server.wait_for("the namespace policy to apply", |s| {
        read_env(s).contains("GREETING=granted-by-the-admin")
    });
    let plugins = plugins_as(&server, Some(ADMIN));
    let ids: Vec<&str> = plugins
        .plugins
        .iter()
        .map(|plugin| plugin.id.as_str())
        .collect();
    assert_eq!(ids, ["ada/probe"], "the policy is not a plugin");
    // A broken namespace policy rejects the new version, naming that file;
    // the version that served serves on.
    std::fs::write(dir.path().join("ada/_namespace.toml"), "[env\n").unwrap();
    let report = |s: &Server| plugin_as(s, "ada/probe", Some(ADMIN));
    server.wait_for("the rejection", |s| {
        report(s).is_some_and(|report| report.state == PluginState::Rejected)
    });
    let report = report(&server).unwrap();
    assert!(
        report
            .reason
            .as_deref()
            .unwrap()
            .contains("_namespace.toml"),
        "{report:?}"
    );
    assert!(read_env(&server).contains("GREETING=granted-by-the-admin"));
}

/// A publish that arrives while the previous one of the same plugin is
/// still compiling waits its turn: each answer is the outcome of its own
/// bytes, in order, and the later one is what serves.
#[test]
fn a_publish_while_the_previous_one_compiles_waits_its_turn() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--no-cache"],
    );
    let slow = crate::support::components::plugin_slow_to_compile(40_000);
    let slow_file = config.path().join("slow.wasm");
    std::fs::write(&slow_file, &slow).unwrap();
    let slow_hash = file_hash(&slow_file);
    let base = server.base.clone();
    let first = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .put(format!("{base}/plugins/ada/w"))
            .header("Authorization", &format!("Bearer {ADA}"))
            .header("Content-Type", "application/wasm")
            .send(&slow[..])
            .unwrap();
        let body: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        (response.status().as_u16(), body, std::time::Instant::now())
    });
    // Inside the slow component's compile: `/plugins` shows its load job.
    server.wait_for("the slow component to compile", |s| {
        crate::support::plugins_as(s, Some(ADA))
            .plugin("ada/w")
            .is_some_and(|p| p.compiling.is_some())
    });
    let newer = variant_of(&example("echo"), "after-the-slow-one");
    let (status, report) = put(&server, "/plugins/ada/w", Some(ADA), &newer);
    let second_answered = std::time::Instant::now();
    let (first_status, first_report, first_answered) = first.join().unwrap();
    assert_eq!(first_status, 201, "{first_report}");
    assert_eq!(first_report["contentHash"], slow_hash, "{first_report}");
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["contentHash"], file_hash(&newer), "{report}");
    assert!(first_answered <= second_answered, "answered out of order");
    let (_, serving) = send(&server, "GET", "/plugins/ada/w", Some(ADA), "", b"");
    assert_eq!(serving["contentHash"], file_hash(&newer), "{serving}");
}
