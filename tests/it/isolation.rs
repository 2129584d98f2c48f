//! One person never reaches another's: the findings of a review on resources,
//! publishing, tokens, sessions and browsers, through the real binary
//! with the room of `limits.rs` (an admin, ada and bob publishing, carol
//! calling):
//!
//! - resources belong to their plugin: a namespace's URIs live under its
//!   authority, overlap is found by matching, and who goes first never
//!   depends on load order;
//! - a publish whose client hangs up is cleaned up all the same;
//! - non-admins see no server paths and no one else's refusal reasons;
//! - the tokens file rewritten in place locks nobody out;
//! - a revoked token's streams and sessions end, and a session answers
//!   only to who opened it;
//! - a server without tokens runs no tool for another site's page.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::registry::report::{PluginReport, PluginState};

use crate::limits::{ADA, BOB, CAROL, ROOT, open_session, put, room, room_process, room_text, rpc};
use crate::support::{Server, components, drop_in, example, fixture, plugin_dir, plugins_as, send};

const STATIC_TEXT: &str = "This is the content of the static text resource.";

/// The text of the first contents of a resource read over REST as carol.
fn read(server: &Server, uri: &str) -> (u16, String) {
    let (status, answer) = send(
        server,
        "GET",
        &format!("/resources/{uri}"),
        Some(CAROL),
        "",
        b"",
    );
    let text = answer["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (status, text)
}

/// The admin's report on one plugin, once no load job for it runs.
fn report_of(server: &Server, id: &str) -> Option<PluginReport> {
    plugins_as(server, Some(ROOT))
        .plugins
        .into_iter()
        .find(|plugin| plugin.id == id && plugin.compiling.is_none())
}

#[test]
fn resources_belong_to_their_plugin_and_load_order_never_decides() {
    let (dir, config, server) = room(&[&example("conformance")], &[]);

    // Bob's plugin claims the admin's URIs; in his namespace it serves
    // them under his authority, and carol's reads get the admin's answers.
    let (status, report) = put(&server, "/plugins/bob/squat", BOB, &fixture("squatter"));
    assert_eq!(status, 201, "{report}");
    let (_, listed) = send(&server, "GET", "/resources", Some(CAROL), "", b"");
    let text = listed.to_string();
    for uri in [
        "test://bob/static-text",
        "test://bob/template/7/data",
        "test://bob/template/{x}/data",
    ] {
        assert!(text.contains(uri), "{uri} not in {listed}");
    }
    assert_eq!(
        read(&server, "test://static-text"),
        (200, STATIC_TEXT.to_string())
    );
    let (status, data) = read(&server, "test://template/7/data");
    assert_eq!(status, 200);
    assert!(data.contains("templateTest"), "{data}");
    assert_eq!(
        read(&server, "test://bob/template/42/data"),
        (200, "squatted 42".into())
    );
    // Over MCP too, and the contents name the URI as served.
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                         "params": {"uri": "test://bob/static-text"}});
    let (_, _, answer) = rpc(&server, CAROL, None, &message);
    assert_eq!(
        answer["result"]["contents"][0]["uri"], "test://bob/static-text",
        "{answer}"
    );
    assert_eq!(
        answer["result"]["contents"][0]["text"], "squatted",
        "{answer}"
    );

    // Beside the admin's plugin, at the top level, overlap is found by
    // matching: a renamed variable, a URI inside a template.
    drop_in(&fixture("squatter"), dir.path(), "aaa.wasm");
    server.wait_for("aaa judged", |s| report_of(s, "aaa").is_some());
    let aaa = report_of(&server, "aaa").unwrap();
    assert_eq!(aaa.state, PluginState::Rejected, "{aaa:?}");
    let reason = aaa.reason.as_deref().unwrap();
    assert!(reason.contains("\"conformance\""), "{reason}");

    // In one namespace the first published goes first: bob's second
    // plugin claiming his first one's URIs is refused, and leaves nothing.
    let (status, report) = put(&server, "/plugins/bob/zeta", BOB, &example("conformance"));
    assert_eq!(status, 422, "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bob/squat"),
        "{report}"
    );
    assert!(!dir.path().join("bob/zeta.wasm").exists());

    // A restart: `aaa` sorts before `conformance`, and `bob/alpha` (the
    // admin's copy of conformance, dropped last) before `bob/squat`; the
    // plugins that were there first keep what they serve.
    drop_in(
        &example("conformance"),
        &dir.path().join("bob"),
        "alpha.wasm",
    );
    server.wait_for("bob/alpha judged", |s| report_of(s, "bob/alpha").is_some());
    drop(server);
    let tokens = config.path().join("tokens.toml");
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    assert_eq!(
        report_of(&server, "conformance").unwrap().state,
        PluginState::Loaded
    );
    assert_eq!(
        report_of(&server, "aaa").unwrap().state,
        PluginState::Rejected
    );
    assert_eq!(
        report_of(&server, "bob/squat").unwrap().state,
        PluginState::Loaded
    );
    assert_eq!(
        report_of(&server, "bob/alpha").unwrap().state,
        PluginState::Rejected
    );
    assert_eq!(
        read(&server, "test://static-text"),
        (200, STATIC_TEXT.to_string())
    );
    assert_eq!(
        read(&server, "test://bob/static-text"),
        (200, "squatted".into())
    );
}

#[test]
fn a_publish_whose_client_hangs_up_is_cleaned_up() {
    let (dir, _config, server) = room(&[&example("echo")], &["--no-cache"]);
    let first = dir.path().join("first.component");
    std::fs::write(&first, components::plugin_described("first")).unwrap();
    let (status, report) = put(&server, "/plugins/bob/first", BOB, &first);
    assert_eq!(status, 201, "{report}");
    // A component slow to compile whose tools (`ok`, `spin`) bob's first
    // plugin serves already: refused once compiled. Its client hangs up
    // while it compiles, before the outcome.
    let wasm = components::plugin_slow_to_compile(6_000);
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "PUT /plugins/bob/squat2 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {BOB}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        wasm.len()
    )
    .unwrap();
    stream.write_all(&wasm).unwrap();
    server.wait_for("bob/squat2 to compile", |s| {
        plugins_as(s, Some(ROOT))
            .plugins
            .iter()
            .any(|plugin| plugin.id == "bob/squat2" && plugin.compiling.is_some())
    });
    drop(stream);
    server.wait_for_within(
        "the refused publish to be put back",
        Duration::from_secs(120),
        // Compiled, refused and taken away: no report at all (not even
        // `compiling`), no file. The raw JSON: no mention of it anywhere.
        |s| {
            let (_, report) = send(s, "GET", "/plugins", Some(ROOT), "", b"");
            !report.to_string().contains("bob/squat2")
                && !dir.path().join("bob/squat2.wasm").exists()
        },
    );
    let left: Vec<_> = std::fs::read_dir(dir.path().join("bob"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "first.wasm" && name != ".first.wasm.published")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // What served serves on.
    assert_eq!(
        report_of(&server, "bob/first").unwrap().state,
        PluginState::Loaded
    );
}

#[test]
fn non_admins_see_no_server_paths_and_no_one_elses_reasons() {
    let (dir, _config, server) = room(&[&example("users")], &[]);
    let data = dir.path().join("users-data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        "[[dirs]]\nhost = \"users-data\"\nguest = \"/data\"\nmode = \"read-write\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".broken.tmp"), "not a component").unwrap();
    std::fs::rename(
        dir.path().join(".broken.tmp"),
        dir.path().join("broken.wasm"),
    )
    .unwrap();
    server.wait_for("both judged", |s| {
        report_of(s, "broken").is_some()
            && report_of(s, "users")
                .is_some_and(|r| r.granted.unwrap_or_default()["dirs"][0]["host"].is_string())
    });
    let folder = dir.path().to_str().unwrap().to_string();

    // The admin sees everything.
    let (_, all) = send(&server, "GET", "/plugins", Some(ROOT), "", b"");
    assert!(all.to_string().contains(&folder), "{all}");

    // A publisher: no path anywhere, not the admin's reason. The raw JSON
    // each is sent: what a typed read would not see (a field absent, a
    // path in a field it does not know) is the point.
    for path in ["/plugins", "/plugins/users", "/plugins/broken"] {
        let (status, seen) = send(&server, "GET", path, Some(BOB), "", b"");
        assert_eq!(status, 200, "{path}: {seen}");
        assert!(!seen.to_string().contains(&folder), "{path}: {seen}");
    }
    let (_, users) = send(&server, "GET", "/plugins/users", Some(BOB), "", b"");
    assert_eq!(users["granted"]["dirs"][0]["guest"], "/data", "{users}");
    assert!(users["granted"]["dirs"][0].get("host").is_none(), "{users}");
    let (_, broken) = send(&server, "GET", "/plugins/broken", Some(BOB), "", b"");
    assert_eq!(broken["state"], "rejected");
    assert!(
        broken["reason"]
            .as_str()
            .unwrap()
            .contains("only its publisher"),
        "{broken}"
    );
    let events = crate::limits::first_events(&server, BOB, 2);
    assert!(events.contains("event: snapshot"), "{events}");
    assert!(!events.contains(&folder), "{events}");

    // Bob's own refusal names no path either, though its reason is one.
    std::fs::create_dir(dir.path().join("bob")).unwrap();
    std::fs::write(
        dir.path().join("bob/_namespace.toml"),
        "[limits]\nnonsense = 1\n",
    )
    .unwrap();
    let (status, refused) = put(&server, "/plugins/bob/echo", BOB, &example("echo"));
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("_namespace.toml"),
        "{refused}"
    );
    assert!(!refused.to_string().contains(&folder), "{refused}");
}

#[test]
fn rewriting_the_tokens_file_in_place_locks_nobody_out() {
    let (_dir, config, server) = room_process(&[&example("echo")], &[]);
    let tokens = config.path().join("tokens.toml");
    let stop = Arc::new(AtomicBool::new(false));
    let (refused, asked) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let statuses = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let poller = {
        let (base, stop, refused, asked) = (
            server.base.clone(),
            stop.clone(),
            refused.clone(),
            asked.clone(),
        );
        let statuses = statuses.clone();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            while !stop.load(Ordering::Relaxed) {
                let status = agent
                    .get(format!("{base}/tools"))
                    .header("Authorization", format!("Bearer {ROOT}"))
                    .call()
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                asked.fetch_add(1, Ordering::Relaxed);
                if status != 200 {
                    refused.fetch_add(1, Ordering::Relaxed);
                    statuses.lock().unwrap().insert(status);
                }
            }
        })
    };
    // As `cp` and many editors do: truncate, then write. The pauses are
    // the writer under test (an empty file seen for a moment, rewrites
    // coming apart), not waits for the server.
    let text = room_text(true);
    for _ in 0..40 {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&tokens)
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        file.write_all(text.as_bytes()).unwrap();
        drop(file);
        std::thread::sleep(Duration::from_millis(30));
    }
    // Left empty: the people in force stay, while the server reads the
    // empty file (the open after this write's own) and refuses it, and for
    // many requests after.
    let opens = crate::reload::FileOpens::watch(&tokens);
    std::fs::write(&tokens, "").unwrap();
    server.wait_for("the server to read the empty file", |_| opens.count() >= 2);
    let read_at = asked.load(Ordering::Relaxed);
    server.wait_for("requests after it", |_| {
        asked.load(Ordering::Relaxed) >= read_at + 40
    });
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    assert!(asked.load(Ordering::Relaxed) > 40);
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "the admin was locked out: {:?}\n{}",
        statuses.lock().unwrap(),
        server.log()
    );
    assert!(server.log().contains("names nobody"), "{}", server.log());
    // A good version is taken as before.
    std::fs::write(&tokens, room_text(false)).unwrap();
    server.wait_for("carol's token gone", |s| {
        send(s, "GET", "/tools", Some(CAROL), "", b"").0 == 401
    });
}

/// Opens a stream (`GET path`, with `headers`) and returns a receiver that
/// gets what was read when the server ends it (closes the connection, or
/// ends the chunked body).
fn watch_stream(server: &Server, path: &str, headers: &str) -> std::sync::mpsc::Receiver<String> {
    let address = server.base.trim_start_matches("http://").to_string();
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n");
    let (ended, ends) = std::sync::mpsc::channel();
    let (opened, opens) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    seen.extend_from_slice(&buffer[..read]);
                    let _ = opened.send(());
                    if seen.ends_with(b"\r\n0\r\n\r\n") {
                        break;
                    }
                }
            }
        }
        let _ = ended.send(String::from_utf8_lossy(&seen).into_owned());
    });
    opens
        .recv_timeout(Duration::from_secs(10))
        .expect("the stream opened");
    ends
}

#[test]
fn a_revoked_token_ends_its_streams_and_sessions() {
    let (_dir, config, server) = room(&[&example("echo")], &[]);
    let events = watch_stream(
        &server,
        "/events",
        &format!("Authorization: Bearer {CAROL}\r\n"),
    );
    let session = open_session(&server, CAROL).unwrap();
    let listening = watch_stream(
        &server,
        "/mcp",
        &format!(
            "Authorization: Bearer {CAROL}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
             Mcp-Protocol-Version: 2025-11-25\r\n"
        ),
    );
    let tokens = config.path().join("tokens.toml");
    let temp = config.path().join("tokens.new");
    std::fs::write(&temp, room_text(false)).unwrap();
    std::fs::rename(&temp, &tokens).unwrap();
    let opening = events
        .recv_timeout(Duration::from_secs(15))
        .expect("/events ended");
    assert!(opening.starts_with("HTTP/1.1 200"), "{opening}");
    let opening = listening
        .recv_timeout(Duration::from_secs(15))
        .expect("the MCP stream ended");
    assert!(opening.starts_with("HTTP/1.1 200"), "{opening}");
    // The session is gone, for anyone.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, _) = rpc(&server, ROOT, Some(&session), &list);
    assert_eq!(status, 404);
}

#[test]
fn a_session_answers_only_to_who_opened_it() {
    let (_dir, _config, server) = room(&[&example("echo")], &[]);
    let adas = open_session(&server, ADA).unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, answer) = rpc(&server, CAROL, Some(&adas), &list);
    assert_eq!(
        (status, answer["error"]["code"].as_i64()),
        (404, Some(-32001)),
        "{answer}"
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let deleted = agent
        .delete(format!("{}/mcp", server.base))
        .header("Authorization", format!("Bearer {CAROL}"))
        .header("Mcp-Session-Id", &adas)
        .call()
        .unwrap();
    assert_eq!(deleted.status(), 404);
    let listened = agent
        .get(format!("{}/mcp", server.base))
        .header("Authorization", format!("Bearer {CAROL}"))
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &adas)
        .call()
        .unwrap();
    assert_eq!(listened.status(), 404);
    // Ada's session is untouched.
    let (status, _, answer) = rpc(&server, ADA, Some(&adas), &list);
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["tools"][0]["name"], "echo", "{answer}");
}

/// `(status, JSON)` of a request with these raw headers and body.
fn with_headers(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}{path}", server.base);
    let mut response = if method == "GET" {
        let mut request = agent.get(&url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.call().unwrap()
    } else {
        let mut request = agent.post(&url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send(body).unwrap()
    };
    let status = response.status().as_u16();
    let nosniff = response
        .headers()
        .get("x-content-type-options")
        .is_some_and(|v| v == "nosniff");
    assert!(nosniff, "{method} {path}: no nosniff");
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn a_server_without_tokens_runs_no_tool_for_another_sites_page() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = Server::start(dir.path(), &["--cors-origin", "http://localhost:3000"]);
    let echo = r#"{"text":"hi"}"#;
    // What any page may send without asking first: refused.
    for kind in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let (status, answer) = with_headers(
            &server,
            "POST",
            "/tools/echo",
            &[("Content-Type", kind)],
            echo,
        );
        assert_eq!(status, 415, "{kind}: {answer}");
        assert_eq!(
            answer["error"]["code"], "UNSUPPORTED_MEDIA_TYPE",
            "{answer}"
        );
    }
    let (status, _) = with_headers(
        &server,
        "POST",
        "/tools/echo",
        &[("Content-Type", "application/json")],
        echo,
    );
    assert_eq!(status, 200);
    // A read-only tool run by an <img> or a link on another site (or port):
    // refused; by the page itself, a CORS origin, or a client: answered.
    for site in ["cross-site", "same-site"] {
        let (status, answer) = with_headers(
            &server,
            "GET",
            "/tools/add?a=1&b=2",
            &[("Sec-Fetch-Site", site), ("Sec-Fetch-Mode", "no-cors")],
            "",
        );
        assert_eq!(status, 403, "{site}: {answer}");
        let (status, _) = with_headers(
            &server,
            "GET",
            "/tools/add?a=1&b=2",
            &[("Sec-Fetch-Site", site), ("Sec-Fetch-Mode", "navigate")],
            "",
        );
        assert_eq!(status, 403, "{site} navigation");
    }
    for headers in [
        &[("Sec-Fetch-Site", "same-origin")][..],
        &[("Sec-Fetch-Site", "none"), ("Sec-Fetch-Mode", "navigate")][..],
        &[
            ("Sec-Fetch-Site", "same-site"),
            ("Origin", "http://localhost:3000"),
        ][..],
        &[][..],
    ] {
        let (status, answer) = with_headers(&server, "GET", "/tools/add?a=1&b=2", headers, "");
        assert_eq!(status, 200, "{headers:?}: {answer}");
    }
    // A link from elsewhere may open the page.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let page = agent
        .get(format!("{}/", server.base))
        .header("Sec-Fetch-Site", "cross-site")
        .header("Sec-Fetch-Mode", "navigate")
        .call()
        .unwrap();
    assert_eq!(page.status(), 200);

    // With tokens, a body of any type is the token holder's.
    let (_dir, _config, guarded) = room(&[&example("echo")], &[]);
    let (status, _) = with_headers(
        &guarded,
        "POST",
        "/tools/echo",
        &[
            ("Content-Type", "text/plain"),
            ("Authorization", &format!("Bearer {CAROL}")),
        ],
        echo,
    );
    assert_eq!(status, 200);
}

#[test]
fn small_refusals_are_envelopes_too() {
    let (dir, _config, server) = room(&[&example("echo")], &[]);
    // A wrong method on a publishing URL: the envelope, with Allow.
    let (status, answer) = send(
        &server,
        "POST",
        "/plugins/bob/x",
        Some(BOB),
        "application/json",
        b"{}",
    );
    assert_eq!(status, 405, "{answer}");
    assert_eq!(answer["error"]["code"], "METHOD_NOT_ALLOWED", "{answer}");
    // Media types are case-insensitive.
    let (status, answer) = send(
        &server,
        "PUT",
        "/plugins/bob/upper",
        Some(BOB),
        "APPLICATION/WASM",
        &std::fs::read(example("echo")).unwrap(),
    );
    assert_eq!(status, 201, "{answer}");
    // A plugin's data folder is no namespace.
    let (status, answer) = put(&server, "/plugins/users-data/x", ROOT, &example("echo"));
    assert_eq!(status, 400, "{answer}");
    assert!(!dir.path().join("users-data").exists());
}
