//! `GET /metrics` scraped by a real Prometheus (Debian's `prometheus`,
//! started here on loopback): a PromQL query through its HTTP API returns
//! exactly the calls this test made, by tool and outcome, and a name that
//! is not a tool never becomes a label value. The route obeys the tokens
//! file: a scrape-only `metrics` token reads it and nothing else.

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
fn metrics_text(server: &Server, token: Option<&str>) -> (u16, String) {
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
            send(
                &server,
                "POST",
                &format!("/tools/{tool}"),
                Some(DAVE),
                "application/json",
                arguments.to_string().as_bytes(),
            );
        }
    }
    let expected: BTreeMap<(String, String), u64> = [
        (("echo", "ok"), 3),
        (("add", "ok"), 2),
        (("divide", "DIVISION_BY_ZERO"), 1),
        (("add", "INVALID_ARGUMENTS"), 2),
        (("", "TOOL_NOT_FOUND"), 2),
    ]
    .into_iter()
    .map(|((tool, outcome), n)| ((tool.to_string(), outcome.to_string()), n))
    .collect();

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
    let loaded = prometheus
        .query("sum(toolhost_plugin_state{state=\"loaded\"})")
        .unwrap();
    assert_eq!(loaded[0]["value"][1], "2", "{loaded:?}");
}
