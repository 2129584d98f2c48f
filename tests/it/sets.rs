//! Who sees what: tool sets from the tokens file, enforced on
//! every list and every lookup, through the real server over real sockets.
//!
//! The room: an instructor (admin, no set), ada and bob (publishers whose
//! set is `["instructor/*", "{self}/*"]`, ada's through a `[[group]]`),
//! and carol (a caller whose set is `["instructor/*"]`). Each one's lists
//! over REST, raw MCP, the TypeScript SDK and OpenAPI show exactly their
//! set; a call, read or get outside it answers as a name that does not
//! exist, to the byte; editing the tokens file changes a live session's
//! view, and the session hears `list_changed` then and only then.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::limits::{open_session, put, rpc};
use crate::support::{Server, example, send, wait_until};

const INSTRUCTOR: &str = "instructor-secret-0123456789";
const ADA: &str = "ada-secret-0123456789";
const BOB: &str = "bob-secret-0123456789";
const CAROL: &str = "carol-secret-0123456789";
const DAVE: &str = "dave-secret-0123456789";

/// The room's tokens file, carol seeing `carol_sees`.
fn tokens_text(carol_sees: &str) -> String {
    format!(
        "[[group]]\nname = \"room\"\ntools = [\"instructor/*\", \"{{self}}/*\"]\n\
         [[token]]\nname = \"instructor\"\nsecret = \"{INSTRUCTOR}\"\nrole = \"admin\"\n\
         [[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\ntools = [\"@room\"]\n\
         [[token]]\nname = \"bob\"\nsecret = \"{BOB}\"\nrole = \"publisher\"\n\
         tools = [\"instructor/*\", \"{{self}}/*\"]\n\
         [[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"caller\"\ntools = [{carol_sees}]\n\
         [[token]]\nname = \"dave\"\nsecret = \"{DAVE}\"\nrole = \"caller\"\ntools = [\"ada/*\"]\n"
    )
}

/// Writes the tokens file by rename, as operators are told to.
fn write_tokens(file: &Path, text: &str) {
    let next = file.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, file).unwrap();
}

/// The names of a list of objects (`name`, `uri` or `uriTemplate`).
fn names(list: &Value, key: &str) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item[key].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn tools_of(server: &Server, token: &str) -> Vec<String> {
    let (status, tools) = send(server, "GET", "/tools", Some(token), "", b"");
    assert_eq!(status, 200, "{tools}");
    names(&tools, "name")
}

/// Whether every name is one of `prefixes`' (`instructor__`, …).
fn all_from(names: &[String], prefixes: &[&str]) -> bool {
    names
        .iter()
        .all(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
}

/// A hidden name's answer with the hidden names written as the missing
/// ones (`ada`'s and `bob`'s as `zed`'s): then it is byte for byte the
/// missing name's answer.
fn as_if_missing(answer: &Value) -> String {
    without_clock(answer)
        .to_string()
        .replace("ada__echo", "zed__echo")
        .replace("ada/echo", "zed/echo")
        .replace("test://bob/", "test://zed/")
        .replace("bob__test_simple_prompt", "zed__test_simple_prompt")
        .replace("toplevel/source", "zedtop/source")
}

/// What `/events` sends `token` in its first second when it resumes after
/// event `last` (`Last-Event-ID`), as text.
fn events_resumed(server: &Server, token: &str, last: u64) -> String {
    use std::io::{Read, Write};
    let address = server.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nLast-Event-ID: {last}\r\n\r\n"
    )
    .unwrap();
    let mut text = Vec::new();
    let mut buffer = [0u8; 65536];
    while let Ok(read) = stream.read(&mut buffer) {
        if read == 0 {
            break;
        }
        text.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// An MCP session of `token`'s whose client listens on its GET stream: how
/// many `notifications/tools/list_changed` it has heard so far, counted by
/// a thread of its own from the moment the stream is open.
fn listening_session(server: &Server, token: &str) -> Arc<AtomicUsize> {
    use std::io::{Read, Write};
    let session = open_session(server, token).unwrap();
    let mut stream =
        std::net::TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
         Authorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\n\
         Mcp-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    .unwrap();
    let heard = Arc::new(AtomicUsize::new(0));
    let (opened, open) = std::sync::mpsc::channel();
    let counter = heard.clone();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stream.read(&mut buffer) {
            if read == 0 {
                break;
            }
            text.extend_from_slice(&buffer[..read]);
            let _ = opened.send(String::from_utf8_lossy(&text).into_owned());
            let told = String::from_utf8_lossy(&text)
                .matches("notifications/tools/list_changed")
                .count();
            counter.store(told, Ordering::SeqCst);
        }
    });
    let head = open
        .recv_timeout(Duration::from_secs(10))
        .expect("the GET stream opened");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    heard
}

/// An answer without what differs between any two answers: when it was
/// made and how long it took.
fn without_clock(answer: &Value) -> Value {
    fn strip(value: &mut Value) {
        if let Some(object) = value.as_object_mut() {
            object.remove("meta");
            object.remove("timestamp");
        }
    }
    let mut answer = answer.clone();
    strip(&mut answer);
    if let Some(result) = answer.get_mut("result") {
        strip(result);
    }
    answer
}

/// One JSON-RPC request on a one-shot (sessionless) MCP POST as `token`.
fn mcp(server: &Server, token: &str, method: &str, params: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let (status, _, answer) = rpc(server, token, None, &message);
    assert_eq!(status, 200, "{method}: {answer}");
    answer
}

#[test]
fn each_person_sees_their_set_and_nothing_outside_it_exists() {
    let dir = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    write_tokens(&tokens, &tokens_text("\"instructor/*\""));
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--session-idle-secs",
            "600",
        ],
    );
    for (path, token, plugin) in [
        ("/plugins/toplevel", INSTRUCTOR, "echo"),
        ("/plugins/instructor/echo", INSTRUCTOR, "echo"),
        ("/plugins/instructor/conformance", INSTRUCTOR, "conformance"),
        ("/plugins/ada/echo", ADA, "echo"),
        ("/plugins/bob/echo", BOB, "echo"),
        ("/plugins/bob/conformance", BOB, "conformance"),
    ] {
        let (status, report) = put(&server, path, token, &example(plugin));
        assert_eq!(status, 201, "{path}: {report}");
    }

    // REST: each person's tools are their set.
    let everything = tools_of(&server, INSTRUCTOR);
    // The top-level plugin's tool is `echo`; the rest are namespaced.
    assert!(everything.contains(&"echo".to_string()), "{everything:?}");
    for prefix in ["instructor__", "ada__", "bob__"] {
        assert!(
            everything.iter().any(|n| n.starts_with(prefix)),
            "{everything:?}"
        );
    }
    let ada = tools_of(&server, ADA);
    assert!(ada.contains(&"ada__echo".to_string()), "{ada:?}");
    assert!(all_from(&ada, &["instructor__", "ada__"]), "{ada:?}");
    let bob = tools_of(&server, BOB);
    assert!(all_from(&bob, &["instructor__", "bob__"]), "{bob:?}");
    let carol = tools_of(&server, CAROL);
    assert!(carol.contains(&"instructor__echo".to_string()), "{carol:?}");
    assert!(all_from(&carol, &["instructor__"]), "{carol:?}");
    assert_eq!(
        carol.len(),
        everything
            .iter()
            .filter(|n| n.starts_with("instructor__"))
            .count()
    );

    // Resources and prompts follow their plugin.
    let (_, listed) = send(&server, "GET", "/resources", Some(CAROL), "", b"");
    let uris = names(&listed["resources"], "uri");
    assert!(
        !uris.is_empty() && uris.iter().all(|u| u.contains("//instructor/")),
        "{uris:?}"
    );
    let (_, listed) = send(&server, "GET", "/resources", Some(BOB), "", b"");
    let uris = names(&listed["resources"], "uri");
    assert!(uris.iter().any(|u| u.contains("//bob/")), "{uris:?}");
    let (_, prompts) = send(&server, "GET", "/prompts", Some(CAROL), "", b"");
    let prompt_names = names(&prompts["prompts"], "name");
    assert!(
        !prompt_names.is_empty() && all_from(&prompt_names, &["instructor__"]),
        "{prompt_names:?}"
    );

    // OpenAPI: only the caller's tools have paths.
    let (_, document) = send(&server, "GET", "/openapi.json", Some(CAROL), "", b"");
    let paths: Vec<&String> = document["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths.iter().any(|p| *p == "/tools/instructor__echo"),
        "{paths:?}"
    );
    assert!(
        paths
            .iter()
            .filter(|p| p.starts_with("/tools/"))
            .all(|p| p.starts_with("/tools/instructor__")),
        "{paths:?}"
    );

    // /plugins: carol sees the instructor's; ada hers too.
    let (_, plugins) = send(&server, "GET", "/plugins", Some(CAROL), "", b"");
    let ids = names(&plugins["plugins"], "id");
    assert_eq!(ids, ["instructor/conformance", "instructor/echo"]);

    // /metrics names every plugin: not for a token with a set.
    assert_eq!(
        send(&server, "GET", "/metrics", Some(CAROL), "", b"").0,
        403
    );
    assert_eq!(
        send(&server, "GET", "/metrics", Some(INSTRUCTOR), "", b"").0,
        200
    );

    // The event feed, resumed from its start, tells carol only of hers.
    let resumed = events_resumed(&server, CAROL, 0);
    assert!(resumed.contains("instructor/echo"), "{resumed}");
    for hidden in ["ada/echo", "bob/echo", "\"toplevel\""] {
        assert!(!resumed.contains(hidden), "{hidden} in {resumed}");
    }

    // MCP offers what a caller's set has: dave's (ada's echo) has no
    // resources or prompts; carol's (the instructor's conformance) has.
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "sets", "version": "1"}});
    let offered = mcp(&server, DAVE, "initialize", initialize.clone());
    let capabilities = &offered["result"]["capabilities"];
    assert!(capabilities.get("resources").is_none(), "{offered}");
    assert!(capabilities.get("prompts").is_none(), "{offered}");
    let offered = mcp(&server, CAROL, "initialize", initialize);
    assert!(
        offered["result"]["capabilities"].get("resources").is_some(),
        "{offered}"
    );
    let (_, plugins) = send(&server, "GET", "/plugins", Some(ADA), "", b"");
    let ids = names(&plugins["plugins"], "id");
    assert_eq!(
        ids,
        ["ada/echo", "instructor/conformance", "instructor/echo"]
    );

    // MCP: tools/list, resources, templates and prompts, private to the
    // caller.
    let listed = mcp(&server, CAROL, "tools/list", json!({}));
    assert_eq!(names(&listed["result"]["tools"], "name"), carol);
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    let listed = mcp(&server, CAROL, "resources/templates/list", json!({}));
    let templates = names(&listed["result"]["resourceTemplates"], "uriTemplate");
    assert!(
        templates.iter().all(|t| t.contains("//instructor/")),
        "{templates:?}"
    );
    let listed = mcp(&server, CAROL, "prompts/list", json!({}));
    assert_eq!(names(&listed["result"]["prompts"], "name"), prompt_names);

    // Outside the set is as absent, byte for byte: REST calls (POST and
    // GET), the plugin's report, resources and prompts; MCP calls, reads,
    // gets and completion.
    let body = br#"{"text":"hi"}"#;
    let rest = |path: &str, method: &str| {
        let (status, answer) = send(&server, method, path, Some(CAROL), "application/json", body);
        (status, answer)
    };
    for (method, hidden, missing) in [
        ("POST", "/tools/ada__echo", "/tools/zed__echo"),
        ("GET", "/tools/ada__echo", "/tools/zed__echo"),
        ("GET", "/plugins/ada/echo", "/plugins/zed/echo"),
        ("GET", "/plugins/toplevel/source", "/plugins/zedtop/source"),
        (
            "GET",
            "/resources/test%3A%2F%2Fbob%2Fstatic-text",
            "/resources/test%3A%2F%2Fzed%2Fstatic-text",
        ),
        (
            "POST",
            "/prompts/bob__test_simple_prompt",
            "/prompts/zed__test_simple_prompt",
        ),
    ] {
        let (hidden_status, hidden_answer) = rest(hidden, method);
        let (missing_status, missing_answer) = rest(missing, method);
        assert_eq!(
            hidden_status, missing_status,
            "{method} {hidden}: {hidden_answer}"
        );
        assert_eq!(hidden_status, 404, "{method} {hidden}: {hidden_answer}");
        assert_eq!(
            as_if_missing(&hidden_answer),
            without_clock(&missing_answer).to_string(),
            "{method} {hidden}"
        );
    }
    for (method, hidden, missing) in [
        (
            "tools/call",
            json!({"name": "ada__echo", "arguments": {"text": "hi"}}),
            json!({"name": "zed__echo", "arguments": {"text": "hi"}}),
        ),
        (
            "resources/read",
            json!({"uri": "test://bob/static-text"}),
            json!({"uri": "test://zed/static-text"}),
        ),
        (
            "prompts/get",
            json!({"name": "bob__test_simple_prompt"}),
            json!({"name": "zed__test_simple_prompt"}),
        ),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://bob/template/{id}/data"},
                   "argument": {"name": "id", "value": "1"}}),
            json!({"ref": {"type": "ref/resource", "uri": "test://zed/template/{id}/data"},
                   "argument": {"name": "id", "value": "1"}}),
        ),
    ] {
        let hidden_answer = mcp(&server, CAROL, method, hidden);
        let missing_answer = mcp(&server, CAROL, method, missing);
        assert_eq!(
            as_if_missing(&hidden_answer),
            missing_answer.to_string(),
            "{method}"
        );
    }
    // What she sees, she calls.
    let (status, answer) = rest("/tools/instructor__echo", "POST");
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn an_edited_tokens_file_changes_a_live_sessions_view_and_it_hears_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    write_tokens(&tokens, &tokens_text("\"instructor/*\""));
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    for (path, token) in [
        ("/plugins/instructor/echo", INSTRUCTOR),
        ("/plugins/ada/echo", ADA),
    ] {
        let (status, report) = put(&server, path, token, &example("echo"));
        assert_eq!(status, 201, "{path}: {report}");
    }

    // carol's TypeScript SDK session lists her set, then waits.
    let mut command = crate::clients::ts_client();
    command
        .args(["sees", &format!("{}/mcp", server.base), CAROL, "ada__echo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut client = command.spawn().unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["first"], json!(["instructor__echo"]), "{first}");

    // Sessions of bob's and of carol's own, listening from now on.
    let bob_heard = listening_session(&server, BOB);
    let carol_heard = listening_session(&server, CAROL);

    // A tool out of her view comes: she hears nothing of it. Bob, whose
    // view it is in, is told: every session hears of the change at that
    // moment, so whatever carol's sessions were told of it is on its way
    // before her set is edited below.
    let (status, report) = put(&server, "/plugins/bob/echo", BOB, &example("echo"));
    assert_eq!(status, 201, "{report}");
    wait_until(
        "bob's session to hear of his tool",
        Duration::from_secs(20),
        || bob_heard.load(Ordering::SeqCst) >= 1,
    );

    // Her set is edited: her session hears it, and lists ada's tool.
    write_tokens(&tokens, &tokens_text("\"instructor/*\", \"ada/*\""));
    let rest: Vec<String> = lines.map(|line| line.unwrap()).collect();
    let status = client.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{rest:?}\n{stderr}");
    let report: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(
        report["after"],
        json!(["ada__echo", "instructor__echo"]),
        "{report}"
    );
    assert_eq!(report["spurious"], 0, "{report}");
    // REST agrees at once.
    assert_eq!(tools_of(&server, CAROL), ["ada__echo", "instructor__echo"]);
    // Carol's other session heard the edit, and nothing before it: its
    // stream says so in order.
    wait_until(
        "carol's session to hear of the edit",
        Duration::from_secs(20),
        || carol_heard.load(Ordering::SeqCst) >= 1,
    );
    assert_eq!(
        carol_heard.load(Ordering::SeqCst),
        1,
        "carol was told of a tool outside her view"
    );
}
