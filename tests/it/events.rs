//! `GET /events` through the real binary: a snapshot first, then each load
//! outcome as it happens with an id that counts what its listener sees,
//! call summaries from the one call ledger, and a reconnect with
//! `Last-Event-ID` that replays what was missed (or starts over from a
//! snapshot when it cannot).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, drop_in, example, plugin_dir, variant_of};

/// One server-sent event.
#[derive(Debug, Default)]
struct Sse {
    event: String,
    id: Option<String>,
    data: String,
}

impl Sse {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }

    /// The listener's own count in the id (`N-TOKEN`).
    fn count(&self) -> u64 {
        let id = self.id.as_deref().expect("an event with an id");
        let (count, token) = id.split_once('-').expect("N-TOKEN");
        assert_eq!(token.len(), 16, "{id}");
        count.parse().unwrap()
    }
}

/// An open `GET /events` stream.
struct Events {
    reader: BufReader<TcpStream>,
}

impl Events {
    fn open(server: &Server, headers: &str) -> Events {
        let address = server.base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).unwrap();
        write!(
            stream,
            "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n{headers}\r\n"
        )
        .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        let mut content_type = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if line.to_ascii_lowercase().starts_with("content-type:") {
                content_type = line.clone();
            }
            if line == "\r\n" {
                break;
            }
        }
        assert!(content_type.contains("text/event-stream"), "{content_type}");
        Events { reader }
    }

    /// The next event (comments and keep-alives skipped). The body is
    /// chunked: chunk-size lines are skipped too.
    fn next(&mut self) -> Sse {
        let mut event = Sse::default();
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.reader.read_line(&mut line).expect("an event in time");
            assert!(read > 0, "the stream ended");
            let text = line.trim_end_matches(['\r', '\n']);
            if let Some(value) = text.strip_prefix("event:") {
                event.event = value.trim().to_string();
            } else if let Some(value) = text.strip_prefix("id:") {
                event.id = Some(value.trim().to_string());
            } else if let Some(value) = text.strip_prefix("data:") {
                event.data.push_str(value.trim_start());
            } else if text.is_empty() && !event.event.is_empty() {
                return event;
            }
        }
    }

    /// The next event named `name`, skipping others, within `limit`.
    fn until(&mut self, name: &str, limit: Duration) -> Sse {
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < limit,
                "no {name} event within {limit:?}"
            );
            let event = self.next();
            if event.event == name {
                return event;
            }
        }
    }
}

#[test]
fn events_stream_load_outcomes_and_call_summaries_and_resume() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &[]);
    let mut events = Events::open(&server, "");
    let snapshot = events.next();
    assert_eq!(snapshot.event, "snapshot", "{snapshot:?}");
    assert_eq!(
        snapshot.json()["plugins"][0]["id"],
        "echo",
        "{}",
        snapshot.data
    );

    drop_in(&example("math"), dir.path(), "math.wasm");
    let loaded = events.until("loaded", Duration::from_secs(30));
    assert_eq!(loaded.json()["plugin"], "math");
    assert_eq!(loaded.json()["report"]["state"], "loaded");
    let loaded_id = loaded.id.clone().unwrap();

    // Calls are summed up in a `calls` event, without an id.
    for _ in 0..3 {
        assert_eq!(server.call("echo", json!({ "text": "hi" })).status, 200);
    }
    assert_eq!(server.call("echo", json!({ "wrong": 1 })).status, 422);
    assert_eq!(server.call("no_such_tool", json!({})).status, 404);
    let calls = events.until("calls", Duration::from_secs(15));
    assert_eq!(calls.id, None);
    let tools = calls.json()["tools"].as_array().unwrap().clone();
    let echo = tools.iter().find(|t| t["tool"] == "echo").unwrap();
    assert_eq!(echo["outcomes"], json!({ "INVALID_ARGUMENTS": 1, "ok": 3 }));
    assert_eq!(echo["plugin"], "echo");
    assert!(echo["recentP50Ms"].as_f64().unwrap() > 0.0, "{echo}");
    assert!(
        tools.iter().all(|t| t["tool"] != "no_such_tool"),
        "an unknown name never becomes an entry of its own: {tools:?}"
    );
    drop(events);

    // Reconnect after the `loaded` event: what came since is replayed, with
    // no snapshot first.
    std::fs::remove_file(dir.path().join("math.wasm")).unwrap();
    server.wait_for("math to go", |s| s.plugin("math").is_none());
    let mut resumed = Events::open(&server, &format!("Last-Event-ID: {loaded_id}\r\n"));
    let first = resumed.next();
    assert_ne!(first.event, "snapshot", "{first:?}");
    assert_eq!(first.count(), loaded.count() + 1, "{first:?}");
    if first.event != "removed" {
        let removed = resumed.until("removed", Duration::from_secs(10));
        assert_eq!(removed.json()["plugin"], "math");
    }
    drop_in(
        &variant_of(&example("echo"), "events"),
        dir.path(),
        "echo.wasm",
    );
    let replaced = resumed.until("replaced", Duration::from_secs(30));
    assert_eq!(replaced.json()["plugin"], "echo");
    drop(resumed);

    // An id the server never gave (a restart, say): a snapshot.
    let mut fresh = Events::open(&server, "Last-Event-ID: 999999\r\n");
    assert_eq!(fresh.next().event, "snapshot");
}

/// With people and roles, `/events` needs a token like the API, and only
/// admins see server paths in it.
#[test]
fn events_follow_the_apis_roles_and_hide_paths_from_non_admins() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let refused = server.get("/events");
    assert_eq!(refused.status, 401, "{}", refused.json);
    let auth = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let mut admin = Events::open(&server, &auth(crate::publish::ADMIN));
    let mut caller = Events::open(&server, &auth(crate::publish::ADA));
    let folder = dir.path().to_str().unwrap().to_string();
    assert!(admin.next().data.contains(&folder));
    assert!(!caller.next().data.contains(&folder));
    drop_in(&example("math"), dir.path(), "math.wasm");
    let seen = caller.until("loaded", Duration::from_secs(30));
    assert_eq!(seen.json()["report"]["file"], "math.wasm", "{}", seen.data);
    let seen = admin.until("loaded", Duration::from_secs(30));
    assert!(seen.data.contains(&folder), "{}", seen.data);
}

/// An event's id counts only what its listener sees: nothing in it tells
/// how often, or when, plugins hidden from them change.
#[test]
fn event_ids_count_only_what_their_listener_sees() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    let (ada, carol) = ("ada-secret-0123456789", "carol-secret-0123456789");
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nname = \"ada\"\nsecret = \"{ada}\"\nrole = \"publisher\"\ntools = [\"ada/*\"]\n\
             [[token]]\nname = \"carol\"\nsecret = \"{carol}\"\nrole = \"publisher\"\ntools = [\"carol/*\"]\n"
        ),
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let mut events = Events::open(&server, &format!("Authorization: Bearer {ada}\r\n"));
    let mut seen = vec![events.next()];
    let publish = |token: &str, id: &str, tag: &str| {
        let wasm = std::fs::read(variant_of(&example("echo"), tag)).unwrap();
        let path = format!("/plugins/{id}");
        let (status, report) = crate::support::send(
            &server,
            "PUT",
            &path,
            Some(token),
            "application/wasm",
            &wasm,
        );
        assert!([200, 201].contains(&status), "{report}");
    };
    let until_loaded = |events: &mut Events, seen: &mut Vec<Sse>, plugin: &str| loop {
        let event = events.next();
        let done = ["loaded", "replaced"].contains(&event.event.as_str())
            && event.json()["plugin"] == plugin;
        seen.push(event);
        if done {
            return;
        }
    };
    publish(ada, "ada/one", "one");
    until_loaded(&mut events, &mut seen, "ada/one");
    // Carol's plugins change, again and again, out of ada's sight.
    for round in 0..4 {
        publish(carol, "carol/hidden", &format!("hidden-{round}"));
    }
    publish(ada, "ada/one", "two");
    until_loaded(&mut events, &mut seen, "ada/one");
    let counts: Vec<u64> = seen
        .iter()
        .filter(|event| event.id.is_some())
        .map(Sse::count)
        .collect();
    let expected: Vec<u64> = (1..=counts.len() as u64).collect();
    assert_eq!(counts, expected, "{seen:?}");
    assert!(seen.iter().all(|event| !event.data.contains("carol/")));
}
