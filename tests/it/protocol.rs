//! Protocol and transport edges over raw sockets and raw stdio, where no
//! SDK would send what is sent here: malformed JSON-RPC, refused requests,
//! session lifecycle and limits, slow and idle connections, and the HTTP
//! rules the Host check must follow. Every failure must be JSON with the
//! code the standards name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Server, example, plugin_dir, send, test_cache_dir};
use serde_json::Value;

struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.headers, self.body))
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }

    /// Asserts a JSON-RPC error with `code`; returns its message.
    fn rpc_error(&self, status: u16, code: i64) -> String {
        assert_eq!(self.status, status, "{}\n{}", self.headers, self.body);
        assert_eq!(
            self.header("content-type").as_deref(),
            Some("application/json"),
            "{}",
            self.headers
        );
        let body = self.json();
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        body["error"]["message"].as_str().unwrap().to_string()
    }
}

/// Sends `request` as is on a fresh connection and reads the whole answer
/// (the request should say `Connection: close`).
fn raw(server: &Server, request: &str) -> Answer {
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut text = Vec::new();
    let _ = stream.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text).to_string();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Bodies here are small; a chunked one is unwrapped crudely.
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body.lines()
            .filter(|line| !line.chars().all(|c| c.is_ascii_hexdigit()))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        body.to_string()
    };
    Answer {
        status,
        headers: headers.to_string(),
        body,
    }
}

/// A request to /mcp with the headers a client sends, plus `extra`.
fn mcp(server: &Server, method: &str, body: &str, extra: &str) -> Answer {
    raw(
        server,
        &format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// `GET /health` on a connection of its own, closed after the answer.
fn health(server: &Server) -> Answer {
    raw(
        server,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
}

fn echo_server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), extra);
    (dir, server)
}

#[test]
fn every_mcp_failure_is_a_json_rpc_error() {
    let (_dir, server) = echo_server(&[]);
    for id in ["{}", "[1]", "true", "1.5", "18446744073709551616"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
        let message = mcp(&server, "POST", &body, "").rpc_error(400, -32600);
        assert!(message.contains("id must be"), "{id}: {message}");
    }
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
    let message = mcp(&server, "POST", batch, "").rpc_error(400, -32600);
    assert!(message.contains("batches"), "{message}");
    let positional = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}"#;
    let answer = mcp(&server, "POST", positional, "");
    answer.rpc_error(200, -32602);
    assert_eq!(answer.json()["id"], 7);
    assert!(
        mcp(&server, "POST", "{", "")
            .rpc_error(400, -32700)
            .contains("Parse error")
    );

    // `"params": null` is no params, as some clients send it.
    let null_params = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#;
    let answer = mcp(&server, "POST", null_params, "");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.json()["result"]["tools"].is_array(),
        "{}",
        answer.body
    );

    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    // Refusals rmcp makes itself, once plain text.
    let html = raw(
        &server,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{list}",
            list.len()
        ),
    );
    html.rpc_error(406, -32600);
    let plain = raw(
        &server,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{list}",
            list.len()
        ),
    );
    plain.rpc_error(415, -32600);
    mcp(&server, "PUT", list, "").rpc_error(405, -32600);
    mcp(&server, "GET", "", "").rpc_error(400, -32600);
    let unknown = "Mcp-Session-Id: no-such-session\r\n";
    let message = mcp(&server, "POST", list, unknown).rpc_error(404, -32001);
    assert!(message.contains("Session not found"), "{message}");
    let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let answer = mcp(&server, "POST", notification, "");
    assert!(answer.status >= 400, "{}", answer.headers);
    answer.rpc_error(answer.status, -32600);

    // REST: a path that is not UTF-8 is an envelope too.
    let answer = raw(
        &server,
        "POST /tools/%FF HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{}",
    );
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.json()["error"]["code"], "INVALID_REQUEST");
}

/// Bad `tools/call` params and what each must say.
const BAD_CALLS: &[(&str, &str)] = &[
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
        "arguments must be an object",
    ),
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":"x"}}"#,
        "arguments must be an object",
    ),
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#,
        "needs params",
    ),
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}"#,
        "needs a name",
    ),
];

#[test]
fn bad_tools_call_params_are_invalid_params_over_http() {
    let (_dir, server) = echo_server(&[]);
    for (body, says) in BAD_CALLS {
        let answer = mcp(&server, "POST", body, "");
        let message = answer.rpc_error(200, -32602);
        assert!(message.contains(says), "{body}: {message}");
        assert_eq!(answer.json()["id"], 2);
    }
}

#[test]
fn bad_tools_call_params_are_invalid_params_over_stdio() {
    let dir = plugin_dir(&[&example("echo")]);
    let mut child = Command::new(crate::support::toolhost_bin())
        .args(["serve", "--stdio", "--plugins"])
        .arg(dir.path())
        .arg("--cache-dir")
        .arg(test_cache_dir())
        .env("TOOLHOST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut read = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|_| panic!("not JSON: {line:?}"))
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    );
    assert_eq!(read()["id"], 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (body, says) in BAD_CALLS {
        send(body);
        let answer = read();
        assert_eq!(answer["error"]["code"], -32602, "{body}: {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
        assert_eq!(answer["id"], 2);
    }
    send("not json at all");
    assert_eq!(read()["error"]["code"], -32700);
    // A malformed notification gets no answer at all: the next line read
    // is the answer to the call after it.
    send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}"#);
    // A good call still works on the same connection.
    send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}}"#,
    );
    assert_eq!(read()["result"]["content"][0]["text"], "ok");
    drop(stdin);
    let _ = child.wait();
}

/// How many MCP sessions the server holds (`toolhost_mcp_sessions`), once
/// `/metrics` shows it (not in the instant one is added or removed).
/// Reading it touches no session.
fn open_sessions(server: &Server) -> Option<u64> {
    let (status, text) = crate::metrics::metrics_text(server, None);
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|line| line.strip_prefix("toolhost_mcp_sessions "))
        .map(|count| count.trim().parse().unwrap())
}

pub(crate) fn initialize(server: &Server) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let answer = mcp(server, "POST", body, "");
    assert_eq!(answer.status, 200, "{}\n{}", answer.headers, answer.body);
    answer.header("mcp-session-id").expect("a session id")
}

#[test]
fn sessions_end_on_delete_and_expiry_and_are_capped() {
    let (_dir, server) = echo_server(&["--max-sessions", "3", "--session-idle-secs", "1"]);
    let session = initialize(&server);
    let header = format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n");
    let deleted = mcp(&server, "DELETE", "", &header);
    assert_eq!(deleted.status, 204, "{}\n{}", deleted.headers, deleted.body);
    mcp(&server, "DELETE", "", &header).rpc_error(404, -32001);
    mcp(&server, "DELETE", "", "Mcp-Session-Id: never-was\r\n").rpc_error(404, -32001);

    let open: Vec<String> = (0..3).map(|_| initialize(&server)).collect();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let message = mcp(&server, "POST", body, "").rpc_error(503, -32000);
    assert!(message.contains("maximum of 3 sessions"), "{message}");

    // Idle past --session-idle-secs (1 s): closed, and room for new ones.
    // A probe would itself keep the session alive, so wait until the
    // server holds none (which /metrics says without touching them), then
    // probe.
    server.wait_for("the idle sessions to close", |s| {
        open_sessions(s) == Some(0)
    });
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    for session in &open {
        let header = format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n");
        mcp(&server, "POST", list, &header).rpc_error(404, -32001);
    }
    initialize(&server);
}

/// A client that only listens (an open GET stream, no requests) keeps its
/// session past `--session-idle-secs`: it still hears `list_changed`, and
/// its next request finds the session.
#[test]
fn a_session_whose_client_listens_does_not_expire() {
    let (_dir, server) = echo_server(&["--session-idle-secs", "1"]);
    let session = initialize(&server);
    let header = format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(mcp(&server, "POST", initialized, &header).status, 202);
    let address = server.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .write_all(
            format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n{header}\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the GET stream opens");

    // Past the idle time, with nothing but the open stream: a session
    // opened after it, whose client does not listen, has closed.
    let unheard = initialize(&server);
    assert_ne!(unheard, session);
    server.wait_for("the other session to close", |s| {
        open_sessions(s).is_some_and(|open| open <= 1)
    });
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let answer = mcp(&server, "POST", list, &header);
    assert_eq!(answer.status, 200, "{}\n{}", answer.headers, answer.body);
    assert!(answer.body.contains("echo"), "{}", answer.body);
    drop(stream);
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One client session the way SDKs open and end it: initialize, the
/// initialized notification (which starts the session's notification
/// task), DELETE.
fn session_cycle(server: &Server) -> u16 {
    let session = initialize(server);
    let header = format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(mcp(server, "POST", initialized, &header).status, 202);
    mcp(server, "DELETE", "", &header).status
}

/// 1,000 sessions opened and closed kept 11.7 MiB before: each session's
/// notification task waited for the next tool-list change, holding the
/// session until then.
#[test]
fn closed_sessions_give_their_memory_back() {
    // Its own process: the measure is the server's resident memory.
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::process(dir.path(), &[]);
    server.wait_for_runtimes_compiled();
    for _ in 0..100 {
        session_cycle(&server);
    }
    let before = resident_kib(server.pid());
    for _ in 0..1000 {
        assert_eq!(session_cycle(&server), 204);
    }
    // The sessions' tasks end after their answers: the first sample below
    // the bound, or the last one after 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    let grown = loop {
        let grown = resident_kib(server.pid()).saturating_sub(before);
        if grown < 4 * 1024 || Instant::now() >= deadline {
            break grown;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(grown < 4 * 1024, "1000 closed sessions kept {grown} KiB");
}

/// Reads until the server closes the connection; how long that took.
fn time_until_closed(mut stream: TcpStream) -> Duration {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => {}
        }
    }
}

#[test]
fn silent_slow_and_idle_connections_are_closed() {
    let (_dir, server) = echo_server(&["--header-timeout-ms", "500"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let silent = TcpStream::connect(&address).unwrap();
    let mut half = TcpStream::connect(&address).unwrap();
    half.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0")
        .unwrap();
    let mut idle = TcpStream::connect(&address).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    for (what, stream) in [
        ("silent", silent),
        ("half a header", half),
        ("idle keep-alive", idle),
    ] {
        let took = time_until_closed(stream);
        assert!(took < Duration::from_secs(10), "{what}: open for {took:?}");
    }
}

/// A connection evicted at the cap while half its header is in is still
/// on the header timeout: hyper closes it only once the header is whole,
/// so without the timer it would keep its slot for good.
#[test]
fn half_headers_evicted_at_the_cap_still_time_out() {
    let (_dir, server) = echo_server(&["--max-connections", "2", "--header-timeout-ms", "1000"]);
    let address = server.base.trim_start_matches("http://").to_string();
    // Opened apart, so that the first is the oldest: the server numbers
    // each connection on a task of its own, and no probe can ask which it
    // took first without taking a connection at the cap itself.
    let mut half: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: 127")
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            stream
        })
        .collect();
    // A third connection makes the server evict the oldest; its answer
    // (200 or 503) does not matter here.
    let _ = health(&server);
    let oldest = half.remove(0);
    let took = time_until_closed(oldest);
    assert!(took < Duration::from_secs(5), "evicted, open for {took:?}");
    server.wait_for("a slot to come back", |s| health(s).status == 200);
}

/// A body still coming after its answer (an upload refused for its token,
/// drained for a lingering close) keeps its connection past the header
/// timeout: the client writes it all, then reads the 401, with no reset.
#[test]
fn a_body_drained_after_its_answer_outlasts_the_header_timeout() {
    let (_dir, server) = echo_server(&["--header-timeout-ms", "1000", "--token", "the-right-one"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    let chunk = vec![b'x'; 16 * 1024];
    // 15 pieces 200 ms apart: three header timeouts of body after the 401
    // (a slow client is what is under test).
    let pieces = 15;
    stream
        .write_all(
            format!(
                "PUT /plugins/late.wasm HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer the-wrong-one\r\nContent-Length: {}\r\n\r\n",
                pieces * chunk.len()
            )
            .as_bytes(),
        )
        .unwrap();
    for piece in 0..pieces {
        std::thread::sleep(Duration::from_millis(200));
        stream
            .write_all(&chunk)
            .unwrap_or_else(|error| panic!("piece {piece} of the body: {error}"));
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).expect("the answer");
        assert!(read > 0, "closed before the answer could be read");
        seen.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&seen).to_string();
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
}

/// Past the cap, with every connection busy (here each holds an open
/// `/events` stream), a new one is taken in the reserve, which answers the
/// probe and refuses the client who holds them with the BUSY envelope.
#[test]
fn connections_past_the_cap_are_refused_with_json_and_the_probe_still_answers() {
    let (_dir, server) = echo_server(&["--max-connections", "4", "--header-timeout-ms", "1500"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream
                .write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut first = [0u8; 64];
            assert!(stream.read(&mut first).unwrap() > 0, "the stream opened");
            stream
        })
        .collect();
    // Past the cap, a reserve serves the probe, and refuses the one who
    // holds every slot with JSON.
    assert_eq!(health(&server).status, 200);
    let refused = server.get("/tools");
    assert_eq!(refused.status, 503, "{}", refused.json);
    assert_eq!(refused.json["error"]["code"], "BUSY");
    assert_eq!(refused.json["success"], false);
    // The streams end, and the server answers again.
    drop(held);
    server.wait_for("the streams to close", |s| s.get("/tools").status == 200);
}

/// People arriving one after another, each with nothing else in flight,
/// may take part of the reserve and keep it with a stream, never all of
/// it: the probes and an admin still get in.
#[test]
fn people_who_arrive_first_never_take_the_whole_reserve() {
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    let mut text = String::from(
        "[[token]]\nname = \"root\"\nsecret = \"the-admins-secret\"\nrole = \"admin\"\n",
    );
    for person in 0..12 {
        text.push_str(&format!(
            "[[token]]\nname = \"p{person}\"\nsecret = \"secret-of-person-p{person}\"\nrole = \"caller\"\n"
        ));
    }
    std::fs::write(&tokens, text).unwrap();
    // Four slots and a reserve of four.
    let (_dir, server) = echo_server(&[
        "--max-connections",
        "4",
        "--tokens",
        tokens.to_str().unwrap(),
        "--header-timeout-ms",
        "1500",
    ]);
    let address = server.base.trim_start_matches("http://").to_string();
    // Twelve people, one after another, each opening a stream.
    let mut held = Vec::new();
    for person in 0..12 {
        let mut stream = TcpStream::connect(&address).unwrap();
        stream
            .write_all(
                format!(
                    "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                     Authorization: Bearer secret-of-person-p{person}\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut first = [0u8; 64];
        let _ = stream.read(&mut first);
        held.push(stream);
    }
    // The probes and the admin are still served.
    for path in ["/health", "/ready"] {
        let answered = server.get(path);
        assert_eq!(answered.status, 200, "{path}: {}", answered.json);
    }
    let (status, answer) = send(
        &server,
        "GET",
        "/plugins",
        Some("the-admins-secret"),
        "application/json",
        b"",
    );
    assert_eq!(status, 200, "{answer}");
    drop(held);
}

/// Connections that never send a request make room at the cap as idle
/// ones do, oldest first: silence cannot lock the room out until the
/// header timeout.
#[test]
fn silent_connections_make_room_at_the_cap() {
    let (_dir, server) = echo_server(&["--max-connections", "4", "--header-timeout-ms", "60000"]);
    let address = server.base.trim_start_matches("http://").to_string();
    // Opened apart, so that the first is the oldest (as above).
    let mut silent: Vec<TcpStream> = (0..4)
        .map(|_| {
            let stream = TcpStream::connect(&address).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            stream
        })
        .collect();
    let answered = health(&server);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let oldest = silent.remove(0);
    assert!(time_until_closed(oldest) < Duration::from_secs(5));
}

/// At the connection cap, the oldest idle keep-alive connection is closed
/// to make room (as nginx does), so idle clients cannot lock the room out.
#[test]
fn idle_keep_alive_connections_make_room_at_the_cap() {
    let (_dir, server) = echo_server(&["--max-connections", "4"]);
    let address = server.base.trim_start_matches("http://").to_string();
    let answered = |stream: &mut TcpStream| {
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        // The whole answer: the header, then Content-Length bytes.
        loop {
            let read = stream.read(&mut buffer).unwrap();
            assert!(read > 0, "closed before answering");
            seen.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|line| {
                        line.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_string)
                    })
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                if body.len() >= length {
                    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                    return;
                }
            }
        }
    };
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            answered(&mut stream);
            stream
        })
        .collect();
    for _ in 0..3 {
        let fresh = health(&server);
        assert_eq!(fresh.status, 200, "{}", fresh.body);
    }
    // The oldest idle connections were the ones closed.
    let oldest = idle.remove(0);
    assert!(time_until_closed(oldest) < Duration::from_secs(5));
    // Only as many are closed as room is needed, oldest first: the newest
    // is still open and answers.
    let mut newest = idle.pop().unwrap();
    answered(&mut newest);
}

#[test]
fn host_checks_follow_the_http_rules() {
    let (_dir, server) = echo_server(&[]);
    let absolute_evil = raw(
        &server,
        "GET http://evil.example/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(absolute_evil.status, 403, "{}", absolute_evil.body);
    assert_eq!(absolute_evil.json()["error"]["code"], "FORBIDDEN");
    let absolute_local = raw(
        &server,
        "GET http://127.0.0.1/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(absolute_local.status, 200, "{}", absolute_local.body);
    // The probes answer a balancer's check without a Host header, and
    // Kubernetes' with the pod's address; nothing else does.
    for probe in ["/health", "/ready"] {
        for host in ["", "Host: 10.1.2.3:8000\r\n"] {
            let answer = raw(
                &server,
                &format!("GET {probe} HTTP/1.1\r\n{host}Connection: close\r\n\r\n"),
            );
            assert_eq!(answer.status, 200, "{probe} {host:?}: {}", answer.body);
        }
    }
    let no_host = raw(&server, "GET /tools HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(no_host.status, 403, "{}", no_host.body);
    let twice = raw(
        &server,
        "GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(twice.status, 400, "{}", twice.body);
    assert_eq!(twice.json()["error"]["code"], "INVALID_REQUEST");

    // On /mcp the same rules hold, rmcp's own Host check included, and a
    // refusal is a JSON-RPC error.
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let through_proxy = raw(
        &server,
        &format!(
            "POST http://127.0.0.1/mcp HTTP/1.1\r\nHost: proxy.example\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{list}",
            list.len()
        ),
    );
    assert_eq!(through_proxy.status, 200, "{}", through_proxy.body);
    let evil = raw(
        &server,
        &format!(
            "POST http://evil.example/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{list}",
            list.len()
        ),
    );
    evil.rpc_error(403, -32600);
}

/// CORS only for the origins named with `--cors-origin`: their preflights
/// are answered before any token check, every answer to them (a 401 too)
/// names the origin, never `*`; other origins' preflights are refused.
#[test]
fn cors_answers_listed_origins_only() {
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let (_dir, server) = echo_server(&[
        "--tokens",
        tokens.to_str().unwrap(),
        "--cors-origin",
        "http://localhost:6274",
    ]);
    let preflight = |origin: &str| {
        raw(
            &server,
            &format!(
                "OPTIONS /tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: {origin}\r\n\
                 Access-Control-Request-Method: POST\r\n\
                 Access-Control-Request-Headers: authorization, content-type\r\n\
                 Connection: close\r\n\r\n"
            ),
        )
    };
    let allowed = preflight("http://localhost:6274");
    assert_eq!(allowed.status, 204, "{}", allowed.headers);
    let headers = allowed.headers.to_ascii_lowercase();
    assert!(
        headers.contains("access-control-allow-origin: http://localhost:6274"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-allow-headers: authorization, content-type"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-allow-methods:"),
        "{headers}"
    );
    assert!(
        !headers.contains("access-control-allow-credentials"),
        "{headers}"
    );
    assert!(
        !headers.contains("access-control-allow-origin: *"),
        "{headers}"
    );

    let call = |origin: &str, token: Option<&str>| {
        let body = r#"{"text":"cors"}"#;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        raw(
            &server,
            &format!(
                "POST /tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: {origin}\r\n{auth}\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let answered = call("http://localhost:6274", Some(crate::publish::ADA));
    assert_eq!(answered.status, 200, "{}", answered.body);
    let headers = answered.headers.to_ascii_lowercase();
    assert!(
        headers.contains("access-control-allow-origin: http://localhost:6274"),
        "{headers}"
    );
    assert!(headers.contains("vary: origin"), "{headers}");
    assert!(
        headers.contains("access-control-expose-headers: mcp-session-id"),
        "{headers}"
    );
    let unauthorized = call("http://localhost:6274", None);
    assert_eq!(unauthorized.status, 401);
    assert!(
        unauthorized
            .headers
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: http://localhost:6274"),
        "a browser page can read why: {}",
        unauthorized.headers
    );
    // A wrong method too, on a route whose 405 the outer layer makes an
    // envelope: it carries the origin.
    let wrong_method = raw(
        &server,
        &format!(
            "PATCH /events HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:6274\r\n\
             Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
            crate::publish::ADA
        ),
    );
    assert_eq!(wrong_method.status, 405, "{}", wrong_method.body);
    assert!(
        wrong_method.body.contains("METHOD_NOT_ALLOWED"),
        "{}",
        wrong_method.body
    );
    assert!(
        wrong_method
            .headers
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: http://localhost:6274"),
        "{}",
        wrong_method.headers
    );

    for foreign in ["http://evil.example", "null"] {
        let refused = preflight(foreign);
        assert_eq!(refused.status, 403, "{foreign}: {}", refused.headers);
        assert!(
            !refused
                .headers
                .to_ascii_lowercase()
                .contains("access-control-allow-origin")
        );
        let refused = call(foreign, Some(crate::publish::ADA));
        assert_eq!(refused.status, 403, "{foreign}");
    }
    // Another port of a loopback name passes the Host/Origin check (as
    // before), but is not a CORS origin: its preflight is not answered, so
    // a browser page there cannot call.
    let other_port = preflight("http://localhost:6275");
    assert_ne!(other_port.status, 204);
    assert!(
        !other_port
            .headers
            .to_ascii_lowercase()
            .contains("access-control-allow-origin")
    );

    // A wildcard is refused at start-up, with the reason.
    let output = std::process::Command::new(crate::support::toolhost_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--cors-origin",
            "*",
            "--plugins",
        ])
        .arg(config.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not an origin"));
}
