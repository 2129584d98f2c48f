//! The REST front: manifest, envelopes, every status code, OpenAPI;
//! through the real binary, or a host served in process where only the
//! HTTP answers are under test.

use crate::support::{Server, assert_envelope, example, fixture, plugin_dir, repo_root};
use serde_json::Value;
use serde_json::json;

fn examples_server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = if extra.is_empty() {
        Server::in_process(dir.path())
    } else {
        Server::start(dir.path(), extra)
    };
    (dir, server)
}

#[test]
fn manifest_lists_tools_exactly_as_declared() {
    let (_dir, server) = examples_server(&[]);
    let tools = server.get("/tools");
    assert_eq!(tools.status, 200);
    assert_eq!(server.tool_names(), ["add", "divide", "echo", "stats"]);
    let echo = tools
        .json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(echo["endpoint"], "/tools/echo");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["title"], "Echo");
    assert_eq!(
        echo["inputSchema"],
        json!({
            "type": "object",
            "properties": { "text": { "type": "string", "description": "What to echo back" } },
            "required": ["text"],
            "additionalProperties": false
        })
    );
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    let add = tools
        .json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(add["outputSchema"]["required"], json!(["result"]));

    let health = server.get("/health");
    assert_eq!(
        (health.status, health.json["tools"].as_u64()),
        (200, Some(4))
    );
}

#[test]
fn successful_calls_answer_with_the_envelope() {
    let (_dir, server) = examples_server(&[]);
    let echo = server.call("echo", json!({"text": "hello"}));
    assert_eq!(echo.status, 200);
    assert_eq!(assert_envelope(&echo), None);
    let mut shape = echo.json.clone();
    let object = shape.as_object_mut().unwrap();
    assert_eq!(object.remove("success"), Some(json!(true)));
    assert!(object.remove("timestamp").is_some());
    // What the call cost (tests/it/metrics.rs checks its fields).
    assert!(object.remove("meta").is_some_and(|meta| meta.is_object()));
    assert_eq!(
        shape,
        json!({"content": [{"type": "text", "text": "hello"}], "isError": false})
    );
    // A call is answered before the router (`call_shortcut`), and its
    // answer still says its length, as every answer through the router
    // does: not chunked.
    let head = answer_head(&server.base, "/tools/echo", r#"{"text":"hello"}"#);
    assert!(head.contains("\r\ncontent-length: "), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");

    let add = server.call("add", json!({"a": 2, "b": 3.5}));
    assert_eq!(add.status, 200);
    assert_eq!(add.json["structuredContent"], json!({"result": 5.5}));
    assert_eq!(add.json["content"][0]["text"], "5.5");

    // Structured-only results get a text block: JSON by default ...
    let stats = server.call("stats", json!({"numbers": [1, 2, 3]}));
    assert_eq!(assert_envelope(&stats), None);
    let text = stats.json["content"][0]["text"].as_str().unwrap();
    let rendered: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(rendered, stats.json["structuredContent"]);
    assert_eq!(rendered["mean"], 2.0);

    // ... or the markdown key-value block on request.
    let markdown = server.post("/tools/stats?format=markdown", r#"{"numbers":[1,2,3]}"#);
    let text = markdown.json["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("```\nCount: 3\nSum: 6.0\nMean: 2.0\n"),
        "{text}"
    );
    assert!(text.ends_with("\n```"), "{text}");
}

#[test]
fn every_host_and_tool_error_has_its_status_and_envelope() {
    let dir = plugin_dir(&[&example("echo"), &example("math"), &fixture("misbehave")]);
    let server = Server::start(
        dir.path(),
        &["--timeout-ms", "500", "--max-body-bytes", "4096"],
    );

    let check = |response: crate::support::Response, status: u16, code: &str| {
        assert_eq!(response.status, status, "{}", response.json);
        assert_eq!(
            assert_envelope(&response).as_deref(),
            Some(code),
            "{}",
            response.json
        );
        response.json
    };

    let body = check(server.post("/tools/echo", "{not json"), 400, "INVALID_JSON");
    assert!(body["error"]["details"]["line"].is_number());
    check(server.post("/tools/echo", "[1,2]"), 400, "INVALID_JSON");
    let body = check(server.call("nope", json!({})), 404, "TOOL_NOT_FOUND");
    assert!(
        body["error"]["details"]["available"]
            .as_array()
            .unwrap()
            .contains(&json!("echo"))
    );
    check(
        server.post(
            "/tools/echo",
            &format!(r#"{{"text":"{}"}}"#, "x".repeat(5000)),
        ),
        413,
        "PAYLOAD_TOO_LARGE",
    );

    let body = check(
        server.call("add", json!({"a": "two", "c": 1})),
        422,
        "INVALID_ARGUMENTS",
    );
    let paths: Vec<&str> = body["error"]["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/a"), "{body}");
    assert!(
        paths.contains(&""),
        "the missing b and extra c are reported at the root: {body}"
    );

    let body = check(
        server.call("divide", json!({"a": 1, "b": 0})),
        422,
        "DIVISION_BY_ZERO",
    );
    assert_eq!(body["content"][0]["text"], "Error: cannot divide by zero");
    assert_eq!(body["error"]["details"], json!({"a": 1.0}));

    // Valid input whose answer no 64-bit float holds is a business error,
    // never an infinity serialised as null.
    for (tool, arguments) in [
        ("add", json!({"a": 1e308, "b": 1e308})),
        ("divide", json!({"a": 1e308, "b": 1e-308})),
        ("stats", json!({"numbers": [1e308, 1e308]})),
    ] {
        check(server.call(tool, arguments), 422, "RESULT_OUT_OF_RANGE");
    }

    let body = check(server.call("panic", json!({})), 500, "PLUGIN_TRAPPED");
    assert!(
        body["error"]["details"]["stderr"]
            .as_str()
            .unwrap()
            .contains("panicked on purpose"),
        "{body}"
    );
    check(server.call("recurse", json!({})), 500, "PLUGIN_TRAPPED");
    check(
        server.call("not_an_object", json!({})),
        500,
        "INVALID_PLUGIN_OUTPUT",
    );
    let body = check(
        server.call("breaks_schema", json!({})),
        500,
        "INVALID_PLUGIN_OUTPUT",
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("/n"),
        "{body}"
    );
    check(
        server.call("bad_image", json!({})),
        500,
        "INVALID_PLUGIN_OUTPUT",
    );
    check(
        server.call("empty", json!({})),
        500,
        "INVALID_PLUGIN_OUTPUT",
    );
    check(server.call("hog", json!({})), 500, "OUT_OF_MEMORY");
    check(server.call("spin", json!({})), 504, "TOOL_TIMEOUT");

    // A tool not marked read-only takes POST only (read-only ones also
    // answer GET: read_only_tools_answer_get_with_query_arguments).
    check(server.get("/tools/counter"), 405, "METHOD_NOT_ALLOWED");
    check(server.get("/nowhere"), 404, "NOT_FOUND");
    check(
        server.post("/tools/stats?format=yaml", "{}"),
        400,
        "INVALID_REQUEST",
    );

    // After all that, the same plugins still answer, from a clean instance.
    assert_eq!(
        server.call("echo", json!({"text": "still here"})).status,
        200
    );
    assert_eq!(
        server.call("counter", json!({})).json["content"][0]["text"],
        "1"
    );
    assert_eq!(
        server.call("counter", json!({})).json["content"][0]["text"],
        "1"
    );
}

/// A plugin bound to `wit/` with plain wit-bindgen, as docs/plugins.md
/// shows an outside author (`tests/fixtures/plainbind`): it builds (the
/// fixtures build would fail otherwise), loads and answers.
#[test]
fn a_plugin_bound_with_plain_wit_bindgen_serves() {
    let dir = plugin_dir(&[&fixture("plainbind")]);
    let server = Server::in_process(dir.path());
    let answer = server.call("shout", json!({"text": "hello"}));
    assert_eq!(answer.status, 200, "{}", answer.json);
    assert_eq!(
        answer.json["content"][0]["text"], "HELLO",
        "{}",
        answer.json
    );
}

#[test]
fn plugin_output_is_logged_and_bounded() {
    let dir = plugin_dir(&[&fixture("misbehave")]);
    let server = Server::process(dir.path(), &[]);
    assert_eq!(server.call("chatty", json!({})).status, 200);
    // The log is read from the server's stderr by another thread.
    server.wait_for("the drop notice", |s| {
        s.log().contains("over the log limit was dropped")
    });
    let log = server.log();
    assert!(
        log.contains("line 0 of chatter"),
        "plugin stdout reaches the log"
    );
    assert!(
        log.contains("misbehave"),
        "log lines are tagged with the plugin"
    );
    // Each line sits inside its call's span: tool, plugin and front.
    let chatter = log
        .lines()
        .find(|line| line.contains("line 0 of chatter"))
        .unwrap();
    assert!(
        chatter.contains(r#"call{tool="chatty""#)
            && chatter.contains(r#"plugin="misbehave""#)
            && chatter.contains(r#"front="rest""#),
        "{chatter}"
    );
    // A failure the host detects leaves one warn line in the server log,
    // in the span of the call it ended.
    assert_eq!(server.call("panic", json!({})).status, 500);
    server.wait_for("the trap's warn line", |s| {
        s.log()
            .lines()
            .any(|line| line.contains("WARN") && line.contains("PLUGIN_TRAPPED"))
    });
    let trapped = server.log();
    let warn = trapped
        .lines()
        .find(|line| line.contains("WARN") && line.contains("PLUGIN_TRAPPED"))
        .unwrap();
    assert!(
        warn.contains(r#"call{tool="panic""#) && warn.contains("panicked on purpose"),
        "{warn}"
    );
    assert!(
        !log.contains("line 9999 of chatter"),
        "output past the bound is dropped"
    );
    assert!(log.contains("dropped"));
}

#[test]
fn openapi_document_is_valid_openapi_3_1() {
    // With the conformance plugin: tools of every kind, resources, a
    // template and prompts.
    let dir = plugin_dir(&[&example("echo"), &example("math"), &example("conformance")]);
    std::fs::copy(
        repo_root().join("plugins/conformance.toml"),
        dir.path().join("conformance.toml"),
    )
    .unwrap();
    let server = Server::in_process(dir.path());
    let document = server.get("/openapi.json");
    assert_eq!(document.status, 200);
    assert_eq!(document.json["openapi"], "3.1.0");
    let operation = &document.json["paths"]["/tools/divide"]["post"];
    assert_eq!(operation["operationId"], "divide");
    assert!(operation["responses"]["422"].is_object());
    assert!(operation["responses"]["504"].is_object());
    assert_eq!(
        document.json["components"]["schemas"]["divide.output"]["required"],
        json!(["result"])
    );
    let prompt = &document.json["paths"]["/prompts/test_prompt_with_arguments"]["post"];
    assert_eq!(
        prompt["requestBody"]["content"]["application/json"]["schema"]["required"],
        json!(["arg1", "arg2"])
    );
    assert!(document.json["paths"]["/resources/{uri}"]["get"].is_object());
    assert!(document.json["paths"]["/prompts"]["get"].is_object());
    // Input over REST on every tool; tasks on the tools that run as tasks.
    let headers: Vec<&str> = operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|parameter| parameter["name"].as_str().unwrap())
        .collect();
    assert_eq!(headers, ["Toolhost-Input", "Toolhost-Request-State"]);
    let task = &document.json["paths"]["/tools/confirm_delete"]["post"];
    assert_eq!(task["parameters"][2]["name"], "Prefer");
    assert_eq!(task["parameters"][2]["required"], true);
    assert!(task["responses"]["202"].is_object());
    for method in ["get", "post", "delete"] {
        assert!(
            document.json["paths"]["/tasks/{id}"][method].is_object(),
            "{method}"
        );
    }

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), document.json.to_string()).unwrap();
    let output = std::process::Command::new(crate::support::openapi_validator())
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "openapi-spec-validator rejected the document:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The library can run the server in-process, as mini-redis's can: a
/// [`toolhost::Host`] opened over a folder, a bound listener and a
/// shutdown signal. It answers like the binary, reloads like it, and stops
/// when the signal fires.
#[test]
fn the_server_runs_in_process_from_a_listener_and_a_shutdown_signal() {
    use std::time::Duration;
    use toolhost::registry::events::{LoadEvent, LoadEventKind};
    use toolhost::{Host, HostConfig};

    let dir = plugin_dir(&[&example("echo")]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (address, stop, server, host) = runtime.block_on(async {
        let host = Host::open(HostConfig {
            cache_dir: Some(crate::support::test_cache_dir()),
            ..HostConfig::new(dir.path())
        })
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = host.clone();
        let server = tokio::spawn(async move {
            served
                .serve(listener, Default::default(), async move {
                    let _ = stopped.await;
                })
                .await
        });
        (address, stop, server, host)
    });
    let mut response = ureq::post(format!("http://{address}/tools/echo"))
        .header("Content-Type", "application/json")
        .send(r#"{"text":"in process"}"#)
        .unwrap();
    let body: serde_json::Value = response.body_mut().read_json().unwrap();
    assert_eq!(body["content"][0]["text"], "in process", "{body}");
    assert_eq!(body["success"], true, "{body}");

    // Hot reload from the library: a dropped file is an event, then a tool.
    let mut events = host.events();
    crate::support::drop_in(&example("math"), dir.path(), "math.wasm");
    let loaded = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let event = events.recv().await.unwrap();
                if event.plugin == "math" && event.kind == LoadEventKind::Loaded {
                    return event;
                }
            }
        })
        .await
        .expect("a load event for math")
    });
    assert!(
        loaded.report.tools.contains(&"add".to_string()),
        "{loaded:?}"
    );
    assert!(host.snapshot().tool("add").is_some());

    // Each outcome is an event with the plugin's report: replaced,
    // rejected (the older version serving on), removed.
    let next = |events: &mut tokio::sync::broadcast::Receiver<LoadEvent>, kind| {
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), async {
                loop {
                    let event = events.recv().await.unwrap();
                    if event.plugin == "math" && event.kind == kind {
                        return event;
                    }
                }
            })
            .await
            .unwrap_or_else(|_| panic!("a {kind:?} event for math"))
        })
    };
    let newer = crate::support::variant_of(&example("math"), "events");
    crate::support::drop_in(&newer, dir.path(), "math.wasm");
    let replaced = next(&mut events, LoadEventKind::Replaced);
    assert_eq!(
        replaced.report.content_hash.as_deref(),
        Some(crate::support::file_hash(&newer).as_str())
    );
    std::fs::write(dir.path().join(".math.tmp"), b"not wasm").unwrap();
    std::fs::rename(dir.path().join(".math.tmp"), dir.path().join("math.wasm")).unwrap();
    let rejected = next(&mut events, LoadEventKind::Rejected);
    assert!(
        rejected.report.reason.is_some() && rejected.report.serving.is_some(),
        "{rejected:?}"
    );
    std::fs::remove_file(dir.path().join("math.wasm")).unwrap();
    next(&mut events, LoadEventKind::Removed);
    assert!(host.snapshot().tool("add").is_none());

    stop.send(()).unwrap();
    let outcome =
        runtime.block_on(async { tokio::time::timeout(Duration::from_secs(10), server).await });
    assert!(
        matches!(outcome, Ok(Ok(Ok(())))),
        "the server stops on its signal"
    );
}

/// Seed 002's `GET /status`: a tool whose annotations say `readOnlyHint:
/// true` also answers `GET /tools/{name}?arg=value`, its arguments from the
/// query coerced by its input schema; the others answer 405 with `Allow:
/// POST`. The manifest and OpenAPI show both methods.
#[test]
fn read_only_tools_answer_get_with_query_arguments() {
    let dir = plugin_dir(&[&example("echo"), &example("math"), &example("users")]);
    std::fs::create_dir(dir.path().join("users-data")).unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        "[[dirs]]\nhost = \"users-data\"\nguest = \"/data\"\nmode = \"read-write\"\n\n[limits]\nmax_concurrent = 1\n",
    )
    .unwrap();
    let server = Server::in_process(dir.path());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let get = |path: &str| {
        let mut response = agent.get(format!("{}{path}", server.base)).call().unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|value| value.to_str().unwrap().to_string())
        };
        let (cache, allow) = (header("cache-control"), header("allow"));
        let status = response.status().as_u16();
        let body: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        (status, body, cache, allow)
    };

    let (status, body, cache, _) = get("/tools/add?a=2&b=40.5");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["structuredContent"]["result"], 42.5);
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, body, ..) = get("/tools/stats?numbers=1&numbers=2&numbers=6");
    assert_eq!(
        (status, &body["structuredContent"]["mean"]),
        (200, &json!(3.0)),
        "{body}"
    );
    let (_, body, ..) = get("/tools/echo?text=hello%20world%20%26%20more");
    assert_eq!(body["content"][0]["text"], "hello world & more");
    let (status, ..) = get("/tools/echo?text=x&format=markdown");
    assert_eq!(status, 200);
    // The issue's own example.
    let (status, body, ..) = get("/tools/search_users?query=a");
    assert_eq!(status, 200, "{body}");

    // What the schema cannot coerce, and what it refuses.
    let (status, body, ..) = get("/tools/add?a=two&b=1");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("INVALID_ARGUMENTS"))
    );
    assert_eq!(
        body["error"]["details"]["errors"][0]["path"], "/a",
        "{body}"
    );
    let (status, body, ..) = get("/tools/stats?numbers=1&numbers=many");
    assert_eq!(
        body["error"]["details"]["errors"][0]["path"], "/numbers/1",
        "{body}"
    );
    assert_eq!(status, 422);
    let (status, body, ..) = get("/tools/add?a=1");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("INVALID_ARGUMENTS"))
    );
    let (status, body, ..) = get("/tools/add?a=1&b=2&c=3");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("INVALID_ARGUMENTS"))
    );
    let (status, body, ..) = get("/tools/nope?x=1");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("TOOL_NOT_FOUND"))
    );
    let (status, body, _, allow) = get("/tools/create_user?name=Ada");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("METHOD_NOT_ALLOWED"))
    );
    assert_eq!(allow.as_deref(), Some("POST"));
    // Nothing was created by the refused GET.
    let (_, body, ..) = get("/tools/search_users?query=Ada");
    assert!(!body.to_string().contains("Ada"), "{body}");

    let tools = server.get("/tools").json;
    let entry = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(entry("add")["method"], "POST");
    assert_eq!(entry("add")["methods"], json!(["GET", "POST"]));
    assert!(entry("create_user").get("methods").is_none());
    let document = server.get("/openapi.json").json;
    let add = &document["paths"]["/tools/add"];
    assert!(add["post"].is_object() && add["get"].is_object());
    let parameters = add["get"]["parameters"].as_array().unwrap();
    assert_eq!(parameters.len(), 2);
    assert!(
        parameters
            .iter()
            .all(|p| p["in"] == "query" && p["required"] == true)
    );
    assert!(document["paths"]["/tools/create_user"]["get"].is_null());
}

/// The status line and headers of a POST of `body` to `path`, as sent.
fn answer_head(base: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map_or(answer.clone(), |(head, _)| head.to_ascii_lowercase())
}
