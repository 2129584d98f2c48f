//! Capabilities and containment against the real binary: hostile plugins
//! end with their documented codes while others keep answering; policies
//! grant exactly what they name (env, config, directories, outbound HTTP,
//! limits) and nothing without them.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{
    Bystander, Server, assert_envelope, drop_in, example, fixture, padded, plugin_dir,
};
use serde_json::json;
use toolhost::registry::report::{PluginReport, PluginState};

/// Deadlines must be enforced: a contained call ends within its limit plus
/// this margin. A correctness bound (the limit holds), not a speed goal.
const MARGIN: Duration = Duration::from_secs(3);

fn code_of(response: &crate::support::Response) -> Option<String> {
    assert_envelope(response)
}

/// Once `running` calls run guest code, a `counter` call is refused as
/// busy after its wait for a slot.
fn counter_is_busy_once_running(server: &Server, running: u64) {
    server.wait_for("the slow calls to run", |s| {
        crate::support::calls_running(s, None) >= running
    });
    let busy = server.call("counter", json!({}));
    assert_eq!(
        (busy.status, code_of(&busy).as_deref()),
        (503, Some("BUSY")),
        "{}",
        busy.json
    );
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn hostile_plugins_are_contained_while_others_keep_answering() {
    let dir = plugin_dir(&[&example("echo"), &fixture("misbehave")]);
    let timeout_ms = 1000;
    let server = Server::process(dir.path(), &["--timeout-ms", "1000"]);

    // Another plugin answers throughout.
    let bystander = Bystander::start(&server);

    let cases: &[(&str, u16, &str)] = &[
        ("spin", 504, "TOOL_TIMEOUT"),
        ("sleep", 504, "TOOL_TIMEOUT"),
        ("hog", 500, "OUT_OF_MEMORY"),
        ("big_output", 500, "OUT_OF_MEMORY"),
        ("recurse", 500, "PLUGIN_TRAPPED"),
        ("panic", 500, "PLUGIN_TRAPPED"),
        ("invalid_json", 500, "INVALID_PLUGIN_OUTPUT"),
        ("invalid_utf8", 500, "INVALID_PLUGIN_OUTPUT"),
        ("breaks_schema", 500, "INVALID_PLUGIN_OUTPUT"),
        ("read_passwd", 422, "DENIED"),
        ("open_socket", 422, "DENIED"),
        ("http_outside", 422, "DENIED"),
    ];
    for (tool, status, code) in cases {
        let started = Instant::now();
        let response = server.call(tool, json!({}));
        let elapsed = started.elapsed();
        assert_eq!(
            (response.status, code_of(&response).as_deref()),
            (*status, Some(*code)),
            "{tool}: {}",
            response.json
        );
        assert!(
            elapsed < Duration::from_millis(timeout_ms) + MARGIN,
            "{tool} took {elapsed:?}"
        );
        // The next call to the same plugin starts clean.
        assert_eq!(
            server.call("counter", json!({})).json["content"][0]["text"],
            "1",
            "after {tool}"
        );
    }
    // A small plugin's instance is as fresh as can be: made for the call,
    // it has answered nothing before it (only a large plugin's spare is
    // warmed, `a_large_plugins_spare_instance_is_fresh_for_every_call`).
    let listings = server.call("listings", json!({}));
    assert_eq!(listings.json["content"][0]["text"], "0");
    assert_eq!(listings.json["meta"]["warm"], false, "{:?}", listings.json);
    let passwd = server.call("read_passwd", json!({}));
    assert!(
        !passwd.json.to_string().contains("root:"),
        "{}",
        passwd.json
    );
    let env = server.call("read_env", json!({}));
    assert_eq!(
        env.json["content"][0]["text"], "0 variables: ",
        "no host environment leaks in"
    );
    server.wait_for("the denial in the log", |s| {
        s.log().contains("outbound HTTP denied")
    });

    bystander.assert_unharmed();

    // Memory stays bounded: every hostile call's memory is gone.
    let rss = resident_kib(server.pid());
    assert!(
        rss < 512 * 1024,
        "toolhost holds {rss} KiB after the hostile calls"
    );
}

/// OpenWeatherMap's current-weather endpoint on 127.0.0.1, replaying the
/// documented responses in tests/fixtures/openweathermap: it knows Oslo,
/// wants the key "good-key" and metric units, and rate-limits Busytown.
/// Counts the requests it gets.
fn start_upstream() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let replay = |name: &str| {
        let folder = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/openweathermap"
        );
        std::fs::read_to_string(std::path::Path::new(folder).join(name)).unwrap()
    };
    let (oslo, bad_key, not_found, limited) = (
        replay("oslo.json"),
        replay("401.json"),
        replay("404.json"),
        replay("429.json"),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            counter.fetch_add(1, Ordering::Relaxed);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
            }
            // "GET /data/2.5/weather?q=Oslo&appid=good-key&units=metric HTTP/1.1"
            let target = request_line.split(' ').nth(1).unwrap_or_default();
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            let param = |name: &str| {
                query
                    .split('&')
                    .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
                    .unwrap_or_default()
            };
            let (status, body) = if path != "/data/2.5/weather" {
                ("404 Not Found", not_found.as_str())
            } else if param("appid") != "good-key" {
                ("401 Unauthorized", bad_key.as_str())
            } else if param("units") != "metric" {
                ("400 Bad Request", "{}")
            } else if param("q") == "Oslo" {
                ("200 OK", oslo.as_str())
            } else if param("q") == "Busytown" {
                ("429 Too Many Requests", limited.as_str())
            } else {
                ("404 Not Found", not_found.as_str())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (address, hits)
}

fn weather_policy(upstream: &str, allow: &str) -> String {
    format!(
        "[config]\nbase_url = \"http://{upstream}\"\napi_key = {{ from_host = \"TOOLHOST_TEST_WEATHER_KEY\" }}\n\n[http]\nallow = [\"{allow}\"]\n"
    )
}

#[test]
fn weather_reaches_its_upstream_only_through_its_allowlist() {
    let (upstream, hits) = start_upstream();
    let dir = plugin_dir(&[&example("weather")]);
    std::fs::write(
        dir.path().join("weather.toml"),
        weather_policy(&upstream, &format!("http://{upstream}")),
    )
    .unwrap();
    let server = Server::start_with_env(
        dir.path(),
        &[],
        &[("TOOLHOST_TEST_WEATHER_KEY", "good-key")],
    );

    let oslo = server.call("get_weather_forecast", json!({"location": "Oslo"}));
    assert_eq!(oslo.status, 200, "{}", oslo.json);
    assert_eq!(
        oslo.json["structuredContent"],
        json!({"temperature": 5.2, "conditions": "Overcast clouds", "humidity": 78.0, "wind_speed": 3.6})
    );
    assert_eq!(
        oslo.json["content"][0]["text"],
        "Temperature in Oslo: 5°C, Overcast clouds"
    );
    let code = |location: &str| {
        let response = server.call("get_weather_forecast", json!({"location": location}));
        (response.status, code_of(&response).unwrap_or_default())
    };
    assert_eq!(code("Atlantis"), (422, "LOCATION_NOT_FOUND".to_string()));
    assert_eq!(code("Busytown"), (422, "RATE_LIMITED".to_string()));

    // /plugins shows the grant, never the secret: not anywhere in the raw
    // JSON (a typed read would not see a field it does not know).
    let raw = server.plugin_json("weather").unwrap();
    let report: PluginReport = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(
        report.granted.unwrap_or_default()["config"],
        json!(["api_key", "base_url"])
    );
    assert!(!raw.to_string().contains("good-key"));

    // A policy with a wrong literal key: hot reloaded, and refused upstream.
    let wrong_key = weather_policy(&upstream, &format!("http://{upstream}")).replace(
        "{ from_host = \"TOOLHOST_TEST_WEATHER_KEY\" }",
        "\"wrong-key\"",
    );
    std::fs::write(dir.path().join("weather.toml"), wrong_key).unwrap();
    server.wait_for("the new policy", |_| code("Oslo").1 == "INVALID_API_KEY");

    // An allowlist without the upstream: the request never leaves.
    let before = hits.load(Ordering::Relaxed);
    std::fs::write(
        dir.path().join("weather.toml"),
        weather_policy(&upstream, "https://api.example.com"),
    )
    .unwrap();
    server.wait_for("the narrower policy", |s| {
        s.plugin("weather").unwrap().granted.unwrap_or_default()["httpAllow"]
            == json!(["https://api.example.com:443"])
    });
    let denied = server.call("get_weather_forecast", json!({"location": "Oslo"}));
    assert_eq!(
        code_of(&denied).as_deref(),
        Some("UPSTREAM_UNREACHABLE"),
        "{}",
        denied.json
    );
    assert!(
        denied.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HttpRequestDenied")
    );
    assert_eq!(
        hits.load(Ordering::Relaxed),
        before,
        "the upstream saw nothing"
    );

    // No policy at all: no upstream, no key, no network.
    std::fs::remove_file(dir.path().join("weather.toml")).unwrap();
    server.wait_for("the policy to go", |s| {
        s.plugin("weather").unwrap().granted.unwrap_or_default()["config"] == json!([])
    });
    assert_eq!(code("Oslo"), (422, "NOT_CONFIGURED".to_string()));
    assert_eq!(hits.load(Ordering::Relaxed), before);
}

#[test]
fn users_keep_their_data_in_the_granted_directory_only() {
    let dir = plugin_dir(&[&example("users")]);
    let data = dir.path().join("users-data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        "[[dirs]]\nhost = \"users-data\"\nguest = \"/data\"\nmode = \"read-write\"\n\n[limits]\nmax_concurrent = 1\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    let text = |tool: &str, args: serde_json::Value| {
        let response = server.call(tool, args);
        assert_eq!(response.status, 200, "{tool}: {}", response.json);
        response.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let created = text(
        "create_user",
        json!({"name": "Alice", "surname": "Johnson", "email": "alice@example.com"}),
    );
    assert!(
        created.starts_with("User successfully created:\n\n```\nUser ID: 1\nName: Alice\n"),
        "{created}"
    );
    text(
        "create_user",
        json!({"name": "Bob", "surname": "Stone", "email": "bob@example.com", "company": "Acme"}),
    );
    assert!(text("get_user", json!({"id": 2})).contains("Company: Acme"));
    assert!(text("search_users", json!({"query": "ALICE"})).starts_with("Found 1 users:"));
    assert_eq!(
        text("search_users", json!({"query": "zed"})),
        "No users found matching your criteria."
    );
    assert_eq!(
        text("delete_user", json!({"id": 1})),
        "User successfully deleted"
    );
    let missing = server.call("get_user", json!({"id": 1}));
    assert_eq!(code_of(&missing).as_deref(), Some("USER_NOT_FOUND"));

    // The data is where the policy put it, whole, and nowhere else.
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("users.json")).unwrap()).unwrap();
    assert_eq!(stored.as_array().unwrap().len(), 1);
    let leftovers: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from("users.json")],
        "no temporary file is left"
    );

    // Without the policy, the plugin reaches no file.
    std::fs::remove_file(dir.path().join("users.toml")).unwrap();
    server.wait_for("the policy to go", |s| {
        s.plugin("users").unwrap().granted.unwrap_or_default()["dirs"] == json!([])
    });
    let denied = server.call("get_user", json!({"id": 2}));
    assert_eq!(
        code_of(&denied).as_deref(),
        Some("STORE_UNAVAILABLE"),
        "{}",
        denied.json
    );
}

#[test]
fn policy_limits_bound_concurrency_and_fuel_and_bad_policies_are_rejected() {
    let dir = plugin_dir(&[&fixture("misbehave")]);
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\ntimeout_ms = 1500\nmax_concurrent = 1\nfuel = 50000000\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    let limits = &server
        .plugin("misbehave")
        .unwrap()
        .granted
        .unwrap_or_default()["limits"];
    assert_eq!(
        (
            limits["maxConcurrent"].as_u64(),
            limits["timeoutMs"].as_u64()
        ),
        (Some(1), Some(1500))
    );

    let spin = server.call("spin", json!({}));
    assert_eq!(
        code_of(&spin).as_deref(),
        Some("OUT_OF_FUEL"),
        "{}",
        spin.json
    );

    // Two calls at once to a plugin that takes one: the second is BUSY.
    // The call above lets go of its slot first (its store torn down, in
    // a debug build under load, after its answer): the wait below would
    // take that slot for the sleeper's.
    server.wait_for("the call above to let go of its slot", |s| {
        crate::support::calls_running(s, None) == 0
    });
    let sleeper = crate::support::call_in_background(&server, "sleep");
    // The sleeper holds the only slot for its 1.5 s deadline: the second
    // call goes once it runs, its 250 ms wait well inside that deadline.
    counter_is_busy_once_running(&server, 1);
    assert_eq!(
        sleeper.join().unwrap(),
        504,
        "the sleeper still ends at its own deadline"
    );
    assert_eq!(
        server.call("counter", json!({})).status,
        200,
        "a slot is free again"
    );

    // A policy that does not parse rejects the new version; the old serves.
    std::fs::write(dir.path().join("misbehave.toml"), "[limits\ntimeout_ms = 1").unwrap();
    server.wait_for("the rejection", |s| {
        s.plugin("misbehave").unwrap().state == PluginState::Rejected
    });
    let report = server.plugin("misbehave").unwrap();
    assert!(
        report.reason.as_deref().unwrap().contains("does not parse"),
        "{report:?}"
    );
    assert_eq!(server.call("counter", json!({})).status, 200);

    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[[dirs]]\nhost = \"nowhere\"\nguest = \"/x\"\n",
    )
    .unwrap();
    server.wait_for("the second rejection", |s| {
        s.plugin("misbehave")
            .unwrap()
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("nowhere")
    });

    // A drop of a new plugin with an unknown policy key is rejected outright.
    std::fs::write(dir.path().join("echo.toml"), "[network]\nanything = true\n").unwrap();
    drop_in(&example("echo"), dir.path(), "echo.wasm");
    server.wait_for("echo's rejection", |s| {
        s.plugin("echo")
            .is_some_and(|p| p.state == PluginState::Rejected)
    });
    assert!(
        server
            .plugin("echo")
            .unwrap()
            .reason
            .as_deref()
            .unwrap()
            .contains("unknown field")
    );
}

/// `reuse_instance = 3` (opt-in): an instance that served a call well
/// serves the next, up to three calls, so the `counter` tool's static
/// counts 1, 2, 3, then a fresh instance starts at 1 again. A call that
/// traps never hands its instance on; fuel and memory limits still apply
/// per call; `/plugins` shows the setting. Without the policy (the
/// default), every call counts 1 (`hostile_plugins_are_contained…`).
#[test]
fn an_instance_is_reused_only_when_the_policy_opts_in() {
    let dir = plugin_dir(&[&fixture("misbehave")]);
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\nreuse_instance = 3\ntimeout_ms = 2000\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    let count = || {
        server.call("counter", json!({})).json["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let counts: Vec<String> = (0..7).map(|_| count()).collect();
    assert_eq!(counts, ["1", "2", "3", "1", "2", "3", "1"]);
    // The accounting says which instance was kept: the one at "2".
    let kept = server.call("counter", json!({}));
    assert_eq!(kept.json["content"][0]["text"], "2");
    assert_eq!(kept.json["meta"]["warm"], true, "{:?}", kept.json);
    assert_eq!(count(), "3");
    // The kept instance (one call served) goes to the panicking call and
    // is dropped with it; the next call starts fresh.
    let panicked = server.call("panic", json!({}));
    assert_eq!(code_of(&panicked).as_deref(), Some("PLUGIN_TRAPPED"));
    assert_eq!(count(), "1");
    // A timeout ends the instance too, and the deadline holds per call.
    assert_eq!(count(), "2");
    let spun = server.call("spin", json!({}));
    assert_eq!(code_of(&spun).as_deref(), Some("TOOL_TIMEOUT"));
    assert_eq!(count(), "1");
    let limits = &server
        .plugin("misbehave")
        .unwrap()
        .granted
        .unwrap_or_default()["limits"];
    assert_eq!(limits["reuseInstance"], 3, "{limits}");
    // Zero is refused with the reason, like every other limit.
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\nreuse_instance = 0\n",
    )
    .unwrap();
    server.wait_for("the policy refused", |server| {
        server
            .plugin("misbehave")
            .is_some_and(|plugin| plugin.state == PluginState::Rejected || plugin.reason.is_some())
    });
}

/// A large plugin whose listing starts failing in a spare's warm-up keeps
/// answering: the warm-up's failure is logged once, and its spares are
/// only instantiated from then on (they answered no listing), still made
/// ahead and still fresh for each call.
#[test]
fn a_spare_whose_warm_up_fails_is_made_unwarmed_from_then_on() {
    let dir = tempfile::tempdir().unwrap();
    let flags = tempfile::tempdir().unwrap();
    // Padded apart from the other large misbehave test's copy: each has
    // its own entry in the shared compile cache, so neither finds the
    // other's optimised code.
    let wasm = std::fs::read(padded(&fixture("misbehave"), 3 * 512 * 1024 + 7)).unwrap();
    std::fs::write(dir.path().join("misbehave.wasm"), &wasm).unwrap();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        format!(
            "[limits]\ntimeout_ms = 2000\n[[dirs]]\nhost = {:?}\nguest = \"/flags\"\n",
            flags.path().display().to_string()
        ),
    )
    .unwrap();
    // A process, whose log the test reads.
    let server = Server::process(dir.path(), &[]);
    let listings = || {
        let answer = server.call("listings", json!({}));
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        (
            answer.json["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string(),
            answer.json["meta"]["warm"].as_bool().unwrap(),
        )
    };
    // The first call makes its own instance; within a few calls (each
    // once the spare after the one before is made), one finds a spare that
    // answered one listing before it.
    let warmed = (0..20).find(|_| {
        let seen = listings();
        crate::support::wait_for_spare(&server, None);
        seen == ("1".to_string(), true)
    });
    assert!(warmed.is_some(), "no call found a warmed spare");
    // From now on a listing fails. The next call may still find a spare
    // warmed before; the spare made after it fails its listing, which is
    // logged, and warming stops.
    std::fs::write(flags.path().join("fail-listing"), "").unwrap();
    listings();
    server.wait_for("the warm-up's failure in the log", |s| {
        s.log().contains("warming a spare instance failed")
    });
    // From then on no instance answered a listing, and calls are served
    // again by spares made ahead without one.
    let mut seen = Vec::new();
    while seen.len() < 20 && seen.last() != Some(&("0".to_string(), true)) {
        seen.push(listings());
        crate::support::wait_for_spare(&server, None);
    }
    assert!(
        seen.iter().all(|(listed, _)| listed == "0"),
        "an instance answered a listing after the failure: {seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&("0".to_string(), true)),
        "unwarmed spares serve: {seen:?}"
    );
    assert_eq!(
        server
            .log()
            .matches("warming a spare instance failed")
            .count(),
        1,
        "logged once: {}",
        server.log()
    );
}

/// A large plugin (1 MiB or more: compiled by the baseline compiler first)
/// is served from a spare instance made ahead of each call
/// (`runtime/warm.rs`) and warmed by answering `list-tools`, and every
/// call still gets an instance no call has used: `counter` counts 1 every
/// time, whether the calls come apart (a spare each) or right after each other; a trap or a timeout leaves
/// nothing behind; and a policy changed meanwhile reaches the next call,
/// not a spare made under the old one, and the new version's first call
/// finds a spare made as it loaded.
#[test]
fn a_large_plugins_spare_instance_is_fresh_for_every_call() {
    let dir = tempfile::tempdir().unwrap();
    // The misbehave fixture with a 1.5 MiB custom section appended: the
    // same code, past the large-plugin threshold.
    let wasm = std::fs::read(padded(&fixture("misbehave"), 3 * 512 * 1024)).unwrap();
    std::fs::write(dir.path().join("misbehave.wasm"), &wasm).unwrap();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\ntimeout_ms = 2000\n",
    )
    .unwrap();
    // A compile cache of its own: the shared one keeps the optimised code
    // of an earlier run, which a large plugin would then start on.
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--cache-dir", cache.path().to_str().unwrap()]);
    assert_eq!(
        server.plugin("misbehave").unwrap().compiler,
        Some(toolhost::runtime::Tier::Baseline),
        "a large plugin starts on baseline code"
    );
    let count = || {
        let answer = server.call("counter", json!({}));
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        answer.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let spares_used =
        || crate::metrics::metric_value(&server, "toolhost_spare_instances_used_total");
    // Calls that come apart: each once the spare after the one before is
    // made.
    let spare_made = || crate::support::wait_for_spare(&server, None);
    for _ in 0..4 {
        assert_eq!(count(), "1");
        spare_made();
    }
    // Calls that leave time for it are served by a spare, warmed by one
    // `list-tools` before the call (the first call of all made its own
    // instance and found none).
    assert!(spares_used() >= 2, "spares used: {}", spares_used());
    let listings = server.call("listings", json!({}));
    assert_eq!(
        listings.json["content"][0]["text"], "1",
        "{:?}",
        listings.json
    );
    assert_eq!(listings.json["meta"]["warm"], true, "{:?}", listings.json);
    spare_made();
    let quick: Vec<String> = (0..6).map(|_| count()).collect();
    assert_eq!(quick, ["1"; 6]);
    spare_made();
    let panicked = server.call("panic", json!({}));
    assert_eq!(code_of(&panicked).as_deref(), Some("PLUGIN_TRAPPED"));
    assert_eq!(count(), "1");
    spare_made();
    let spun = server.call("spin", json!({}));
    assert_eq!(code_of(&spun).as_deref(), Some("TOOL_TIMEOUT"));
    assert_eq!(count(), "1");
    // A spare is waiting now; the policy changes under it.
    spare_made();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\ntimeout_ms = 2000\n[env]\nSPARE_CHECK = \"new\"\n",
    )
    .unwrap();
    server.wait_for("the new policy", |s| {
        s.plugin("misbehave")
            .and_then(|p| p.granted)
            .is_some_and(|granted| granted.to_string().contains("SPARE_CHECK"))
    });
    // A version loaded alone into the running server has its first spare
    // made as it starts serving: its very first call finds it, warmed.
    spare_made();
    let first = server.call("listings", json!({}));
    assert_eq!(first.json["content"][0]["text"], "1", "{:?}", first.json);
    assert_eq!(first.json["meta"]["warm"], true, "{:?}", first.json);
    spare_made();
    let env = server.call("read_env", json!({}));
    assert!(
        env.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SPARE_CHECK=new"),
        "{:?}",
        env.json
    );
    assert_eq!(count(), "1");
}

/// A call that took a large plugin's spare before it was scheduled (so
/// that it can start where its caller is), but was then refused as busy
/// (every host slot taken for its whole wait), gives the spare back: it is
/// still held, and the next call finds it instead of making its own.
#[test]
fn a_call_refused_as_busy_gives_its_spare_back() {
    let dir = tempfile::tempdir().unwrap();
    // Padded apart from the other large misbehave tests' copies (each has
    // its own entry in the shared compile cache).
    let wasm = std::fs::read(padded(&fixture("misbehave"), 3 * 512 * 1024 + 11)).unwrap();
    std::fs::write(dir.path().join("misbehave.wasm"), &wasm).unwrap();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        "[limits]\ntimeout_ms = 2000\n",
    )
    .unwrap();
    // Small copies in two namespaces (tools `ada__*`, `bob__*`) hold the
    // host's two slots with their `sleep` until its deadline. (With two
    // slots, spares may hold one instance between calls.)
    for person in ["ada", "bob"] {
        std::fs::create_dir(dir.path().join(person)).unwrap();
        std::fs::copy(
            fixture("misbehave"),
            dir.path().join(person).join("misbehave.wasm"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join(person).join("misbehave.toml"),
            "[limits]\ntimeout_ms = 1500\n",
        )
        .unwrap();
    }
    let server = Server::start(dir.path(), &["--max-calls", "2"]);
    let held = |s: &Server| crate::metrics::metric_value(s, "toolhost_instances_held");
    // The first call makes its own instance; the spare is made after it.
    // Made, not only being made: one still being made when the sleepers
    // hold both slots could not get one, and would go.
    assert_eq!(server.call("counter", json!({})).status, 200);
    crate::support::wait_for_spare(&server, None);
    let sleepers =
        ["ada__sleep", "bob__sleep"].map(|tool| crate::support::call_in_background(&server, tool));
    counter_is_busy_once_running(&server, 2);
    assert_eq!(held(&server), 1, "the refused call gave its spare back");
    for sleeper in sleepers {
        assert_eq!(sleeper.join().unwrap(), 504);
    }
    let next = server.call("counter", json!({}));
    assert_eq!(next.status, 200, "{:?}", next.json);
    assert_eq!(next.json["content"][0]["text"], "1", "{:?}", next.json);
    assert_eq!(
        next.json["meta"]["warm"], true,
        "the next call found the spare: {:?}",
        next.json
    );
}
