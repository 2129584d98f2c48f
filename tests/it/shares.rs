//! Fair shares on a shared server, through the real binary: one person's
//! plugins, bytes and running calls are bounded, so that others' calls
//! still find slots and nobody fills the folder. A publish over a share
//! gets 409 `QUOTA_EXCEEDED` and writes nothing.

use serde_json::Value;

use crate::publish::{ADA, ADMIN, CAROL, contents, put, tokens_file};
use crate::support::{Server, example, fixture, padded, plugin_dir, variant_of};

fn call(server: &Server, tool: &str, arguments: &str) -> (u16, Value) {
    crate::support::call_as(server, tool, ADMIN, arguments)
}

#[test]
fn one_persons_plugins_bytes_and_calls_stay_within_their_share() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--max-calls",
            "8",
            "--max-calls-per-person",
            "2",
            "--max-plugins-per-person",
            "2",
            "--max-mib-per-person",
            "1",
            "--timeout-ms",
            "3000",
        ],
    );
    let hog = fixture("misbehave");
    for (path, token) in [("/plugins/ada/hog", ADA), ("/plugins/carol/hog", CAROL)] {
        let (status, body) = put(&server, path, Some(token), &hog);
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = put(&server, "/plugins/ada/echo", Some(ADA), &example("echo"));
    assert_eq!(status, 201, "{body}");

    // A third plugin is over ada's share of two: 409, nothing written.
    let before = contents(dir.path());
    let (status, body) = put(&server, "/plugins/ada/third", Some(ADA), &example("echo"));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "QUOTA_EXCEEDED", "{body}");
    assert_eq!(body["error"]["details"]["share"], "plugins", "{body}");
    assert_eq!(body["error"]["details"]["limit"], 2, "{body}");
    assert_eq!(
        contents(dir.path()),
        before,
        "a refused publish wrote something"
    );
    // Replacing one of the two is within the share.
    let (status, body) = put(
        &server,
        "/plugins/ada/echo",
        Some(ADA),
        &variant_of(&example("echo"), "again"),
    );
    assert_eq!(status, 200, "{body}");
    let before = contents(dir.path());
    // More than a MiB together is over carol's share of bytes, even for an
    // admin publishing into her namespace.
    let big = padded(&example("echo"), 1 << 20);
    let (status, body) = put(&server, "/plugins/carol/big", Some(ADMIN), &big);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["details"]["share"], "bytes", "{body}");
    assert_eq!(
        contents(dir.path()),
        before,
        "a refused publish wrote something"
    );

    // Ada and carol each start four slow calls: only two of each run, the
    // rest are BUSY, and the room (8 slots) still answers everyone else.
    let sleepers: Vec<_> = ["ada__sleep", "carol__sleep"]
        .into_iter()
        .flat_map(|tool| std::iter::repeat_n(tool, 4))
        .map(|tool| {
            let base = server.base.clone();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                let mut response = agent
                    .post(format!("{base}/tools/{tool}"))
                    .header("Authorization", format!("Bearer {ADMIN}"))
                    .header("Content-Type", "application/json")
                    .send("{}")
                    .unwrap();
                let body: Value =
                    serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
                (tool, response.status().as_u16(), body)
            })
        })
        .collect();
    // Two of ada's and two of carol's run; the rest are refused.
    server.wait_for("two sleepers of each to run", |s| {
        crate::support::calls_running(s, Some(ADMIN)) >= 4
    });
    let (status, body) = call(&server, "ada__counter", "{}");
    assert_eq!(status, 503, "ada's share is full: {body}");
    assert_eq!(body["error"]["details"]["namespace"], "ada", "{body}");
    assert_eq!(body["error"]["details"]["maxCalls"], 2, "{body}");
    for _ in 0..5 {
        let (status, body) = call(&server, "echo", r#"{"text":"hi"}"#);
        assert_eq!(status, 200, "the room still answers: {body}");
    }
    let mut outcomes: Vec<(&str, u16)> = sleepers
        .into_iter()
        .map(|sleeper| {
            let (tool, status, _) = sleeper.join().unwrap();
            (tool, status)
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [
            ("ada__sleep", 503),
            ("ada__sleep", 503),
            ("ada__sleep", 504),
            ("ada__sleep", 504),
            ("carol__sleep", 503),
            ("carol__sleep", 503),
            ("carol__sleep", 504),
            ("carol__sleep", 504),
        ]
    );
}
