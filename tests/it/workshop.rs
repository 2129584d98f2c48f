//! A workshop, simulated through the real binary: thirty attendees, each
//! with their own token, publish their own `word_count` (distinct bytes,
//! the same plugin name) at once and call it, while another client keeps
//! calling the instructor's tool over REST and an MCP session (the
//! official Python SDK) listens for `list_changed` and calls too. Nobody's
//! call fails, and all thirty tools serve side by side.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::publish::{ADMIN, put};
use crate::support::send;
use crate::support::{Server, example, plugin_dir, python_venv, repo_root, variant_of};

const ATTENDEES: usize = 30;

fn token_of(attendee: usize) -> String {
    format!("att{attendee:02}-secret-0123456789")
}

#[test]
fn thirty_attendees_publish_the_same_name_and_nobody_fails() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    let mut people = format!("[[token]]\nname = \"bob\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n");
    for attendee in 1..=ATTENDEES {
        people.push_str(&format!(
            "[[token]]\nname = \"att{attendee:02}\"\nsecret = \"{}\"\nrole = \"publisher\"\n",
            token_of(attendee)
        ));
    }
    std::fs::write(&tokens, people).unwrap();
    let server = Arc::new(Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap()],
    ));

    // The MCP session that listens, and calls, throughout.
    let mut listener = Command::new(python_venv().join("python"))
        .arg(repo_root().join("tests/clients/workshop_listener.py"))
        .arg(format!("{}/mcp", server.base))
        .arg(ADMIN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(listener.stdout.take().unwrap()).lines();
    assert_eq!(
        said.next().and_then(Result::ok).as_deref(),
        Some("ready"),
        "the MCP session did not open"
    );

    // The instructor's tool, called over REST throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let caller = {
        let (server, stop, calls, failed) =
            (server.clone(), stop.clone(), calls.clone(), failed.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let body = json!({ "text": "instructor" }).to_string();
                let (status, envelope) = send(
                    &server,
                    "POST",
                    "/tools/echo",
                    Some(ADMIN),
                    "application/json",
                    body.as_bytes(),
                );
                calls.fetch_add(1, Ordering::Relaxed);
                if status != 200 || envelope["content"][0]["text"] != "instructor" {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };

    // Thirty attendees at once: publish `word_count`, then call it.
    let attendees: Vec<_> = (1..=ATTENDEES)
        .map(|attendee| {
            let server = server.clone();
            std::thread::spawn(move || {
                let token = token_of(attendee);
                let wasm = variant_of(&example("echo"), &format!("attendee-{attendee}"));
                let (status, report) = put(
                    &server,
                    &format!("/plugins/att{attendee:02}/word_count"),
                    Some(&token),
                    &wasm,
                );
                assert_eq!(status, 201, "attendee {attendee}: {report}");
                let tool = format!("att{attendee:02}__echo");
                assert_eq!(report["tools"], json!([tool]), "{report}");
                let text = format!("hello from attendee {attendee}");
                let body = json!({ "text": text }).to_string();
                let (status, envelope) = crate::support::call_as(&server, &tool, &token, &body);
                assert_eq!(
                    (status, envelope["content"][0]["text"].as_str()),
                    (200, Some(text.as_str())),
                    "{envelope}"
                );
            })
        })
        .collect();
    let mut refused = Vec::new();
    for (attendee, handle) in attendees.into_iter().enumerate() {
        if let Err(panic) = handle.join() {
            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            refused.push(format!("attendee {}: {message}", attendee + 1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    caller.join().unwrap();
    drop(listener.stdin.take());
    let summary: Value =
        serde_json::from_str(&said.next().and_then(Result::ok).unwrap_or_else(|| {
            panic!("the MCP session said nothing: {:?}", {
                let mut err = String::new();
                let _ =
                    std::io::Read::read_to_string(&mut listener.stderr.take().unwrap(), &mut err);
                err
            })
        }))
        .unwrap();
    let _ = listener.wait();

    assert!(refused.is_empty(), "{refused:#?}");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "the instructor's REST calls"
    );
    assert!(calls.load(Ordering::Relaxed) > 0);
    assert_eq!(summary["failedCalls"], 0, "{summary}");
    assert!(summary["calls"].as_u64().unwrap() > 0, "{summary}");
    assert!(
        summary["listChanged"].as_u64().unwrap() >= 1,
        "the session heard of the new tools: {summary}"
    );
    let mut attendee_tools: Vec<&str> = summary["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| name.starts_with("att"))
        .collect();
    attendee_tools.sort();
    attendee_tools.dedup();
    assert_eq!(attendee_tools.len(), ATTENDEES, "{summary}");
    eprintln!(
        "workshop: {} REST calls by the instructor's client, MCP session {summary}",
        calls.load(Ordering::Relaxed)
    );
}
