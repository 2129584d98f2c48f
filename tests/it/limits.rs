//! What one publisher or caller may take of a shared server, bounded by
//! construction (a review's high and medium findings), through the real
//! binary with a tokens file of an admin, two publishers (ada, bob), a
//! caller (carol) and a scraper:
//!
//! - error codes a plugin makes up are never kept: not in memory, not as
//!   metric labels, not in `/events`, and a plugin's series go with it;
//! - resource URIs have a length limit, and subscriptions a share per
//!   person over all their sessions;
//! - a body is on a clock with a token too;
//! - uploads stream to disk with their size and share checked as they
//!   come, and one person's uploads at once are capped;
//! - one person's MCP sessions are capped.
//!
//! The hostile plugin is `tests/fixtures/squatter`, built with the SDK.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, example, fixture, plugin_dir, send};

pub(crate) const ROOT: &str = "root-secret-0123456789";
pub(crate) const ADA: &str = "ada-secret-0123456789";
pub(crate) const BOB: &str = "bob-secret-0123456789";
pub(crate) const CAROL: &str = "carol-secret-0123456789";
pub(crate) const SCRAPER: &str = "scraper-secret-0123456789";

/// The room: an admin, two publishers, a caller and a scraper.
pub(crate) fn room_tokens(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("tokens.toml");
    std::fs::write(&file, room_text(true)).unwrap();
    file
}

/// The tokens file's text, with carol or without.
pub(crate) fn room_text(with_carol: bool) -> String {
    let mut text = format!(
        "[[token]]\nname = \"root\"\nsecret = \"{ROOT}\"\nrole = \"admin\"\n\
         [[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n\
         [[token]]\nname = \"bob\"\nsecret = \"{BOB}\"\nrole = \"publisher\"\n\
         [[token]]\nname = \"scraper\"\nsecret = \"{SCRAPER}\"\nrole = \"metrics\"\n"
    );
    if with_carol {
        text.push_str(&format!(
            "[[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"caller\"\n"
        ));
    }
    text
}

/// A server over `plugins` with the room's tokens and `extra` flags; the
/// tokens file lives in its own folder, returned too.
pub(crate) fn room(
    plugins: &[&Path],
    extra: &[&str],
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    room_with(plugins, extra, Server::start)
}

/// [`room`] on the real binary, for tests that read the server's log.
pub(crate) fn room_process(
    plugins: &[&Path],
    extra: &[&str],
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    room_with(plugins, extra, Server::process)
}

fn room_with(
    plugins: &[&Path],
    extra: &[&str],
    start: fn(&Path, &[&str]) -> Server,
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    let dir = plugin_dir(plugins);
    let config = tempfile::tempdir().unwrap();
    let tokens = room_tokens(config.path());
    let mut args = vec!["--tokens", tokens.to_str().unwrap()];
    args.extend_from_slice(extra);
    let server = start(dir.path(), &args);
    (dir, config, server)
}

pub(crate) fn put(server: &Server, path: &str, token: &str, wasm: &Path) -> (u16, Value) {
    send(
        server,
        "PUT",
        path,
        Some(token),
        "application/wasm",
        &std::fs::read(wasm).unwrap(),
    )
}

fn call(server: &Server, token: &str, tool: &str, arguments: &Value) -> (u16, Value) {
    crate::support::call_as(server, tool, token, &arguments.to_string())
}

/// One JSON-RPC message to `/mcp` as `token`, on `session` if given: the
/// status, the session id the answer names, and the message it carries
/// (from JSON or from the first SSE `data:` line).
pub(crate) fn rpc(
    server: &Server,
    token: &str,
    session: Option<&str>,
    message: &Value,
) -> (u16, Option<String>, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent
        .post(format!("{}/mcp", server.base))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Protocol-Version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    let mut response = request.send(message.to_string()).unwrap();
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data: ").filter(|data| !data.is_empty()))
        .map_or_else(
            || serde_json::from_str(&text).unwrap_or(Value::Null),
            |data| serde_json::from_str(data).unwrap_or(Value::Null),
        );
    (status, id, json)
}

/// Opens an MCP session as `token`: its id, or the refusal.
pub(crate) fn open_session(server: &Server, token: &str) -> Result<String, (u16, Value)> {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "limits", "version": "1"}}});
    let (status, id, answer) = rpc(server, token, None, &initialize);
    let Some(id) = id.filter(|_| status == 200) else {
        return Err((status, answer));
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(rpc(server, token, Some(&id), &initialized).0, 202);
    Ok(id)
}

fn end_session(server: &Server, token: &str, session: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    agent
        .delete(format!("{}/mcp", server.base))
        .header("Authorization", format!("Bearer {token}"))
        .header("Mcp-Session-Id", session)
        .call()
        .unwrap()
        .status()
        .as_u16()
}

/// The first `events` SSE events `/events` sends `token`, as text.
pub(crate) fn first_events(server: &Server, token: &str, events: usize) -> String {
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut text = Vec::new();
    let mut buffer = [0u8; 65536];
    while String::from_utf8_lossy(&text).matches("\nevent:").count() < events {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => text.extend_from_slice(&buffer[..read]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The outcome labels `/metrics` shows for `tool`.
fn outcomes_of(metrics: &str, tool: &str) -> Vec<String> {
    let mut outcomes: Vec<String> = metrics
        .lines()
        .filter(|line| {
            line.starts_with("toolhost_calls_total{") && line.contains(&format!("tool=\"{tool}\""))
        })
        .filter_map(|line| {
            let rest = line.split("outcome=\"").nth(1)?;
            Some(rest.split('"').next()?.to_string())
        })
        .collect();
    outcomes.sort();
    outcomes.dedup();
    outcomes
}

#[test]
fn error_codes_a_plugin_makes_up_are_never_kept() {
    let (_dir, _config, server) = room(&[&example("echo")], &[]);
    let (status, report) = put(&server, "/plugins/bob/fail", BOB, &fixture("squatter"));
    assert_eq!(status, 201, "{report}");

    // A megabyte code: one host code, the plugin's cut to 64 bytes.
    let huge = "X".repeat(1_000_000);
    let (status, answer) = call(
        &server,
        CAROL,
        "bob__fail",
        &json!({"code": huge, "message": "made up"}),
    );
    assert_eq!(status, 422, "{}", &answer.to_string()[..200]);
    assert_eq!(answer["error"]["code"], "TOOL_ERROR");
    assert_eq!(answer["error"]["details"]["pluginCode"], "X".repeat(64));
    assert_eq!(answer["error"]["message"], "made up");
    // A code that breaks the rule in another way, and codes that follow it:
    // those reach the caller as the plugin gave them.
    let (_, answer) = call(&server, CAROL, "bob__fail", &json!({"code": "not a code"}));
    assert_eq!(answer["error"]["code"], "TOOL_ERROR", "{answer}");
    for n in 0..20 {
        let code = format!("MADE_UP_{n}");
        let (status, answer) = call(&server, CAROL, "bob__fail", &json!({"code": code}));
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (422, Some(code.as_str()))
        );
    }

    // Metrics count every plugin code under one label; nothing grew.
    let (status, metrics) = crate::metrics::metrics_text(&server, Some(SCRAPER));
    assert_eq!(status, 200);
    assert_eq!(
        outcomes_of(&metrics, "bob__fail"),
        ["TOOL_ERROR"],
        "{metrics}"
    );
    assert!(
        metrics.len() < 256 * 1024,
        "/metrics is {} bytes",
        metrics.len()
    );
    let events = first_events(&server, CAROL, 2);
    assert!(events.contains("event: calls"), "{events}");
    assert!(
        events.len() < 64 * 1024,
        "/events sent {} bytes",
        events.len()
    );
    assert!(
        !events.contains("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
    );

    // A plugin's series go with the plugin.
    let (status, _) = send(&server, "DELETE", "/plugins/bob/fail", Some(BOB), "", b"");
    assert_eq!(status, 200);
    let (_, metrics) = crate::metrics::metrics_text(&server, Some(SCRAPER));
    assert!(!metrics.contains("bob__fail"), "{metrics}");
    assert!(!metrics.contains("MADE_UP"), "{metrics}");
}

#[test]
fn resource_uris_are_bounded_and_subscriptions_shared_per_person() {
    let (_dir, _config, server) = room(
        &[&example("conformance")],
        &["--max-subscriptions-per-person", "5"],
    );
    let subscribe = |token: &str, session: &str, uri: &str| {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": "resources/subscribe",
                             "params": {"uri": uri}});
        rpc(&server, token, Some(session), &message).2
    };
    let first = open_session(&server, CAROL).unwrap();
    let second = open_session(&server, CAROL).unwrap();

    // 880 KiB of URI a template matches: refused, naming the limit.
    let long = format!("test://template/{}/data", "A".repeat(880 * 1024));
    let refused = subscribe(CAROL, &first, &long);
    assert_eq!(
        refused["error"]["code"],
        -32602,
        "{}",
        &refused.to_string()[..300.min(refused.to_string().len())]
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-uri-bytes"),
        "{refused}"
    );
    let (status, answer) = send(
        &server,
        "GET",
        &format!("/resources/test://template/{}/data", "A".repeat(3000)),
        Some(CAROL),
        "",
        b"",
    );
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("INVALID_REQUEST"))
    );

    // Five subscriptions over carol's two sessions, and no sixth.
    let uri = |n: usize| format!("test://template/{n}/data");
    for n in 0..3 {
        assert_eq!(
            subscribe(CAROL, &first, &uri(n))["result"],
            json!({}),
            "{n}"
        );
    }
    for n in 3..5 {
        assert_eq!(
            subscribe(CAROL, &second, &uri(n))["result"],
            json!({}),
            "{n}"
        );
    }
    let refused = subscribe(CAROL, &second, &uri(5));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-subscriptions-per-person 5"),
        "{refused}"
    );
    // Another person's share is their own.
    let adas = open_session(&server, ADA).unwrap();
    assert_eq!(subscribe(ADA, &adas, &uri(5))["result"], json!({}));
    // An ended session gives its subscriptions back before DELETE's 204:
    // the next subscription, at once, is counted without them.
    assert_eq!(end_session(&server, CAROL, &first), 204);
    assert_eq!(
        subscribe(CAROL, &second, &uri(5))["result"],
        json!({}),
        "given back at the 204"
    );
    for n in 6..8 {
        assert_eq!(
            subscribe(CAROL, &second, &uri(n))["result"],
            json!({}),
            "{n}"
        );
    }
}

#[test]
fn one_person_cannot_take_every_session() {
    let (_dir, _config, server) = room(
        &[&example("echo")],
        &["--max-sessions", "6", "--max-sessions-per-person", "3"],
    );
    let carols: Vec<String> = (0..3)
        .map(|_| open_session(&server, CAROL).unwrap())
        .collect();
    let (status, refusal) = open_session(&server, CAROL).unwrap_err();
    assert_eq!(status, 503, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32000, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions-per-person 3"),
        "{refusal}"
    );
    // The others still find sessions.
    for _ in 0..3 {
        open_session(&server, ADA).unwrap();
    }
    // One of carol's ends: she may open another.
    assert_eq!(end_session(&server, CAROL, &carols[0]), 204);
    open_session(&server, CAROL).unwrap();
}

/// Writes `head` on a fresh connection, then `body` one piece every
/// `every` from a thread of its own, until it is all sent or the server
/// closes; returns the answer the server gave (status, JSON) and how long
/// it took.
pub(crate) fn trickle(
    base: &str,
    head: String,
    body: Vec<u8>,
    piece: usize,
    every: Duration,
) -> (u16, Value, Duration) {
    let address = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let started = Instant::now();
    std::thread::spawn(move || {
        for chunk in body.chunks(piece) {
            if writer.write_all(chunk).is_err() {
                return;
            }
            // The pace is the slow client under test.
            std::thread::sleep(every);
        }
    });
    let mut text = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                text.extend_from_slice(&buffer[..read]);
                let answer = String::from_utf8_lossy(&text);
                if let Some((headers, body)) = answer.split_once("\r\n\r\n") {
                    let length = headers.lines().find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    });
                    if length.is_some_and(|length| body.len() >= length) {
                        break;
                    }
                }
            }
        }
    }
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&text).into_owned();
    let (headers, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::Null),
        took,
    )
}

#[test]
fn a_slow_body_is_cut_with_a_token_too() {
    let (_dir, _config, server) = room(
        &[&example("echo")],
        &[
            "--max-connections",
            "4",
            "--body-timeout-secs",
            "2",
            "--header-timeout-ms",
            "1500",
        ],
    );
    // Four authenticated callers trickle a body a byte every 0.5 s: each is
    // cut at the body's deadline, and the server answers again.
    let head = |length: usize| {
        format!(
            "POST /tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CAROL}\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        )
    };
    let tricklers: Vec<_> = (0..4)
        .map(|_| {
            let (base, head) = (server.base.clone(), head(1000));
            std::thread::spawn(move || {
                trickle(&base, head, vec![b' '; 1000], 1, Duration::from_millis(500))
            })
        })
        .collect();
    for trickler in tricklers {
        let (status, answer, took) = trickler.join().unwrap();
        assert_eq!(status, 408, "{answer}");
        assert_eq!(answer["error"]["code"], "REQUEST_TIMEOUT", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--body-timeout-secs"),
            "{answer}"
        );
        assert!(took < Duration::from_secs(15), "{took:?}");
    }
    assert_eq!(server.get("/health").status, 200);

    // A body that stops coming is cut once the pause passes the header
    // timeout, on every route: an upload too.
    let (status, answer, _) = trickle(
        &server.base,
        head(100),
        vec![b' '; 10],
        10,
        Duration::from_secs(30),
    );
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (408, Some("REQUEST_TIMEOUT")),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--header-timeout-ms"),
        "{answer}"
    );
    let upload = format!(
        "PUT /plugins/bob/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {BOB}\r\n\
         Content-Type: application/wasm\r\nContent-Length: 100000\r\n\r\n"
    );
    let (status, answer, _) = trickle(
        &server.base,
        upload,
        vec![0; 100],
        100,
        Duration::from_secs(30),
    );
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (408, Some("REQUEST_TIMEOUT")),
        "{answer}"
    );
}

#[test]
fn uploads_stream_within_their_share_and_one_persons_are_capped() {
    let (dir, _config, server) = room(
        &[&example("echo")],
        &["--max-mib-per-person", "1", "--max-uploads-per-person", "1"],
    );
    // Three MiB declared, a share of one, and only half of it ever sent:
    // refused once the share is passed, without waiting for the rest (a
    // server that read the whole body first would wait for ever), and
    // nothing is left.
    let head = format!(
        "PUT /plugins/bob/big HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {BOB}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        3 << 20
    );
    let (status, answer, _) = trickle(
        &server.base,
        head,
        vec![0; 3 << 19],
        64 * 1024,
        Duration::from_millis(50),
    );
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "QUOTA_EXCEEDED", "{answer}");
    let bobs = dir.path().join("bob");
    let left: Vec<_> = std::fs::read_dir(&bobs)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "a refused upload left {left:?}");

    // Bob sends one component slowly: his second waits its turn and is
    // refused; ada's goes through meanwhile.
    let wasm = std::fs::read(example("echo")).unwrap();
    let head = format!(
        "PUT /plugins/bob/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {BOB}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        wasm.len()
    );
    let piece = wasm.len().div_ceil(70);
    let slow = {
        let base = server.base.clone();
        std::thread::spawn(move || trickle(&base, head, wasm, piece, Duration::from_millis(200)))
    };
    // Under way once its hidden upload file is in bob's folder.
    server.wait_for("bob's slow upload to be under way", |_| {
        std::fs::read_dir(&bobs).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".slow.wasm.upload-")
            })
        })
    });
    let (status, answer) = put(&server, "/plugins/bob/second", BOB, &example("echo"));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "BUSY");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-uploads-per-person"),
        "{answer}"
    );
    let (status, answer) = put(&server, "/plugins/ada/quick", ADA, &example("echo"));
    assert_eq!(status, 201, "{answer}");
    let (status, answer, _) = slow.join().unwrap();
    assert_eq!(status, 201, "{answer}");
}

/// Reads an answer's status line and headers (up to the blank line).
fn read_head(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A stream its client closed stops counting against its person at once,
/// not at the next keep-alive write (15 s on): closing one and opening
/// the next is what a page does on every reload.
#[test]
fn a_closed_stream_gives_its_place_back_at_once() {
    let (_dir, _config, server) = room(&[&example("echo")], &["--max-streams-per-person", "1"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let listen = || {
        let mut socket = TcpStream::connect(&address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        socket
            .write_all(
                format!(
                    "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADA}\r\n\
                     Accept: text/event-stream\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        let head = read_head(&mut socket);
        (socket, head)
    };
    let (first, head) = listen();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, head) = listen();
    assert!(head.starts_with("HTTP/1.1 503"), "one stream each: {head}");
    drop(first);
    // Well inside the keep-alive's 15 s.
    let started = std::time::Instant::now();
    loop {
        let (_second, head) = listen();
        if head.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the closed stream still counted after {:?}: {head}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn one_persons_streams_and_slow_bodies_never_lock_the_others_out() {
    let (_dir, _config, server) = room(
        &[&example("echo")],
        &["--max-connections", "20", "--max-streams-per-person", "3"],
    );
    let address = server.base.trim_start_matches("http://").to_string();
    let connect = || {
        let socket = TcpStream::connect(&address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        socket
    };
    let listen = |token: &str, path: &str| {
        let mut socket = connect();
        socket
            .write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
                     Accept: text/event-stream\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        let head = read_head(&mut socket);
        (socket, head)
    };
    // Ada opens thirty event streams: three are hers, the rest refused,
    // and every refused connection stays open as an idle one.
    let mut held = Vec::new();
    for _ in 0..30 {
        let (socket, head) = listen(ADA, "/events");
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.1 503"),
            "{head}"
        );
        held.push((socket, head));
    }
    let open = held
        .iter()
        .filter(|(_, head)| head.starts_with("HTTP/1.1 200"))
        .count();
    assert_eq!(open, 3, "ada's streams");
    // MCP's GET stream counts with them.
    let (_, head) = listen(ADA, "/mcp");
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    // Everyone else still gets in: the probe, the admin, another caller.
    let others_get_in = || {
        assert_eq!(server.get("/health").status, 200);
        let (status, _) = send(&server, "GET", "/plugins", Some(ROOT), "", b"");
        assert_eq!(status, 200);
        let (status, echoed) = call(&server, CAROL, "echo", &json!({ "text": "calm" }));
        assert_eq!(status, 200, "{echoed}");
    };
    others_get_in();
    let (carols, head) = listen(CAROL, "/events");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop((held, carols));

    // Ada's slow bodies: her share of requests in flight is held (four of
    // twenty connections), the rest refused before their bodies are read.
    let body = format!("{{\"text\":\"slow\"}}{}", " ".repeat(84));
    let slow: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut socket = connect();
            socket
                .write_all(
                    format!(
                        "POST /tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \
                         {ADA}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                        body.len(),
                        &body[..1]
                    )
                    .as_bytes(),
                )
                .unwrap();
            socket
        })
        .collect();
    others_get_in();
    // Her bodies end: those held are answered, the others were refused.
    let mut answered = Vec::new();
    for mut socket in slow {
        let _ = socket.write_all(&body.as_bytes()[1..]);
        answered.push(read_head(&mut socket));
    }
    let served = answered
        .iter()
        .filter(|head| head.starts_with("HTTP/1.1 200"))
        .count();
    assert!((1..=4).contains(&served), "{served} served: {answered:?}");
}
