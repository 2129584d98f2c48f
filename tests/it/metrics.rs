//! Operations, through the real binary:
//! - `GET /metrics` scraped by a real Prometheus (Debian's `prometheus`,
//!   started here on loopback): a PromQL query through its HTTP API
//!   returns exactly the calls this test made, by tool and outcome, and a
//!   name that is not a tool never becomes a label value. The route obeys
//!   the tokens file: a scrape-only `metrics` token reads it and nothing
//!   else.
//! - Per-call accounting: every REST answer's `meta` and every MCP
//!   `tools/call` result's `_meta["toolhost/call"]` says what the call
//!   cost, in the shape `/openapi.json` declares.
//! - `--log-format json`: one JSON object per line; one line per call at
//!   `debug` (with the call's fields), none at the default level.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, example, plugin_dir, send};

const SCRAPER: &str = "scraper-secret-0123456789";
const DAVE: &str = "dave-secret-0123456789";

/// Prometheus, killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Scrapes `target` (host:port) every second with `token`.
    fn start(target: &str, token: &str) -> Prometheus {
        let data = tempfile::tempdir().unwrap();
        let token_file = data.path().join("token");
        std::fs::write(&token_file, token).unwrap();
        let config = data.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: toolhost\n    \
                 authorization:\n      type: Bearer\n      credentials_file: {}\n    \
                 static_configs:\n      - targets: ['{target}']\n",
                token_file.display()
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(data.path().join("log")).unwrap(),
            ))
            .spawn()
            .expect("running prometheus (make test installs Debian's package)");
        Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _data: data,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._data.path().join("log")).unwrap_or_default()
    }

    /// The result vector of an instant PromQL query, or `None` while
    /// Prometheus is not answering yet.
    fn query(&self, promql: &str) -> Option<Vec<Value>> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        let mut response = agent
            .get(format!("{}/api/v1/query", self.base))
            .query("query", promql)
            .call()
            .ok()?;
        let body: Value = serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()?;
        body["data"]["result"].as_array().cloned()
    }
}

/// `GET /metrics` as text, with `token`.
pub(crate) fn metrics_text(server: &Server, token: Option<&str>) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(format!("{}/metrics", server.base));
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

/// The value of an unlabelled counter or gauge on an open server's
/// `/metrics`.
pub(crate) fn metric_value(server: &Server, name: &str) -> u64 {
    let (_, metrics) = metrics_text(server, None);
    let prefix = format!("{name} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

fn write_tokens(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("tokens.toml");
    std::fs::write(
        &file,
        format!(
            "[[token]]\nname = \"prometheus\"\nsecret = \"{SCRAPER}\"\nrole = \"metrics\"\n\n\
             [[token]]\nname = \"dave\"\nsecret = \"{DAVE}\"\nrole = \"caller\"\n"
        ),
    )
    .unwrap();
    file
}

#[test]
fn a_real_prometheus_counts_exactly_the_calls_made_by_tool_and_outcome() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let tokens_dir = tempfile::tempdir().unwrap();
    let tokens = write_tokens(tokens_dir.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);

    // Who may read it: the scrape token and any role above it; nobody
    // without a token. The scrape token may do nothing else.
    assert_eq!(metrics_text(&server, None).0, 401);
    let (status, text) = metrics_text(&server, Some(SCRAPER));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("toolhost_build_info{version="), "{text}");
    assert_eq!(metrics_text(&server, Some(DAVE)).0, 200);
    let (status, _) = send(&server, "GET", "/tools", Some(SCRAPER), "", b"");
    assert_eq!(status, 403);
    let (status, _) = send(
        &server,
        "POST",
        "/tools/echo",
        Some(SCRAPER),
        "application/json",
        br#"{"text":"no"}"#,
    );
    assert_eq!(status, 403);

    // The calls, each through REST with dave's token.
    let calls: &[(&str, Value, usize)] = &[
        ("echo", json!({"text": "hi"}), 3),
        ("add", json!({"a": 1, "b": 2}), 2),
        ("divide", json!({"a": 1, "b": 0}), 1),
        ("add", json!({"a": "one"}), 2),
        ("no_such_tool", json!({}), 2),
    ];
    for (tool, arguments, times) in calls {
        for _ in 0..*times {
            crate::support::call_as(&server, tool, DAVE, &arguments.to_string());
        }
    }
    let expected: BTreeMap<(String, String), u64> = [
        (("echo", "ok"), 3),
        (("add", "ok"), 2),
        // A plugin's own codes count as one: no plugin makes up labels.
        (("divide", "TOOL_ERROR"), 1),
        (("add", "INVALID_ARGUMENTS"), 2),
        (("", "TOOL_NOT_FOUND"), 2),
    ]
    .into_iter()
    .map(|((tool, outcome), n)| ((tool.to_string(), outcome.to_string()), n))
    .collect();

    // A file the loader refuses: a rejection, and a plugin in that state.
    std::fs::write(dir.path().join(".broken.tmp"), "not a component").unwrap();
    std::fs::rename(
        dir.path().join(".broken.tmp"),
        dir.path().join("broken.wasm"),
    )
    .unwrap();
    server.wait_for("broken.wasm rejected", |server| {
        let (_, report) = send(server, "GET", "/plugins/broken", Some(DAVE), "", b"");
        report["state"] == "rejected" && report.get("compiling").is_none()
    });

    let target = server.base.trim_start_matches("http://").to_string();
    let prometheus = Prometheus::start(&target, SCRAPER);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = BTreeMap::new();
    while Instant::now() < deadline {
        if let Some(result) =
            prometheus.query("sum by (tool, outcome) (toolhost_calls_total{job=\"toolhost\"})")
        {
            seen = result
                .iter()
                .map(|series| {
                    let label =
                        |name: &str| series["metric"][name].as_str().unwrap_or("").to_string();
                    let value: u64 = series["value"][1].as_str().unwrap().parse().unwrap();
                    ((label("tool"), label("outcome")), value)
                })
                .collect();
            if seen == expected {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        seen,
        expected,
        "Prometheus log:\n{}\nserver log:\n{}",
        prometheus.log(),
        server.log()
    );

    // The histogram counted every call too, and the scrape itself is up.
    let count = prometheus
        .query("sum(toolhost_call_duration_seconds_count)")
        .unwrap();
    assert_eq!(count[0]["value"][1], "10", "{count:?}");
    let up = prometheus.query("up{job=\"toolhost\"}").unwrap();
    assert_eq!(up[0]["value"][1], "1", "{up:?}");
    // A name that is not a tool is never a label value.
    let typo = prometheus
        .query("count({__name__=~\"toolhost_.*\", tool=\"no_such_tool\"})")
        .unwrap();
    assert!(typo.is_empty(), "{typo:?}");
    // What the calls used: fuel and CPU for echo's three, a peak memory.
    let fuel = prometheus
        .query("sum(toolhost_call_fuel_total{tool=\"echo\"}) > 0")
        .unwrap();
    assert_eq!(fuel.len(), 1, "{fuel:?}");
    let peak = prometheus
        .query("max(toolhost_call_peak_memory_bytes{tool=\"echo\"}) >= 65536")
        .unwrap();
    assert_eq!(peak.len(), 1, "{peak:?}");
    // The plugins, their loads and the server's own numbers.
    let value = |promql: &str| -> String {
        let result = prometheus.query(promql).unwrap();
        assert_eq!(result.len(), 1, "{promql}: {result:?}");
        result[0]["value"][1].as_str().unwrap().to_string()
    };
    for (promql, expected) in [
        ("sum(toolhost_plugin_state{state=\"loaded\"})", "2"),
        (
            "toolhost_plugin_state{plugin=\"broken\",state=\"rejected\"}",
            "1",
        ),
        ("toolhost_plugin_rejections_total{plugin=\"broken\"}", "1"),
        ("toolhost_load_events_total{kind=\"loaded\"}", "2"),
        ("toolhost_load_events_total{kind=\"rejected\"}", "1"),
        (
            "sum(toolhost_plugin_cache_hits_total + toolhost_plugin_cache_misses_total)",
            "2",
        ),
        (
            "count(toolhost_plugin_compile_seconds{phase=\"load\"} > 0)",
            "2",
        ),
        ("toolhost_executor_slots", "64"),
        ("toolhost_executor_slots_in_use", "0"),
        ("toolhost_executor_calls_waiting", "0"),
        ("toolhost_busy_refusals_total", "0"),
        ("toolhost_tools", "4"),
        ("toolhost_mcp_sessions", "0"),
    ] {
        assert_eq!(value(promql), expected, "{promql}");
    }
    // Prometheus's own scrape connection, at least.
    assert!(!value("toolhost_http_connections >= 1").is_empty());
}

/// What every call returns about its cost, over REST and MCP alike, in
/// the shape the OpenAPI document declares.
#[test]
fn every_call_result_carries_its_cost_over_rest_and_mcp() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = Server::start(dir.path(), &[]);
    let openapi = server.get("/openapi.json").json;
    let schema = openapi["components"]["schemas"]["CallMeta"].clone();
    assert!(schema.is_object(), "no CallMeta schema: {openapi}");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let check = |meta: &Value, ran: bool| {
        let problems: Vec<String> = validator.iter_errors(meta).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "{meta}: {problems:?}");
        assert!(meta["durationMs"].as_f64().unwrap() > 0.0, "{meta}");
        assert_eq!(meta["warm"], false, "{meta}");
        if ran {
            assert!(meta["cpuMs"].as_f64().unwrap() > 0.0, "{meta}");
            assert!(meta["fuel"].as_u64().unwrap() > 0, "{meta}");
            assert!(meta["peakMemoryBytes"].as_u64().unwrap() >= 65536, "{meta}");
            assert!(
                ["baseline", "optimised"].contains(&meta["code"].as_str().unwrap()),
                "{meta}"
            );
        } else {
            for key in ["cpuMs", "fuel", "peakMemoryBytes", "code"] {
                assert!(
                    meta.get(key).is_none(),
                    "{key} without plugin code running: {meta}"
                );
            }
        }
    };

    // REST: a success, a business error, and arguments refused before any
    // plugin code ran.
    let ok = server.call("echo", json!({"text": "cost?"}));
    check(&ok.json["meta"], true);
    let business = server.call("divide", json!({"a": 1, "b": 0}));
    assert_eq!(business.json["error"]["code"], "DIVISION_BY_ZERO");
    check(&business.json["meta"], true);
    let refused = server.call("add", json!({"a": "one"}));
    assert_eq!(refused.json["error"]["code"], "INVALID_ARGUMENTS");
    check(&refused.json["meta"], false);

    // A bigger answer costs more fuel than a small one of the same tool.
    let long = server.call("echo", json!({"text": "x".repeat(100_000)}));
    assert!(
        long.json["meta"]["fuel"].as_u64() > ok.json["meta"]["fuel"].as_u64(),
        "{} vs {}",
        long.json["meta"],
        ok.json["meta"]
    );

    // MCP: the same object in the result's _meta.
    let (status, _, body) = crate::mcp::rpc(
        &server,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "over mcp"}}}),
        &[],
    );
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    check(&answer["result"]["_meta"]["toolhost/call"], true);
}

/// `--log-format json` writes one object per line; a call is logged once
/// at debug (with what it cost), and not at all at the default level.
#[test]
fn json_logs_have_one_line_per_call_at_debug_and_none_by_default() {
    let dir = plugin_dir(&[&example("echo")]);
    let lines_of = |server: &Server| -> Vec<Value> {
        server
            .log()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
            .collect()
    };
    let call_lines = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|line| line["fields"]["message"] == "call ended")
            .cloned()
            .collect()
    };

    let quiet = Server::process(dir.path(), &["--log-format", "json"]);
    quiet.call("echo", json!({"text": "one"}));
    quiet.call("echo", json!({"text": "two"}));
    let lines = lines_of(&quiet);
    assert!(
        lines.iter().any(|line| line["level"] == "INFO"),
        "{lines:?}"
    );
    assert!(call_lines(&lines).is_empty(), "{lines:?}");
    drop(quiet);

    let chatty = Server::start_with_env(
        dir.path(),
        &["--log-format", "json"],
        &[("TOOLHOST_LOG", "info,toolhost::call=debug")],
    );
    chatty.call("echo", json!({"text": "one"}));
    chatty.call("nope", json!({}));
    chatty.wait_for("two call lines", |server| {
        server.log().matches("call ended").count() >= 2
    });
    let calls = call_lines(&lines_of(&chatty));
    assert_eq!(calls.len(), 2, "{calls:?}");
    let echo = &calls[0]["span"];
    assert_eq!(
        (
            &echo["tool"],
            &echo["plugin"],
            &echo["outcome"],
            &echo["front"]
        ),
        (&json!("echo"), &json!("echo"), &json!("ok"), &json!("rest")),
        "{echo}"
    );
    assert!(echo["fuel"].as_u64().unwrap() > 0, "{echo}");
    assert_eq!(calls[1]["span"]["outcome"], "TOOL_NOT_FOUND", "{calls:?}");
}

/// A client that does not ask for OpenMetrics gets the classic text
/// format, which the official Python client's parser reads with every
/// counter typed (OpenMetrics names a counter's family without `_total`,
/// and a classic parser then reads its samples as untyped).
#[test]
fn metrics_answer_the_classic_text_format_unless_openmetrics_is_asked_for() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    server.call("echo", json!({"text": "count me"}));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let get = |accept: Option<&str>| {
        let mut request = agent.get(format!("{}/metrics", server.base));
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        let mut response = request.call().unwrap();
        let kind = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        (kind, response.body_mut().read_to_string().unwrap())
    };
    let (kind, open) = get(Some(
        "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
    ));
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    assert!(open.ends_with("# EOF\n"), "{open}");
    for accept in [Some("text/plain"), None] {
        let (kind, text) = get(accept);
        assert_eq!(
            kind, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        let script = "import json, sys\n\
            from prometheus_client.parser import text_string_to_metric_families\n\
            kinds = {}\n\
            for family in text_string_to_metric_families(sys.stdin.read()):\n\
            \x20   for sample in family.samples:\n\
            \x20       kinds[sample.name] = family.type\n\
            print(json.dumps(kinds))\n";
        let mut child = std::process::Command::new(crate::support::python_venv().join("python"))
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "the parser failed on:\n{text}");
        let kinds: Value = serde_json::from_slice(&output.stdout).unwrap();
        for counter in [
            "toolhost_calls_total",
            "toolhost_load_events_total",
            "toolhost_busy_refusals_total",
        ] {
            assert_eq!(kinds[counter], "counter", "{counter}: {kinds}");
        }
        assert_eq!(kinds["toolhost_build_info"], "gauge", "{kinds}");
        assert_eq!(
            kinds["toolhost_call_duration_seconds_bucket"], "histogram",
            "{kinds}"
        );
    }
}
