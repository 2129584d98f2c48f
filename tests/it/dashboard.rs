//! The dashboard in a real browser: Debian's `chromium`, headless, driven
//! by puppeteer-core (`tests/clients/dashboard.mjs`) against the real
//! binary. Screenshots go to `target/screenshots/`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Server, example, plugin_dir, repo_root, variant_of};

/// Debian's chromium (`make test` installs it).
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.exists(),
        "chromium is missing: `make test` installs it (apt-get install chromium)"
    );
    path
}

/// Runs the browser script in `mode`; what it saw.
fn browse(mode: &str, server: &Server, extra: &serde_json::Value) -> Value {
    let modules = crate::support::node_modules();
    let script = modules.parent().unwrap().join("dashboard.mjs");
    std::fs::copy(repo_root().join("tests/clients/dashboard.mjs"), &script).unwrap();
    let shots = repo_root().join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), extra.to_string()).unwrap();
    let output = Command::new(crate::support::node22())
        .arg(&script)
        .arg(mode)
        .arg(&server.base)
        .arg(chromium())
        .arg(&shots)
        .arg(config.path())
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser script printed no report:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert!(
        output.status.success() && seen.get("failed").is_none(),
        "in the browser: {seen:#}\nserver log:\n{}",
        server.log()
    );
    seen
}

fn texts(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_dashboard_lists_tries_and_publishes_in_chromium() {
    let dir = plugin_dir(&[&example("echo")]);
    let payload = r#"<img src=x onerror="window.__xss=1">"#;
    crate::support::components::write_plugin(
        &crate::support::components::plugin_described(payload),
        dir.path(),
        "hostile.wasm",
    );
    let server = Server::start(dir.path(), &[]);
    let files = json!({
        "folder": dir.path(),
        "math": example("math"),
        "conformance": example("conformance"),
        "weather": example("weather"),
        "echoVariant": variant_of(&example("echo"), "dashboard"),
    });
    let seen = browse("open", &server, &files);

    assert!(texts(&seen["listed"]).contains(&"echo"), "{seen}");
    assert_eq!(seen["payloadShownAsText"], payload, "{seen}");
    assert_eq!(seen["imagesInPage"], 0, "{seen}");
    assert_eq!(seen["payloadRan"], false, "{seen}");
    assert_eq!(seen["signInShownOnOpenServer"], false, "{seen}");
    assert!(
        seen["timings"]["dropToListedMs"].as_u64().unwrap() <= 2000,
        "{seen}"
    );
    assert_eq!(texts(&seen["filtered"]), ["divide"], "{seen}");
    let structured = seen["structuredPre"].as_str().unwrap();
    assert!(structured.contains("\"result\": 5"), "{seen}");
    assert_eq!(seen["businessCode"], "DIVISION_BY_ZERO", "{seen}");
    assert_eq!(seen["invalidCode"], "INVALID_ARGUMENTS", "{seen}");
    assert!(
        seen["invalidDetails"]
            .as_str()
            .unwrap()
            .contains(r#"\"b\" is a required property"#),
        "{seen}"
    );
    assert!(
        seen["echo"]
            .as_str()
            .unwrap()
            .contains("hello from chromium"),
        "{seen}"
    );
    // The call's cost, from the answer's `meta`.
    let echo = seen["echo"].as_str().unwrap();
    assert!(
        echo.contains("guest CPU") && echo.contains("fuel") && echo.contains("code"),
        "{seen}"
    );
    let rejected = seen["rejectedRow"].as_str().unwrap();
    assert!(
        rejected.contains("rejected") && rejected.contains("WebAssembly"),
        "{seen}"
    );
    assert!(
        seen["publishedByInput"]
            .as_str()
            .unwrap()
            .contains("Live in"),
        "{seen}"
    );
    assert!(
        seen["publishedByDrop"]
            .as_str()
            .unwrap()
            .contains("weather"),
        "{seen}"
    );
    let refused = seen["refusedDrop"].as_str().unwrap();
    assert!(
        refused.contains("PLUGIN_REJECTED") && refused.contains("echo"),
        "{seen}"
    );
    // Everyone's page keeps the refused upload and its reason in view.
    let rejections = seen["rejections"].as_str().unwrap();
    assert!(
        rejections.contains("echo_again") && rejections.contains("already provided"),
        "{seen}"
    );
    assert!(
        texts(&seen["listedAfter"]).contains(&"get_weather_forecast"),
        "{seen}"
    );
    let reached = texts(&seen["keyboardReached"]);
    assert!(reached.contains(&"filter"), "keyboard: {reached:?}");
    assert!(
        reached.iter().any(|r| r.starts_with("Try ")),
        "keyboard: {reached:?}"
    );
    assert_eq!(seen["unlabelled"], json!([]), "{seen}");
    // The activity panel counts what was called, by outcome.
    let divide = seen["activity"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row[0] == "divide")
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(divide[1], "1", "{seen}");
    // A plugin's own codes count as one outcome (no plugin makes up labels).
    assert_eq!(divide[2], "TOOL_ERROR 1", "{seen}");
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
    // The only refused requests are the ones the test made on purpose.
    let mut refused = texts(&seen["refusedLoads"]);
    refused.sort();
    assert_eq!(
        refused,
        [
            "/plugins/echo_again 422",
            "/tools/add 422",
            "/tools/divide 422"
        ],
        "{seen}"
    );
}

#[test]
fn the_dashboard_shows_each_role_what_it_may_do() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let seen = browse(
        "roles",
        &server,
        &json!({ "caller": crate::publish::DAVE, "publisher": crate::publish::ADA }),
    );
    assert_eq!(seen["publishHiddenSignedOut"], true, "{seen}");
    // Signed out, the page says why it lists nothing, not "no tools".
    assert_eq!(
        seen["toolsSignedOut"], "Sign in to see the tools.",
        "{seen}"
    );
    // Signed in, the token field gives way to "Sign out".
    assert_eq!(seen["tokenFieldShownSignedIn"], false, "{seen}");
    assert!(
        seen["caller"].as_str().unwrap().contains("dave (caller)"),
        "{seen}"
    );
    assert_eq!(seen["publishHiddenForCaller"], true, "{seen}");
    assert!(
        seen["publisher"]
            .as_str()
            .unwrap()
            .contains("ada (publisher)"),
        "{seen}"
    );
    assert_eq!(seen["publishHiddenForPublisher"], false, "{seen}");
    assert!(
        seen["publishWhere"]
            .as_str()
            .unwrap()
            .contains("namespace ada"),
        "{seen}"
    );
    assert_eq!(seen["tokenInSession"], true, "{seen}");
    assert_eq!(seen["tokenInLocal"], false, "{seen}");
    // A 401 from /me is expected while signed out; nothing else.
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
    // Signed out, /me answers 401 (on opening, and after signing out);
    // nothing else is refused.
    assert_eq!(
        texts(&seen["refusedLoads"]),
        ["/me 401", "/me 401"],
        "{seen}"
    );
}
