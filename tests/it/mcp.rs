//! The MCP front against the real binary: the official conformance suite,
//! the official Python SDK over stdio and Streamable HTTP, one-shot JSON-RPC
//! over HTTP, and the HTTP guards.

use std::process::Command;

use crate::support::{Server, example, fixture, plugin_dir, repo_root, test_cache_dir};
use serde_json::{Value, json};

fn python_client(args: &[&str]) -> String {
    let output = Command::new(crate::support::python_venv().join("python"))
        .arg(repo_root().join("tests/mcp_client.py"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "the MCP SDK client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{stdout}");
    stdout
}

#[test]
fn python_sdk_client_over_stdio() {
    let dir = plugin_dir(&[&example("echo")]);
    python_client(&[
        "stdio",
        crate::support::toolhost_bin(),
        dir.path().to_str().unwrap(),
        test_cache_dir().to_str().unwrap(),
        example("math").to_str().unwrap(),
    ]);
}

#[test]
fn python_sdk_client_over_streamable_http() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    python_client(&[
        "http",
        &format!("{}/mcp", server.base),
        dir.path().to_str().unwrap(),
        example("math").to_str().unwrap(),
    ]);
}

/// A server with more tools than one `tools/list` page holds: the official
/// Python SDK client follows `nextCursor` through every page and gets each
/// tool once, in order; a made-up cursor is invalid params; REST's
/// `GET /tools` (made once per change) lists them all and follows a change.
#[test]
fn tools_list_pages_follow_next_cursor_in_the_python_sdk() {
    // 101 namespaces × the benchtool's 10 tools: 1,010 tools, two pages.
    let dir = tempfile::tempdir().unwrap();
    for index in 0..101 {
        let folder = dir.path().join(format!("n{index:03}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(fixture("benchtool"), folder.join("bench.wasm")).unwrap();
    }
    let server = Server::start(dir.path(), &[]);
    server.wait_for("1,010 tools", |server| {
        server.get("/health").json["tools"] == 1010
    });
    let printed = python_client(&["pages", &format!("{}/mcp", server.base), "1010"]);
    let measured: Value = serde_json::from_str(printed.trim()).unwrap();
    assert_eq!(measured["pages"], json!([1000, 10]), "{printed}");
    assert_eq!(server.tool_names().len(), 1010);

    // The lists follow the registry: a namespace removed, 10 tools fewer.
    std::fs::remove_file(dir.path().join("n000/bench.wasm")).unwrap();
    server.wait_for("1,000 tools", |server| {
        server.get("/health").json["tools"] == 1000
    });
    assert_eq!(server.tool_names().len(), 1000);
    let printed = python_client(&["pages", &format!("{}/mcp", server.base), "1000"]);
    assert!(printed.contains(r#""pages": [1000]"#), "{printed}");
}

/// Scenarios the issue requires that the suite's default ("active") run
/// leaves out; they are run one by one.
/// The official suite (pinned in `support`), run twice as a newcomer
/// would: exactly what the 2026-07-28 revision requires, frozen at its
/// release, and every server scenario it has (`--suite all`, the pending
/// and extension ones included). Warnings (SHOULDs the suite cannot drive
/// here) are printed, not failed; every failure fails.
#[test]
fn official_conformance_suite_passes() {
    let dir = plugin_dir(&[&example("conformance")]);
    // Its policy: which tools run as tasks, and a folder of the plugin
    // folder its hooks write a JavaScript tool or prompt into, so that the
    // suite's list-change checks see real changes.
    let policy = std::fs::read_to_string(repo_root().join("plugins/conformance.toml")).unwrap();
    std::fs::create_dir(dir.path().join("hooks")).unwrap();
    std::fs::write(
        dir.path().join("conformance.toml"),
        format!(
            "{policy}\n[[dirs]]\nhost = \"hooks\"\nguest = \"/hooks\"\nmode = \"read-write\"\n"
        ),
    )
    .unwrap();
    // A skill of the room's, so that the suite's skills scenarios run.
    let skill = dir.path().join("skills/pdf-processing");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n\
         metadata:\n  author: toolhost\n---\n\n# PDF processing\n\nSee references/FORMS.md.\n",
    )
    .unwrap();
    std::fs::write(skill.join("references/FORMS.md"), "# Forms\n").unwrap();
    let server = Server::start(dir.path(), &["--timeout-ms", "30000"]);
    let url = format!("{}/mcp", server.base);
    let baseline = repo_root().join("tests/conformance-baseline.yml");
    let baseline = baseline.to_str().unwrap();
    for selection in [["--requirements", "2026-07-28"], ["--suite", "all"]] {
        run_conformance(
            &[
                "server",
                "--url",
                &url,
                selection[0],
                selection[1],
                "--expected-failures",
                baseline,
            ],
            &server,
        );
    }
}

fn run_conformance(args: &[&str], server: &Server) {
    let results = tempfile::tempdir().unwrap();
    let output = Command::new(crate::support::node22())
        .arg(crate::support::node_modules().join("@modelcontextprotocol/conformance/dist/index.js"))
        .args(args)
        .current_dir(results.path())
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");
    assert!(
        output.status.success(),
        "conformance suite failed:\n{report}\nserver log:\n{}",
        server.log()
    );
}

/// POSTs one JSON-RPC message to /mcp with the usual headers.
pub(crate) fn rpc(
    server: &Server,
    message: Value,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    post_mcp(server, &message.to_string(), extra)
}

/// POSTs a raw body to /mcp with the usual headers.
fn post_mcp(server: &Server, body: &str, extra: &[(&str, &str)]) -> (u16, String, String) {
    let mut request = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .post(format!("{}/mcp", server.base))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let mut response = request.send(body).unwrap();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let status = response.status().as_u16();
    (
        status,
        content_type,
        response.body_mut().read_to_string().unwrap(),
    )
}

#[test]
fn one_shot_json_rpc_without_a_session_answers_json() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    let (status, content_type, body) = rpc(
        &server,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        &[],
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}: {body}"
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["tools"][0]["name"], "echo", "{answer}");

    let (status, _, body) = rpc(
        &server,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "one shot"}}}),
        &[],
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        answer["result"]["content"][0]["text"], "one shot",
        "{answer}"
    );

    // Malformed JSON-RPC gets a JSON-RPC error (-32600), and bad JSON a
    // parse error (-32700): never plain text.
    let (status, _, body) = rpc(&server, json!({"jsonrpc": "2.0", "id": 3}), &[]);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, answer["error"]["code"].as_i64()),
        (400, Some(-32600)),
        "{answer}"
    );
    let (_, _, body) = post_mcp(&server, "{not json", &[]);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
}

/// A failed call's code, message and details reach an MCP client in the
/// result's `_meta` (REST's `error` object, unchanged), a trap's stderr
/// among them; `structuredContent` stays out of it.
#[test]
fn a_failed_call_carries_its_error_in_meta() {
    let dir = plugin_dir(&[&example("math"), &fixture("misbehave")]);
    let server = Server::in_process(dir.path());
    let call = |id: u64, name: &str, arguments: Value| {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": name, "arguments": arguments}});
        let (status, _, body) = rpc(&server, message, &[]);
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["result"].clone()
    };
    let business = call(1, "divide", json!({"a": 1, "b": 0}));
    assert_eq!(business["isError"], true, "{business}");
    let error = &business["_meta"]["toolhost/error"];
    assert_eq!(error["code"], "DIVISION_BY_ZERO", "{business}");
    assert_eq!(error["message"], "cannot divide by zero", "{business}");
    assert_eq!(error["details"]["a"], 1.0, "{business}");
    assert!(business.get("structuredContent").is_none(), "{business}");

    let trapped = call(2, "panic", json!({}));
    let error = &trapped["_meta"]["toolhost/error"];
    assert_eq!(error["code"], "PLUGIN_TRAPPED", "{trapped}");
    assert!(
        error["details"]["stderr"]
            .as_str()
            .is_some_and(|stderr| stderr.contains("panicked on purpose")),
        "{trapped}"
    );

    // A call that went well carries no error, only its cost.
    let fine = call(3, "add", json!({"a": 1, "b": 2}));
    assert!(fine["_meta"].get("toolhost/error").is_none(), "{fine}");
    assert!(
        fine["_meta"]["toolhost/call"]["durationMs"].is_number(),
        "{fine}"
    );
}

#[test]
fn http_guards_refuse_foreign_hosts_and_missing_tokens() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &["--token", "s3cret"]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |request: ureq::RequestBuilder<ureq::typestate::WithoutBody>| {
        request.call().unwrap().status().as_u16()
    };
    assert_eq!(
        status(agent.get(format!("{}/health", server.base))),
        200,
        "health needs no token"
    );
    assert_eq!(status(agent.get(format!("{}/tools", server.base))), 401);
    let authorized = |path: &str| {
        agent
            .get(format!("{}{path}", server.base))
            .header("Authorization", "Bearer s3cret")
    };
    assert_eq!(status(authorized("/tools")), 200);
    assert_eq!(
        status(authorized("/tools").header("Host", "evil.example")),
        403
    );
    assert_eq!(
        status(authorized("/tools").header("Origin", "https://evil.example")),
        403
    );
    assert_eq!(
        status(authorized("/tools").header("Origin", "http://localhost:3000")),
        200
    );
    let mcp = agent
        .post(format!("{}/mcp", server.base))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .unwrap();
    assert_eq!(mcp.status().as_u16(), 401, "the token guards MCP too");
}

/// The stateless fast path (`front/mcp/fast/`) answers a lone
/// `tools/call` or `tools/list` as rmcp's one-shot service does. Each
/// request goes twice: as it is (the fast path takes it, and
/// `toolhost_mcp_stateless_fast_total` counts it) and with its `Accept`
/// header given twice, which the fast path leaves to rmcp. Status, content
/// type and answer are the same, timings aside: on the revisions before
/// 2026-07-28 and on it (with `_meta` and the SEP-2243 headers), for a
/// result, a tool error, an unknown tool, a bad cursor, sampling with no
/// client to ask, and a plugin that logs while it runs (an SSE stream of
/// its messages, then the result).
#[test]
fn the_stateless_fast_path_answers_as_rmcp_does() {
    let dir = plugin_dir(&[&example("echo"), &example("conformance")]);
    let server = Server::in_process(dir.path());
    let fast_answers =
        || crate::metrics::metric_value(&server, "toolhost_mcp_stateless_fast_total");
    let modern_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    };
    let mut modern_call = call(7, "echo", json!({"text": "new"}));
    modern_call["params"]["_meta"] = modern_meta.clone();
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            vec![],
        ),
        (
            json!({"jsonrpc": "2.0", "id": "two", "method": "tools/list", "params": {}}),
            vec![("MCP-Protocol-Version", "2025-06-18")],
        ),
        (
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                   "params": {"_meta": modern_meta}}),
            vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
        ),
        (
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list",
                   "params": {"cursor": "not-one-of-ours"}}),
            vec![],
        ),
        (call(5, "echo", json!({"text": "hi"})), vec![]),
        (
            call(6, "echo", json!({"text": "hi"})),
            vec![("MCP-Protocol-Version", "2025-11-25")],
        ),
        (
            modern_call,
            vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ],
        ),
        (call(8, "echo", json!({"wrong": 1})), vec![]),
        (call(24, "echo", Value::Null), vec![]),
        (
            json!({"jsonrpc": "2.0", "id": 27, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": null}}),
            vec![],
        ),
        (call(9, "nope", json!({})), vec![]),
        (call(10, "test_error_handling", json!({})), vec![]),
        (call(11, "test_sampling", json!({"prompt": "hi"})), vec![]),
        (call(12, "test_tool_with_logging", json!({})), vec![]),
    ];
    for (message, headers) in cases {
        let before = fast_answers();
        let fast = rpc(&server, message.clone(), &headers);
        assert_eq!(fast_answers(), before + 1, "the fast path took {message}");
        let mut to_rmcp = headers.clone();
        to_rmcp.push(("Accept", "application/json, text/event-stream"));
        let slow = rpc(&server, message.clone(), &to_rmcp);
        assert_eq!(fast_answers(), before + 1, "rmcp took {message}");
        assert_eq!(
            (fast.0, &fast.1),
            (slow.0, &slow.1),
            "{message}:\n{}\n{}",
            fast.2,
            slow.2
        );
        assert_eq!(
            comparable(&fast.1, &fast.2),
            comparable(&slow.1, &slow.2),
            "{message}"
        );
    }
    // What the fast path leaves to the general path: a progress token (rmcp
    // streams progress), a request that also carries a `result` (rmcp
    // refuses it), another JSON-RPC revision, params in a list, a key of
    // params it does not handle, a session, an id past i64 (refused by
    // both), an `Origin`.
    let mut with_progress = call(14, "echo", json!({"text": "hi"}));
    with_progress["params"]["_meta"] = json!({"progressToken": "p1"});
    let mut with_result = call(15, "echo", json!({"text": "hi"}));
    with_result["result"] = json!({});
    let mut old_revision = call(20, "echo", json!({"text": "hi"}));
    old_revision["jsonrpc"] = json!("1.0");
    let mut params_in_a_list = call(21, "echo", json!({"text": "hi"}));
    params_in_a_list["params"] = json!(["echo", {"text": "hi"}]);
    let mut a_task = call(22, "echo", json!({"text": "hi"}));
    a_task["params"]["task"] = json!({});
    // 2026-07-28's `_meta` without the client's capabilities, or naming
    // another version than the header.
    let modern_headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let mut no_capabilities = call(25, "echo", json!({"text": "hi"}));
    no_capabilities["params"]["_meta"] =
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let mut other_version = call(26, "echo", json!({"text": "hi"}));
    other_version["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2025-11-25",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for (message, headers) in [
        (with_progress, vec![]),
        (with_result, vec![]),
        (old_revision, vec![]),
        (params_in_a_list, vec![]),
        (a_task, vec![]),
        (no_capabilities, modern_headers.clone()),
        (other_version, modern_headers),
        (call(28, "echo", json!([])), vec![]),
        (
            json!({"jsonrpc": "2.0", "id": 29, "method": "tools/call",
                   "params": {"name": 5, "arguments": {}}}),
            vec![],
        ),
        (
            call(23, "echo", json!({"text": "hi"})),
            vec![("Mcp-Session-Id", "none")],
        ),
        (
            json!({"jsonrpc": "2.0", "id": 9_223_372_036_854_775_808_u64, "method": "tools/list"}),
            vec![],
        ),
        (
            call(16, "echo", json!({"text": "hi"})),
            vec![("Origin", "http://127.0.0.1")],
        ),
    ] {
        let before = fast_answers();
        let (status, _, body) = rpc(&server, message.clone(), &headers);
        assert_eq!(
            fast_answers(),
            before,
            "left to rmcp: {message} -> {status} {body}"
        );
    }
    // A key given twice: at the top level rmcp refuses the message, so the
    // fast path leaves it to rmcp; inside the params both answer alike.
    let twice_at_top = r#"{"jsonrpc":"2.0","id":17,"id":18,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
    let before = fast_answers();
    let (status, _, body) = post_mcp(&server, twice_at_top, &[]);
    assert_eq!(fast_answers(), before, "left to rmcp: {status} {body}");
    // A body sent as written (no JSON value between), answered alike by
    // both paths (a media-type parameter in `Accept` sends it to rmcp); the
    // first path's answer.
    let both_paths = |body: &str| {
        let fast = post_mcp(&server, body, &[]);
        let slow = post_mcp(
            &server,
            body,
            &[("Accept", "application/json, text/event-stream;q=1")],
        );
        assert_eq!(fast.0, slow.0, "{} / {}", fast.2, slow.2);
        assert_eq!(
            comparable(&fast.1, &fast.2),
            comparable(&slow.1, &slow.2),
            "{body}"
        );
        fast
    };
    let twice_in_params = r#"{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"echo","name":"echo","arguments":{"text":"hi"}}}"#;
    both_paths(twice_in_params);
    // A name written with an escape reads as the same name on both paths.
    let escaped = r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"ech\u006f","arguments":{"text":"hi"}}}"#;
    let before = fast_answers();
    let fast = both_paths(escaped);
    assert_eq!(fast_answers(), before + 1, "the fast path took {escaped}");
    assert!(fast.2.contains(r#""text":"hi""#), "{}", fast.2);
    // The logging tool's answer is a stream: three messages, then the result.
    let (_, content_type, body) = rpc(&server, call(13, "test_tool_with_logging", json!({})), &[]);
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let messages = comparable(&content_type, &body);
    assert_eq!(messages.as_array().unwrap().len(), 4, "{messages}");
    assert_eq!(messages[0]["method"], "notifications/message", "{messages}");
    assert_eq!(messages[3]["id"], 13, "{messages}");
}

/// An answer as JSON values (one per SSE event for a stream), without what
/// differs from one run to the next: the call's timings.
fn comparable(content_type: &str, body: &str) -> Value {
    // Fuel is the guest's work, which can differ between two identical
    // calls (a guest may read WASI's clocks or random source; Rust's hash
    // maps seed from it): `test_sampling` burned 52,477 and 52,391 in one
    // run, once in four.
    fn without_timings(value: &mut Value) {
        match value {
            Value::Object(object) => {
                object.remove("durationMs");
                object.remove("cpuMs");
                object.remove("fuel");
                object.values_mut().for_each(without_timings);
            }
            Value::Array(items) => items.iter_mut().for_each(without_timings),
            _ => {}
        }
    }
    let mut value = if content_type.starts_with("text/event-stream") {
        Value::Array(
            body.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim)
                .filter(|data| !data.is_empty())
                .map(|data| serde_json::from_str(data).unwrap())
                .collect(),
        )
    } else {
        serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"))
    };
    without_timings(&mut value);
    value
}
