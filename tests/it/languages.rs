//! Python and JavaScript plugins, first-class: the examples `plugins/textpy`
//! (componentize-py, on `sdk/python`) and `plugins/textjs` (componentize-qjs,
//! on `sdk/js`) built from source by the pinned toolchains (`make
//! plugins/textpy.wasm plugins/textjs.wasm`, which installs the toolchains
//! under target/toolchains the first time), served by the real binary and
//! called over REST, over MCP with the official Python SDK's default
//! client, and with `toolhost call`: structured results, text results and
//! business errors. Both components are over a megabyte, so they serve
//! baseline code first and the optimised code takes over in place.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::{Server, example, plugin_dir, repo_root, toolhost_bin};
use serde_json::{Value, json};
use toolhost::registry::report::PluginState;
use toolhost::runtime::Tier;

/// The two examples, built once per test binary.
fn language_examples() -> &'static [PathBuf; 2] {
    static BUILT: OnceLock<[PathBuf; 2]> = OnceLock::new();
    BUILT.get_or_init(|| {
        let output = Command::new("make")
            .args(["-s", "plugins/textpy.wasm", "plugins/textjs.wasm"])
            .current_dir(repo_root())
            .output()
            .expect("running make");
        assert!(
            output.status.success(),
            "building the Python and JavaScript examples failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        ["textpy", "textjs"].map(|name| repo_root().join(format!("plugins/{name}.wasm")))
    })
}

fn mcp_call(server: &Server, tool: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}
    });
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut response = agent
        .post(format!("{}/mcp", server.base))
        .header("Accept", "application/json, text/event-stream")
        .send_json(&message)
        .unwrap();
    let answer: Value = response.body_mut().read_json().unwrap();
    answer["result"].clone()
}

#[test]
fn python_and_javascript_examples_answer_over_rest_and_mcp() {
    let [python, javascript] = language_examples();
    let dir = plugin_dir(&[python, javascript, &example("echo")]);
    // A cache of its own: both compile afresh, baseline code first.
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--cache-dir", cache.path().to_str().unwrap()]);
    server.wait_for("both examples", |s| {
        ["textpy", "textjs"]
            .iter()
            .all(|id| s.plugin(id).is_some_and(|p| p.state == PluginState::Loaded))
    });

    let check = |server: &Server| {
        // Python: a dataclass result is structured content with its schema.
        let stats = server.call(
            "word_stats",
            json!({"text": "The cat and the hat.\nThe end.", "top": 1}),
        );
        assert_eq!(stats.status, 200, "{}", stats.json);
        assert_eq!(
            stats.json["structuredContent"],
            json!({"words": 7, "characters": 29, "lines": 2,
                   "top_words": [{"word": "the", "count": 3}]})
        );
        let slug = server.call("slugify", json!({"text": "Héllo, World!"}));
        assert_eq!(slug.json["content"][0]["text"], "hello-world");
        // Python: a business error, with its code and details.
        let nothing = server.call("slugify", json!({"text": "?!"}));
        assert_eq!(nothing.status, 422, "{}", nothing.json);
        assert_eq!(nothing.json["isError"], true);
        assert_eq!(nothing.json["error"]["code"], "NOTHING_TO_SLUGIFY");
        assert_eq!(nothing.json["error"]["details"], json!({"text": "?!"}));

        // Python: a resource template and a prompt (contract 0.2.0).
        let slug = server.get("/resources/text%3A%2F%2Fslug%2FHello%20World");
        assert_eq!(slug.status, 200, "{}", slug.json);
        assert_eq!(slug.json["contents"][0]["text"], "hello-world");
        let prompts = server.get("/prompts").json;
        let prompt = |name: &str| {
            prompts["prompts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("no prompt {name}: {prompts}"))
        };
        assert_eq!(
            prompt("summarize")["arguments"],
            json!([
                {"name": "text", "description": "The text to summarize", "required": true},
                {"name": "style", "description": "How the summary reads", "required": false},
            ])
        );
        let summary = server.post("/prompts/summarize", r#"{"text":"Rust is fast."}"#);
        assert_eq!(summary.status, 200, "{}", summary.json);
        assert_eq!(
            summary.json["messages"][0]["content"]["text"],
            "Summarize this text in one sentence:\n\nRust is fast."
        );
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "summarize"},
            "argument": {"name": "style", "value": "b"}}});
        let (_, _, completed) = crate::mcp::rpc(server, message, &[]);
        let completed: Value = serde_json::from_str(&completed).unwrap();
        assert_eq!(
            completed["result"]["completion"]["values"],
            json!(["bullet points"]),
            "{completed}"
        );

        // JavaScript: the same, declared with exportPlugin (world full).
        let snake = server.get("/resources/case%3A%2F%2Fsnake%2FHello%20World");
        assert_eq!(snake.status, 200, "{}", snake.json);
        assert_eq!(snake.json["contents"][0]["text"], "hello_world");
        assert_eq!(prompt("rename")["arguments"][1]["required"], false);
        let renamed = server.post("/prompts/rename", r#"{"identifier":"tmp2"}"#);
        assert_eq!(
            renamed.json["messages"][0]["content"]["text"],
            "Suggest a clearer camel-case name for `tmp2`."
        );
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "rename"},
            "argument": {"name": "style", "value": "s"}}});
        let (_, _, completed) = crate::mcp::rpc(server, message, &[]);
        assert!(completed.contains(r#""values":["snake"]"#), "{completed}");

        // JavaScript: text, structured, business error.
        let snake = server.call(
            "change_case",
            json!({"text": "XMLHttpRequest done", "to": "snake"}),
        );
        assert_eq!(snake.json["content"][0]["text"], "xml_http_request_done");
        let found = server.call("find_all", json!({"text": "a1 b22", "pattern": "\\d+"}));
        assert_eq!(
            found.json["structuredContent"]["count"], 2,
            "{}",
            found.json
        );
        assert_eq!(found.json["structuredContent"]["matches"][1]["match"], "22");
        let bad = server.call("find_all", json!({"text": "x", "pattern": "("}));
        assert_eq!(bad.status, 422, "{}", bad.json);
        assert_eq!(bad.json["error"]["code"], "INVALID_PATTERN");
        assert_eq!(bad.json["error"]["details"]["pattern"], "(");

        // The same over MCP (JSON-RPC).
        let stats = mcp_call(server, "word_stats", json!({"text": "a a b", "top": 1}));
        assert_eq!(stats["structuredContent"]["top_words"][0]["word"], "a");
        let bad = mcp_call(server, "find_all", json!({"text": "x", "pattern": "["}));
        assert_eq!(bad["isError"], true, "{bad}");
    };
    check(&server);

    // The optimised code replaces the baseline code in place, and answers
    // the same.
    for id in ["textpy", "textjs"] {
        let first = server.plugin(id).unwrap();
        assert_eq!(first.from_cache, Some(false), "{first:?}");
    }
    server.wait_for_within("the optimised code", Duration::from_secs(300), |s| {
        ["textpy", "textjs"].iter().all(|id| {
            s.plugin(id)
                .is_some_and(|p| p.compiler == Some(Tier::Optimized))
        })
    });
    check(&server);

    // The official Python SDK's default client sees the output schemas,
    // the structured results and the business errors.
    let output = Command::new(crate::support::python_sdk2_venv().join("python"))
        .arg(repo_root().join("tests/clients/language_client.py"))
        .arg(format!("{}/mcp", server.base))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python SDK client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["word_stats"]["top_words"][0]["word"], "to", "{seen}");
    assert_eq!(seen["find_all"]["count"], 2, "{seen}");

    // A restart finds the optimised code in the cache.
    drop(server);
    let server = Server::start(dir.path(), &["--cache-dir", cache.path().to_str().unwrap()]);
    server.wait_for("both examples again", |s| {
        ["textpy", "textjs"].iter().all(|id| {
            s.plugin(id).is_some_and(|p| {
                p.state == PluginState::Loaded && p.compiler == Some(Tier::Optimized)
            })
        })
    });
    assert_eq!(server.plugin("textpy").unwrap().from_cache, Some(true));
    check(&server);
}

/// `toolhost check` finds nothing to warn about in either example's
/// schemas, and `toolhost call` gets the same envelopes as the server.
#[test]
fn check_and_call_work_on_both_examples() {
    let [python, javascript] = language_examples();
    for component in [python, javascript] {
        let checked = Command::new(toolhost_bin())
            .arg("check")
            .arg(component)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&checked.stdout);
        assert!(checked.status.success(), "{stdout}");
        assert!(!stdout.contains("warning"), "{stdout}");
    }
    let dir = plugin_dir(&[python, javascript]);
    let call = |tool: &str, arguments: Value| {
        let output = Command::new(toolhost_bin())
            .args(["call", "--plugins"])
            .arg(dir.path())
            .args(["--cache-dir"])
            .arg(crate::support::test_cache_dir())
            .arg(tool)
            .arg(arguments.to_string())
            .output()
            .unwrap();
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), envelope)
    };
    let (status, envelope) = call("change_case", json!({"text": "a b", "to": "kebab"}));
    assert_eq!(status, Some(0), "{envelope}");
    assert_eq!(envelope["content"][0]["text"], "a-b");
    let (status, envelope) = call("slugify", json!({"text": "--"}));
    assert_eq!(status, Some(1), "{envelope}");
    assert_eq!(envelope["error"]["code"], "NOTHING_TO_SLUGIFY");
}
