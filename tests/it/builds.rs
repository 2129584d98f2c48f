//! Source publishing (`--builds python,js`) on servers started with
//! `toolhost serve`'s flags (in this process; the builds are processes of
//! their own all the same): one
//! `app.py` or `app.js` sent with `PUT`, built on the server by its pinned
//! toolchain, live and called; a failed build answered with the author's
//! line; a build past a limit stopped while everyone else is served; a
//! caller's token refused before anything runs; Rust and other types
//! refused with what is built here; the source readable by its author and
//! admins only; builds queued one per person, a newer source replacing the
//! one that waits, ten people at once in the order they came.

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::publish::{ADA, ADMIN, CAROL, DAVE, contents, tokens_file};
use crate::support::{Server, example, plugin_dir, send, wait_until};

pub(crate) const PY_WORD_COUNT: &str = r#"from dataclasses import dataclass

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
    import heapq

    return Count(words=len(heapq.nlargest(10_000, text.split())))
"#;

pub(crate) const JS_SHOUT: &str = r#"import { tool, exportPlugin } from "./toolhost.js";

const shout = tool({
  name: "shout",
  description: "Says the text louder.",
  input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run: ({ text }) => text.toUpperCase(),
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [shout] });
"#;

/// An unclosed parenthesis on line 7.
const PY_SYNTAX: &str = "from toolhost_plugin import Tools, tool  # noqa: F401\n\n\n\
    @tool(name=\"broken\")\ndef broken(text: str) -> str:\n    \"\"\"Broken.\"\"\"\n    return (text\n";

/// Raises at import, on line 5.
const PY_RAISES: &str = "from toolhost_plugin import Tools, tool  # noqa: F401\n\n\ndef fail():\n    \
    raise ValueError(\"no config here\")\n\n\nfail()\n";

/// A parse error on line 3.
const JS_PARSE: &str = "import { exportPlugin } from \"./toolhost.js\";\n\nconst x = (;\n\
    export const { tools, resources, prompts, completion } = exportPlugin({ tools: [] });\n";

pub(crate) const PY_LOOP: &str =
    "from toolhost_plugin import Tools  # noqa: F401\n\nwhile True:\n    pass\n";

/// Holds a new MiB (written, so resident) at each turn.
const PY_HOARD: &str = "from toolhost_plugin import Tools  # noqa: F401\n\nkept = []\nwhile True:\n    \
    kept.append(b\"x\" * (1 << 20))\n";

/// Waits until `events` (from [`build_events`]) holds one of `plugin`'s at
/// `stage`.
fn wait_for_build_event(events: &Mutex<Vec<Value>>, plugin: &str, stage: &str) {
    wait_until(
        &format!("{plugin}'s build to be {stage}"),
        Duration::from_secs(300),
        || {
            events
                .lock()
                .unwrap()
                .iter()
                .any(|e| e["plugin"] == plugin && e["stage"] == stage)
        },
    );
}

/// Publishes `source` of media type `kind` as `id` with `token`, waiting
/// as long as a queued build may (the shared test agent gives up at 60 s).
pub(crate) fn put_source(
    server: &Server,
    id: &str,
    token: &str,
    kind: &str,
    source: &str,
) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(600)))
        .build()
        .into();
    let mut response = agent
        .put(format!("{}/plugins/{id}", server.base))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", kind)
        .send(source.as_bytes())
        .unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// [`put_source`] asking for a build of its own (`?build=full`): what
/// these tests test is the build tier.
pub(crate) fn put_built(
    server: &Server,
    id: &str,
    token: &str,
    kind: &str,
    source: &str,
) -> (u16, Value) {
    put_source(server, &format!("{id}?build=full"), token, kind, source)
}

pub(crate) fn call(server: &Server, tool: &str, arguments: Value) -> Value {
    crate::support::call_as(server, tool, ADMIN, &arguments.to_string()).1
}

/// `GET /plugins/{id}/source` with `token`: its status and text.
pub(crate) fn source_of(server: &Server, id: &str, token: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .get(format!("{}/plugins/{id}/source", server.base))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

/// The `build` events of `/events` (as the admin sees them), collected by
/// a thread of their own from now on.
pub(crate) fn build_events(server: &Server) -> Arc<Mutex<Vec<Value>>> {
    events_of(server, ADMIN, "build")
}

/// The `/events` events of one kind (`build`, `publish`), as the person of
/// `token` sees them, collected by a thread of their own from now on.
pub(crate) fn events_of(server: &Server, token: &str, kind: &str) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (url, kept) = (format!("{}/events", server.base), seen.clone());
    let (token, wanted) = (token.to_string(), kind.to_string());
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(900)))
            .build()
            .into();
        let response = agent
            .get(&url)
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .unwrap();
        let _ = ready.send(());
        let mut matches = false;
        for line in BufReader::new(response.into_body().into_reader()).lines() {
            let Ok(line) = line else { return };
            if let Some(kind) = line.strip_prefix("event: ") {
                matches = kind == wanted;
            } else if let Some(data) = line.strip_prefix("data: ")
                && matches
                && let Ok(event) = serde_json::from_str::<Value>(data)
            {
                kept.lock().unwrap().push(event);
            }
        }
    });
    listening.recv_timeout(Duration::from_secs(20)).unwrap();
    seen
}

pub(crate) fn builds_server(
    dir: &std::path::Path,
    config: &std::path::Path,
    extra: &[&str],
) -> Server {
    let tokens = tokens_file(config);
    let mut args = vec![
        "--tokens",
        tokens.to_str().unwrap(),
        "--builds",
        "python,js",
    ];
    args.extend_from_slice(extra);
    Server::start(dir, &args)
}

#[test]
fn python_and_javascript_source_is_built_on_the_server_and_served() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let server = builds_server(dir.path(), config.path(), &["--max-source-kib", "16"]);
    let events = build_events(&server);

    // Python: built, live, called; the import made inside the function
    // works when the tool is called (and the answer says so).
    let (status, report) = put_built(&server, "ada/wc", ADA, "text/x-python", PY_WORD_COUNT);
    assert_eq!(status, 201, "{report}");
    assert_eq!(report["tools"], json!(["ada__word_count"]), "{report}");
    assert_eq!(report["build"]["language"], "python", "{report}");
    assert_eq!(report["builtFrom"], "python", "{report}");
    assert!(report["build"]["seconds"].as_f64().unwrap() > 0.0);
    let late = 1 + PY_WORD_COUNT
        .lines()
        .position(|line| line.trim() == "import heapq")
        .unwrap();
    let notes = report["build"]["notes"].to_string();
    assert!(
        notes.contains(&format!("app.py:{late}")) && notes.contains("heapq"),
        "{report}"
    );
    let counted = call(
        &server,
        "ada__word_count",
        json!({ "text": "one two three" }),
    );
    assert_eq!(counted["structuredContent"]["words"], 3, "{counted}");

    // JavaScript (text/javascript or application/javascript).
    let (status, report) = put_built(
        &server,
        "ada/shout",
        ADA,
        "application/javascript",
        JS_SHOUT,
    );
    assert_eq!(status, 201, "{report}");
    let shouted = call(&server, "ada__shout", json!({ "text": "hey" }));
    assert_eq!(shouted["content"][0]["text"], "HEY", "{shouted}");

    // The source: its author and admins read it; another publisher and a
    // caller do not.
    assert_eq!(
        source_of(&server, "ada/wc", ADA),
        (200, PY_WORD_COUNT.to_string())
    );
    assert_eq!(source_of(&server, "ada/shout", ADMIN).0, 200);
    assert_eq!(source_of(&server, "ada/wc", CAROL).0, 403);
    assert_eq!(source_of(&server, "ada/wc", DAVE).0, 403);
    // A top-level plugin's source, at /plugins/{name}/source: the admin's.
    let (status, report) = put_built(&server, "loud", ADMIN, "text/javascript", JS_SHOUT);
    assert_eq!(status, 201, "{report}");
    assert_eq!(
        source_of(&server, "loud", ADMIN),
        (200, JS_SHOUT.to_string())
    );
    assert_eq!(source_of(&server, "loud", ADA).0, 403);

    // A syntax error: 422 with the author's line first; what served serves on.
    let before = contents(dir.path());
    let (status, refused) = put_built(&server, "ada/wc", ADA, "text/x-python", PY_SYNTAX);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "BUILD_FAILED", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("app.py:7: SyntaxError"), "{refused}");
    assert_eq!(refused["error"]["details"]["line"], 7, "{refused}");
    assert!(
        refused["error"]["details"]["log"]
            .as_str()
            .unwrap()
            .contains("SyntaxError"),
        "{refused}"
    );
    assert!(
        !message.contains("/0/") && !message.contains("toolhost-build-"),
        "{message}"
    );
    assert_eq!(
        contents(dir.path()),
        before,
        "a failed build wrote something"
    );
    let counted = call(&server, "ada__word_count", json!({ "text": "still here" }));
    assert_eq!(counted["structuredContent"]["words"], 2, "{counted}");

    // An exception at import: the line it was raised on.
    let (status, refused) = put_built(&server, "ada/raises", ADA, "text/x-python", PY_RAISES);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["details"]["line"], 5, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ValueError: no config here"),
        "{refused}"
    );
    // A JavaScript parse error: its line.
    let (status, refused) = put_built(&server, "ada/parse", ADA, "text/javascript", JS_PARSE);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["details"]["line"], 3, "{refused}");

    // Refused before anything runs: a caller's token, Rust, other types,
    // a source over --max-source-kib.
    // The feed may tell the last build's end after its answer came back:
    // count from once it has.
    wait_for_build_event(&events, "ada/parse", "failed");
    let builds_before = events.lock().unwrap().len();
    let before = contents(dir.path());
    let (status, refused) = put_built(&server, "dave/x", DAVE, "text/x-python", PY_WORD_COUNT);
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("FORBIDDEN")),
        "{refused}"
    );
    let (status, refused) = put_built(&server, "ada/r", ADA, "text/x-rust", "fn main() {}");
    assert_eq!(status, 415, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("text/x-python") && message.contains("Rust is never built"),
        "{refused}"
    );
    let (status, _) = put_built(&server, "ada/t", ADA, "text/html", "<p>x</p>");
    assert_eq!(status, 415);
    let large = format!("{PY_WORD_COUNT}\n# {}\n", "x".repeat(20 << 10));
    let (status, refused) = put_built(&server, "ada/large", ADA, "text/x-python", &large);
    assert_eq!(status, 413, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-source-kib")
    );
    assert_eq!(
        contents(dir.path()),
        before,
        "a refused request wrote something"
    );
    // Nor built: the feed tells builds in the order they came, so a build
    // of any of them would be told before that of a source sent after.
    let after = JS_SHOUT.replace("name: \"shout\"", "name: \"after\"");
    let (status, report) = put_built(&server, "ada/after", ADA, "text/javascript", &after);
    assert_eq!(status, 201, "{report}");
    wait_for_build_event(&events, "ada/after", "built");
    let told: Vec<Value> = events.lock().unwrap()[builds_before..].to_vec();
    assert!(
        told.iter().all(|e| e["plugin"] == "ada/after"),
        "a refused request was built: {told:?}"
    );

    // The room's view keeps every outcome; another person sees no reason.
    let (_, room) = send(&server, "GET", "/publishes", Some(ADMIN), "", b"");
    let outcomes: Vec<(String, String)> = room["publishes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["plugin"].as_str().unwrap().into(),
                p["outcome"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        outcomes.contains(&("ada/wc".into(), "live".into())),
        "{room}"
    );
    assert!(
        outcomes.contains(&("ada/wc".into(), "build_failed".into())),
        "{room}"
    );
    let (_, seen_by_carol) = send(&server, "GET", "/publishes", Some(CAROL), "", b"");
    assert!(
        seen_by_carol["publishes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("reason").is_none()),
        "{seen_by_carol}"
    );
    // Build stages reached the feed, with the line for its owner's admin.
    let events = events.lock().unwrap().clone();
    let stages: Vec<&str> = events
        .iter()
        .filter(|e| e["plugin"] == "ada/parse")
        .filter_map(|e| e["stage"].as_str())
        .collect();
    assert_eq!(stages, ["queued", "building", "failed"], "{events:?}");
}

#[test]
fn a_build_past_its_limits_is_stopped_while_the_server_answers() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let server = builds_server(
        dir.path(),
        config.path(),
        &[
            "--build-timeout-secs",
            "60",
            "--build-memory-mib",
            "1024",
            "--max-plugins-per-person",
            "1",
        ],
    );
    let events = build_events(&server);
    // While an endless loop at import builds, everyone else is served.
    let (status, refused) = std::thread::scope(|s| {
        let looping = s.spawn(|| put_built(&server, "ada/loop", ADA, "text/x-python", PY_LOOP));
        let started = Instant::now();
        while !looping.is_finished() && started.elapsed() < Duration::from_secs(120) {
            assert_eq!(server.get("/health").status, 200);
            let echo = call(&server, "echo", json!({ "text": "calm" }));
            assert_eq!(echo["isError"], false, "{echo}");
            std::thread::sleep(Duration::from_millis(250));
        }
        looping.join().unwrap()
    });
    assert_eq!(status, 422, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("--build-timeout-secs"), "{refused}");
    assert_eq!(refused["error"]["details"]["limit"], "--build-timeout-secs");

    assert!(!dir.path().join("ada").join("loop.wasm").exists());

    // An import that allocates without end: stopped at the memory limit,
    // on a server whose clock is long enough that memory, not time, ends
    // it (componentize-py alone takes tens of seconds to start on a busy
    // machine).
    let roomy = tempfile::tempdir().unwrap();
    let server_2 = builds_server(
        roomy.path(),
        config.path(),
        &["--build-timeout-secs", "500", "--build-memory-mib", "1024"],
    );
    let (status, refused) = put_built(&server_2, "ada/hoard", ADA, "text/x-python", PY_HOARD);
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--build-memory-mib"),
        "{refused}"
    );
    assert!(!roomy.path().join("ada").join("hoard.wasm").exists());
    drop(server_2);

    // A namespace at its share (one plugin here) builds nothing more.
    let (status, report) = put_built(&server, "ada/first", ADA, "text/javascript", JS_SHOUT);
    assert_eq!(status, 201, "{report}");
    let (status, refused) = put_built(&server, "ada/second", ADA, "text/javascript", JS_SHOUT);
    assert_eq!(status, 409, "{refused}");
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e["plugin"] == "ada/second"),
        "a source over the share was built"
    );
}

#[test]
fn builds_queue_one_per_person_in_the_order_they_came() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let people: Vec<(String, String)> = (0..10)
        .map(|i| (format!("p{i}"), format!("person-{i}-secret-0123456789")))
        .collect();
    let tokens = config.path().join("tokens.toml");
    let mut text = format!("[[token]]\nname = \"bob\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n");
    for (name, secret) in &people {
        text.push_str(&format!(
            "[[token]]\nname = \"{name}\"\nsecret = \"{secret}\"\nrole = \"publisher\"\n"
        ));
    }
    std::fs::write(&tokens, text).unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python,js",
            "--max-builds",
            "2",
        ],
    );
    let events = build_events(&server);
    std::thread::scope(|s| {
        let put_from =
            |person: &(String, String), name: &str, kind: &'static str, source: String| {
                let (id, secret, server) =
                    (format!("{}/{name}", person.0), person.1.clone(), &server);
                s.spawn(move || put_built(server, &id, &secret, kind, &source))
            };

        // Ten people publish Python at once (each once the one before is in
        // line, so that their order is known): all live, built in the
        // order they came.
        let sent: Vec<_> = people
            .iter()
            .map(|person| {
                let handle = put_from(person, "wc", "text/x-python", PY_WORD_COUNT.to_string());
                wait_for_build_event(&events, &format!("{}/wc", person.0), "queued");
                handle
            })
            .collect();
        for (person, handle) in people.iter().zip(sent) {
            let (status, report) = handle.join().unwrap();
            assert_eq!(status, 201, "{}: {report}", person.0);
            let counted = call(
                &server,
                &format!("{}__word_count", person.0),
                json!({ "text": "a b" }),
            );
            assert_eq!(counted["structuredContent"]["words"], 2, "{counted}");
        }
        let started: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["stage"] == "building")
            .map(|e| e["person"].as_str().unwrap().to_string())
            .collect();
        let order: Vec<String> = people.iter().map(|(name, _)| name.clone()).collect();
        assert_eq!(
            started, order,
            "builds did not start in the order they came"
        );

        // One person's second source waits for their first; a third replaces
        // the second, which never runs.
        let ada = &people[0];
        let first = put_from(
            ada,
            "one",
            "text/x-python",
            PY_WORD_COUNT.replace("\"word_count\"", "\"word_total\""),
        );
        wait_for_build_event(&events, "p0/one", "building");
        let second = put_from(ada, "two", "text/javascript", JS_SHOUT.to_string());
        wait_for_build_event(&events, "p0/two", "queued");
        let third = put_from(ada, "three", "text/javascript", JS_SHOUT.to_string());
        let (status, replaced) = second.join().unwrap();
        assert_eq!(status, 409, "{replaced}");
        assert_eq!(replaced["error"]["code"], "BUILD_REPLACED", "{replaced}");
        let (status, report) = first.join().unwrap();
        assert_eq!(status, 201, "{report}");
        let (status, report) = third.join().unwrap();
        assert_eq!(status, 201, "{report}");
        let ran: Vec<Value> = events.lock().unwrap().clone();
        assert!(
            !ran.iter()
                .any(|e| e["plugin"] == "p0/two" && e["stage"] == "building"),
            "the replaced build ran: {ran:?}"
        );
    });
}

/// With `--require-approval`, a new plugin is its publisher's and the
/// admins' to hear of until it is approved, being built too: while bob's
/// new source builds, ada (whose set names bob's namespace) finds it
/// neither in the build line of `GET /publishes` nor in `/events`' `build`
/// and `line` events; the admin finds it in both.
#[test]
fn a_new_plugin_held_for_approval_is_absent_from_others_build_line() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"boss\"\nsecret = \"boss-secret-0123456789abcd\"\nrole = \"admin\"\n\
         [[token]]\nname = \"bob\"\nsecret = \"bob-secret-0123456789abcdef\"\nrole = \"publisher\"\n\
         [[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789abcdef\"\nrole = \"publisher\"\n\
         tools = [\"bob/*\", \"{self}/*\"]\n",
    )
    .unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python",
            "--require-approval",
        ],
    );
    let events = |token: &'static str| {
        let base = server.base.clone();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(120)))
                .build()
                .into();
            let mut response = agent
                .get(format!("{base}/events"))
                .header("Authorization", format!("Bearer {token}"))
                .call()
                .unwrap();
            let mut reader = std::io::BufReader::new(response.body_mut().as_reader());
            let mut seen = String::new();
            let mut line = String::new();
            while std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) > 0 {
                seen.push_str(&line);
                // The line emptied: the build ended.
                if line.contains("\"waiting\":0,\"building\":0") {
                    break;
                }
                line.clear();
            }
            seen
        })
    };
    let (ada_events, boss_events) = (
        events("ada-secret-0123456789abcdef"),
        events("boss-secret-0123456789abcd"),
    );
    let publisher = {
        let server_base = server.base.clone();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(600)))
                .build()
                .into();
            agent
                .put(format!("{server_base}/plugins/bob/new_thing"))
                .header("Authorization", "Bearer bob-secret-0123456789abcdef")
                .header("Content-Type", "text/x-python")
                .send(crate::dashboard::slow_source("bob").as_bytes())
                .unwrap()
                .status()
                .as_u16()
        })
    };
    // While it builds: the admin's line has it, ada's does not.
    let line_of = |token: &str| {
        let (status, publishes) = send(&server, "GET", "/publishes", Some(token), "", b"");
        assert_eq!(status, 200, "{publishes}");
        publishes["line"].clone()
    };
    server.wait_for("bob's build in the admin's line", |_| {
        line_of("boss-secret-0123456789abcd")["entries"]
            .as_array()
            .is_some_and(|entries| entries.iter().any(|e| e["plugin"] == "bob/new_thing"))
    });
    let ada_line = line_of("ada-secret-0123456789abcdef");
    assert_eq!(ada_line["entries"], json!([]), "{ada_line}");
    assert_eq!(
        ada_line["building"], 1,
        "the counts are everyone's: {ada_line}"
    );
    assert!(
        (200..=202).contains(&publisher.join().unwrap()),
        "bob's publish"
    );
    // Ada saw the line move, never the plugin; the admin saw both.
    let boss_saw = boss_events.join().unwrap();
    assert!(boss_saw.contains("bob/new_thing"), "{boss_saw}");
    let ada_saw = ada_events.join().unwrap();
    assert!(ada_saw.contains("event: line"), "{ada_saw}");
    assert!(!ada_saw.contains("bob/new_thing"), "{ada_saw}");
}
