//! Long calls as durable tasks, and a plugin's requests for input, on the
//! real binary over real sockets:
//! - REST: `Toolhost-Input` gets an input-required result, answered with
//!   `Toolhost-Request-State`; a tampered state is refused and runs
//!   nothing; `Prefer: respond-async` gives 202 and a task to `GET`,
//!   answer (`POST`) and `DELETE`; a tool that runs only as a task refuses
//!   a plain call.
//! - One server: a task parked for input survives a restart and is
//!   answered after it; a task whose run died with the server is `failed`
//!   with the reason.
//! - Replicas: three servers and Debian's `redis-server` behind haproxy.
//!   A task made on one is read and answered through the balancer and on
//!   another; a cancellation on another stops it; the replica that runs
//!   one is killed (SIGKILL) and the task is `failed` with the reason.
//! - Deadlines: a task's run has its own (`--task-timeout-secs`), past its
//!   tool's call deadline, and ends failed past it.
//! - Owners: a task is its maker's; they cancel it even once its tool left
//!   their set. What one person's records take is bounded in bytes
//!   (arguments and results), and the bound outlives a restart.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::replicas::{Haproxy, free_port, http};
use crate::support::{Server, example, plugin_dir, repo_root, wait_until};

/// The conformance plugin (its task tools) with its policy.
fn conformance_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[&example("conformance")]);
    std::fs::copy(
        repo_root().join("plugins/conformance.toml"),
        dir.path().join("conformance.toml"),
    )
    .unwrap();
    dir
}

/// A REST request: status, headers' `location`, and the JSON body.
fn rest(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let agent = http();
    let url = format!("{base}{path}");
    let mut response = match (method, body) {
        ("POST", Some(body)) => {
            let mut request = agent.post(&url).header("Content-Type", "application/json");
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.send(body.to_string())
        }
        ("GET", None) => {
            let mut request = agent.get(&url);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.call()
        }
        ("DELETE", None) => {
            let mut request = agent.delete(&url);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.call()
        }
        other => panic!("no such request here: {other:?}"),
    }
    .unwrap();
    let location = response
        .headers()
        .get("location")
        .map(|value| value.to_str().unwrap().to_string());
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, location, json)
}

/// A stateless MCP 2026-07-28 request, with the tasks extension and
/// elicitation declared.
fn mcp(base: &str, method: &str, name: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "tasks-test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let mut response = http()
        .post(format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
        .send(body.to_string())
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    let text = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .next_back()
        .map_or(text.clone(), str::to_string);
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// The key of the first request a task waits for.
fn first_request_key(task: &Value) -> String {
    let waiting = task["inputRequests"].as_object();
    waiting
        .and_then(|requests| requests.keys().next())
        .cloned()
        .unwrap_or_else(|| panic!("waits for nothing: {task}"))
}

fn task_of(base: &str, id: &str) -> Value {
    mcp(base, "tasks/get", id, json!({ "taskId": id }))["result"].clone()
}

#[test]
fn rest_answers_input_required_and_runs_tasks() {
    let dir = conformance_dir();
    let server = Server::start(dir.path(), &[]);
    let base = &server.base;
    let tool = "/tools/test_input_required_result_elicitation";

    // Without saying what it can answer, a REST call is what it was.
    let (status, _, plain) = rest(base, "POST", tool, &[], Some(json!({})));
    assert_eq!(
        (status, plain["isError"].clone()),
        (422, json!(true)),
        "{plain}"
    );

    let input = [("Toolhost-Input", "elicitation")];
    let (status, _, asked) = rest(base, "POST", tool, &input, Some(json!({})));
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert_eq!(
        asked["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    let state = asked["requestState"].as_str().unwrap().to_string();
    let answers = json!({
        "arguments": {},
        "inputResponses": { "user_name": { "action": "accept", "content": { "name": "Ada" } } }
    });
    // The state remembers what the client said it can answer.
    let with_state = [("Toolhost-Request-State", state.as_str())];
    let (status, _, done) = rest(base, "POST", tool, &with_state, Some(answers.clone()));
    assert_eq!(
        (status, done["content"][0]["text"].clone()),
        (200, json!("Hello, Ada!")),
        "{done}"
    );

    // The same answers replayed into a call with other arguments: refused,
    // and nothing ran.
    let smuggled = json!({
        "arguments": { "other": "arguments" },
        "inputResponses": { "user_name": { "action": "accept", "content": { "name": "Ada" } } }
    });
    let headers = [
        ("Toolhost-Input", "elicitation"),
        ("Toolhost-Request-State", state.as_str()),
    ];
    let (status, _, refused) = rest(base, "POST", tool, &headers, Some(smuggled));
    assert_eq!(
        (status, refused["error"]["code"].clone()),
        (400, json!("INVALID_REQUEST")),
        "{refused}"
    );

    // One character changed: refused, and nothing ran.
    let tampered = format!("{state}A");
    let headers = [
        ("Toolhost-Input", "elicitation"),
        ("Toolhost-Request-State", tampered.as_str()),
    ];
    let (status, _, refused) = rest(base, "POST", tool, &headers, Some(answers));
    assert_eq!(
        (status, refused["error"]["code"].clone()),
        (400, json!("INVALID_REQUEST")),
        "{refused}"
    );
    let (status, _, refused) = rest(
        base,
        "POST",
        tool,
        &[("Toolhost-Input", "telepathy")],
        Some(json!({})),
    );
    assert_eq!(status, 400, "{refused}");

    // A tool that runs only as a task refuses a plain call.
    let (status, _, refused) = rest(
        base,
        "POST",
        "/tools/confirm_delete",
        &[],
        Some(json!({ "filename": "a.txt" })),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Prefer: respond-async")
    );

    // A task: 202 and where to read it; it asks (whoever reads it can
    // answer: no Toolhost-Input needed), is answered, completes.
    let headers = [("Prefer", "respond-async")];
    let (status, location, created) = rest(
        base,
        "POST",
        "/tools/confirm_delete",
        &headers,
        Some(json!({ "filename": "a.txt" })),
    );
    assert_eq!(
        (status, created["resultType"].clone()),
        (202, json!("task")),
        "{created}"
    );
    let location = location.unwrap();
    assert_eq!(
        location,
        format!("/tasks/{}", created["taskId"].as_str().unwrap())
    );
    let mut parked = Value::Null;
    wait_until("the task to ask", Duration::from_secs(20), || {
        parked = rest(base, "GET", &location, &[], None).2;
        parked["status"] == "input_required"
    });
    let key = first_request_key(&parked);
    // An answer that is not an elicitation's result is refused, and the
    // task still waits.
    let wrong = json!({ "inputResponses": { key.clone(): { "action": "nope" } } });
    let (status, _, refused) = rest(base, "POST", &location, &[], Some(wrong));
    assert_eq!(status, 400, "{refused}");
    let still = rest(base, "GET", &location, &[], None).2;
    assert_eq!(still["status"], "input_required", "{still}");
    let answer = json!({ "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } });
    rest(base, "POST", &location, &[], Some(answer));
    let mut ended = Value::Null;
    wait_until("the task to end", Duration::from_secs(20), || {
        ended = rest(base, "GET", &location, &[], None).2;
        ended["status"] == "completed"
    });
    assert_eq!(
        ended["result"]["content"][0]["text"], "deleted 'a.txt'",
        "{ended}"
    );

    // Cancelled while it runs; an unknown task is 404.
    let (_, location, _) = rest(
        base,
        "POST",
        "/tools/slow_compute",
        &[("Prefer", "respond-async")],
        Some(json!({ "seconds": 60, "label": "cancel" })),
    );
    let location = location.unwrap();
    let (status, _, cancelled) = rest(base, "DELETE", &location, &[], None);
    assert_eq!(
        (status, cancelled["status"].clone()),
        (200, json!("cancelled")),
        "{cancelled}"
    );
    let (status, _, _) = rest(
        base,
        "GET",
        "/tasks/0123456789abcdef0123456789abcdef",
        &[],
        None,
    );
    assert_eq!(status, 404);
}

/// The conformance plugin's `slow_compute` as an optional task tool whose
/// calls have 500 ms, on a server whose tasks have 3 s: as a call, a
/// second's work is cut; as a task, it runs to its end; ten seconds'
/// work, as a task, fails at the task's deadline, naming it.
#[test]
fn a_task_runs_past_its_tools_call_deadline_until_its_own() {
    let dir = plugin_dir(&[&example("conformance")]);
    std::fs::write(
        dir.path().join("conformance.toml"),
        "[tasks]\nslow_compute = \"optional\"\n\n[limits]\ntimeout_ms = 500\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--task-timeout-secs", "3"]);
    let base = &server.base;
    let tool = "/tools/slow_compute";
    let a_second = json!({ "seconds": 1, "label": "a second" });

    let (status, _, cut) = rest(base, "POST", tool, &[], Some(a_second.clone()));
    assert_eq!(
        (status, cut["error"]["code"].clone()),
        (504, json!("TOOL_TIMEOUT")),
        "{cut}"
    );

    let as_task = [("Prefer", "respond-async")];
    let ended = |body: Value| {
        let (status, location, created) = rest(base, "POST", tool, &as_task, Some(body));
        assert_eq!(status, 202, "{created}");
        let location = location.unwrap();
        let mut task = Value::Null;
        wait_until("the task to end", Duration::from_secs(30), || {
            task = rest(base, "GET", &location, &[], None).2;
            task["status"] != "working"
        });
        task
    };
    let done = ended(a_second);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("completed after 1 seconds")),
        "{done}"
    );

    let past = ended(json!({ "seconds": 10, "label": "ten seconds" }));
    assert_eq!(past["status"], "failed", "{past}");
    let error = &past["error"]["data"];
    assert_eq!(
        (error["code"].clone(), error["details"]["timeoutMs"].clone()),
        (json!("TOOL_TIMEOUT"), json!(3000)),
        "{past}"
    );
}

/// A tool's policy may give its tasks a deadline of their own
/// (`timeout_secs` in `[tasks]`), in place of the server's; one outside a
/// second to a day refuses the policy, saying so.
#[test]
fn a_tools_policy_gives_its_tasks_their_own_deadline() {
    let dir = plugin_dir(&[&example("conformance")]);
    let policy = dir.path().join("conformance.toml");
    std::fs::write(
        &policy,
        "[tasks]\nslow_compute = { support = \"optional\", timeout_secs = 2 }\n\n[limits]\ntimeout_ms = 500\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    let base = &server.base;
    let as_task = [("Prefer", "respond-async")];
    let ended = |body: Value| {
        let (status, location, created) =
            rest(base, "POST", "/tools/slow_compute", &as_task, Some(body));
        assert_eq!(status, 202, "{created}");
        let location = location.unwrap();
        let mut task = Value::Null;
        wait_until("the task to end", Duration::from_secs(30), || {
            task = rest(base, "GET", &location, &[], None).2;
            task["status"] != "working"
        });
        task
    };
    let done = ended(json!({ "seconds": 1, "label": "a second" }));
    assert_eq!(
        done["status"], "completed",
        "past the call's 500 ms: {done}"
    );
    let past = ended(json!({ "seconds": 10, "label": "ten seconds" }));
    let error = &past["error"]["data"];
    assert_eq!(
        (
            past["status"].clone(),
            error["code"].clone(),
            error["details"]["timeoutMs"].clone()
        ),
        (json!("failed"), json!("TOOL_TIMEOUT"), json!(2000)),
        "the tool's own deadline, not the server's 15 minutes: {past}"
    );

    std::fs::write(
        &policy,
        "[tasks]\nslow_compute = { support = \"optional\", timeout_secs = 0 }\n",
    )
    .unwrap();
    server.wait_for("the policy refused", |server| {
        server
            .plugin("conformance")
            .is_some_and(|report| format!("{report:?}").contains("timeout_secs is 0"))
    });
}

#[test]
fn a_restart_keeps_tasks_and_a_run_lost_with_the_server_fails_with_a_reason() {
    let dir = conformance_dir();
    let server = Server::process(dir.path(), &[]);
    let created = mcp(
        &server.base,
        "tools/call",
        "confirm_delete",
        json!({ "name": "confirm_delete", "arguments": { "filename": "kept.txt" } }),
    );
    let parked = created["result"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    wait_until("the task to ask", Duration::from_secs(20), || {
        task_of(&server.base, &parked)["status"] == "input_required"
    });
    let running = mcp(
        &server.base,
        "tools/call",
        "slow_compute",
        json!({ "name": "slow_compute", "arguments": { "seconds": 60, "label": "lost" } }),
    );
    let running = running["result"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_of(&server.base, &running)["status"], "working");
    drop(server); // SIGKILL

    // The server after it needs no process of its own.
    let server = Server::start(dir.path(), &[]);
    // Within a heartbeat's span of its last change it may still read as
    // working; then failed, with why.
    let mut lost = Value::Null;
    wait_until("the lost task to fail", Duration::from_secs(20), || {
        lost = task_of(&server.base, &running);
        lost["status"] == "failed"
    });
    assert!(
        lost["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped"),
        "{lost}"
    );
    let kept = task_of(&server.base, &parked);
    assert_eq!(kept["status"], "input_required", "{kept}");
    let key = first_request_key(&kept);
    let ack = mcp(
        &server.base,
        "tasks/update",
        &parked,
        json!({ "taskId": parked, "inputResponses": { key: { "action": "accept", "content": { "confirm": false } } } }),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    wait_until("the answered task to end", Duration::from_secs(20), || {
        task_of(&server.base, &parked)["status"] == "completed"
    });
    assert_eq!(
        task_of(&server.base, &parked)["result"]["content"][0]["text"],
        "kept 'kept.txt'"
    );
}

/// Debian's redis-server on a loopback port, keeping nothing on disk;
/// stopped on drop.
pub(crate) struct Redis {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Redis {
    pub(crate) fn start(dir: &Path) -> Redis {
        Redis::start_on(dir, free_port(), false)
    }

    /// On `port`; `durable`: every write in its append-only file, synced
    /// before it is answered (as docs/many-machines.md asks of the Redis
    /// replicas share publishes through), so that a restart on `dir` keeps
    /// all it answered.
    pub(crate) fn start_on(dir: &Path, port: u16, durable: bool) -> Redis {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                if durable { "yes" } else { "no" },
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("running redis-server (make test installs Debian's package)");
        wait_until("redis-server", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Redis {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        }
    }
}

#[test]
fn replicas_share_tasks_through_redis_and_a_killed_runner_fails_its_task() {
    let state = tempfile::tempdir().unwrap();
    let redis = Redis::start(state.path());
    let keys = state.path().join("request-state-keys.toml");
    std::fs::write(
        &keys,
        "active = \"k1\"\n[keys]\nk1 = \"a-secret-of-at-least-thirty-two-bytes\"\n",
    )
    .unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| conformance_dir()).collect();
    let flags = [
        "--tasks-redis",
        redis.url.as_str(),
        "--request-state-keys",
        keys.to_str().unwrap(),
    ];
    // Replica 0 is killed below: it alone is a process of its own.
    let mut replicas = crate::replicas::first_a_process(&dirs, &flags);
    let bases: Vec<String> = replicas
        .iter()
        .map(|replica| replica.as_ref().unwrap().base.clone())
        .collect();
    let base = |index: usize| bases[index].clone();
    let backends: Vec<String> = (0..3)
        .map(|index| base(index).trim_start_matches("http://").to_string())
        .collect();
    let balancer = Haproxy::start(&backends);

    // Made on replica 0, read on 1 and through the balancer, answered on
    // 2 (which runs it again), completed for all.
    let created = mcp(
        &base(0),
        "tools/call",
        "confirm_delete",
        json!({ "name": "confirm_delete", "arguments": { "filename": "shared.txt" } }),
    );
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    wait_until("the task to ask", Duration::from_secs(20), || {
        task_of(&base(1), &id)["status"] == "input_required"
    });
    let parked = task_of(&balancer.base, &id);
    let key = first_request_key(&parked);
    mcp(
        &base(2),
        "tasks/update",
        &id,
        json!({ "taskId": id, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }),
    );
    wait_until("the answered task to end", Duration::from_secs(20), || {
        task_of(&balancer.base, &id)["status"] == "completed"
    });
    assert_eq!(
        task_of(&base(0), &id)["result"]["content"][0]["text"],
        "deleted 'shared.txt'"
    );

    // Cancelled on replica 1 while it runs on replica 0.
    let created = mcp(
        &base(0),
        "tools/call",
        "slow_compute",
        json!({ "name": "slow_compute", "arguments": { "seconds": 60, "label": "cancel" } }),
    );
    let cancelled = created["result"]["taskId"].as_str().unwrap().to_string();
    let ack = mcp(
        &base(1),
        "tasks/cancel",
        &cancelled,
        json!({ "taskId": cancelled }),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(task_of(&base(0), &cancelled)["status"], "cancelled");

    // The replica running a task is killed: the task fails, with why.
    let created = mcp(
        &base(0),
        "tools/call",
        "slow_compute",
        json!({ "name": "slow_compute", "arguments": { "seconds": 60, "label": "killed" } }),
    );
    let lost = created["result"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_of(&balancer.base, &lost)["status"], "working");
    replicas[0] = None; // SIGKILL
    let mut seen = Value::Null;
    wait_until("the lost task to fail", Duration::from_secs(20), || {
        seen = task_of(&base(1), &lost);
        seen["status"] == "failed"
    });
    assert!(
        seen["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped"),
        "{seen}"
    );
    // And nothing else was lost: the first task reads as it ended.
    assert_eq!(task_of(&base(2), &id)["status"], "completed");
}

const JS_ASKER: &str = r#"import { tool, exportPlugin, ask, ClientError } from "./toolhost.js";

const asker = tool({
  name: "js_asker",
  description: "Asks for a name and the roots at once.",
  input: { type: "object", properties: { region: { type: "string", "x-mcp-header": "Region" } } },
  run: () => {
    const answers = ask({
      name: ["elicit", { message: "Name?", requestedSchema: { type: "object", properties: { name: { type: "string" } } } }],
      roots: ["roots", {}],
    });
    if (answers.name instanceof ClientError) throw answers.name;
    if (answers.roots instanceof ClientError) throw answers.roots;
    return `${answers.name.content.name} has ${answers.roots.roots.length} root(s)`;
  },
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [asker] });
"#;

const PY_ASKER: &str = r#"from typing import Annotated

from toolhost_plugin import ClientError, Header, ask, tool


@tool
def py_asker(region: Annotated[str, Header("Region")] = "") -> str:
    """Asks for a name and the roots at once."""
    answers = ask(name=("elicit", {"message": "Name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}}}), roots=("roots", {}))
    for answer in answers.values():
        if isinstance(answer, ClientError):
            raise answer
    return f"{answers['name']['content']['name']} has {len(answers['roots']['roots'])} root(s)"
"#;

/// The Python and JavaScript helpers ask several things at once (and mark
/// a header parameter) through the contract, as the Rust SDK does: one
/// input-required result with both requests, then the answer.
#[test]
fn python_and_javascript_tools_ask_through_their_helpers() {
    let dir = plugin_dir(&[]);
    std::fs::write(dir.path().join("js_asker.js"), JS_ASKER).unwrap();
    std::fs::write(dir.path().join("py_asker.py"), PY_ASKER).unwrap();
    let server = Server::start(dir.path(), &[]);
    let (_, _, listed) = rest(&server.base, "GET", "/tools", &[], None);
    for tool in ["js_asker", "py_asker"] {
        let schema = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|listed| listed["name"] == tool)
            .unwrap_or_else(|| panic!("{tool} is not served: {listed}"))["inputSchema"]
            .clone();
        assert_eq!(
            schema["properties"]["region"]["x-mcp-header"], "Region",
            "{schema}"
        );
        let path = format!("/tools/{tool}");
        let input = [("Toolhost-Input", "elicitation, roots")];
        let (status, _, asked) = rest(&server.base, "POST", &path, &input, Some(json!({})));
        assert_eq!(
            (status, asked["resultType"].clone()),
            (200, json!("input_required")),
            "{asked}"
        );
        let mut keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["name", "roots"], "{asked}");
        let state = asked["requestState"].as_str().unwrap();
        let answers = json!({ "arguments": {}, "inputResponses": {
            "name": { "action": "accept", "content": { "name": "Ada" } },
            "roots": { "roots": [{ "uri": "file:///work" }] }
        } });
        let headers = [
            ("Toolhost-Input", "elicitation, roots"),
            ("Toolhost-Request-State", state),
        ];
        let (status, _, done) = rest(&server.base, "POST", &path, &headers, Some(answers));
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["content"][0]["text"], "Ada has 1 root(s)", "{done}");
    }
}

/// A task is its maker's: another person reads, answers and cancels
/// nothing of it (the same answer as for no task at all).
#[test]
fn a_person_sees_only_their_own_tasks() {
    let dir = conformance_dir();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789abcdef\"\nrole = \"caller\"\n\
         [[token]]\nname = \"bob\"\nsecret = \"bob-secret-0123456789abcdef\"\nrole = \"caller\"\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let (ada, bob) = (
        ("Authorization", "Bearer ada-secret-0123456789abcdef"),
        ("Authorization", "Bearer bob-secret-0123456789abcdef"),
    );
    let (status, location, created) = rest(
        &server.base,
        "POST",
        "/tools/slow_compute",
        &[ada, ("Prefer", "respond-async")],
        Some(json!({ "seconds": 60, "label": "ada's" })),
    );
    assert_eq!(status, 202, "{created}");
    let location = location.unwrap();
    let (status, _, _) = rest(&server.base, "GET", &location, &[bob], None);
    assert_eq!(status, 404);
    let (status, _, _) = rest(&server.base, "DELETE", &location, &[bob], None);
    assert_eq!(status, 404);
    let (status, _, task) = rest(&server.base, "GET", &location, &[ada], None);
    assert_eq!(
        (status, task["status"].clone()),
        (200, json!("working")),
        "{task}"
    );
    let (status, _, task) = rest(&server.base, "DELETE", &location, &[ada], None);
    assert_eq!(
        (status, task["status"].clone()),
        (200, json!("cancelled")),
        "{task}"
    );
}

const ADA: (&str, &str) = ("Authorization", "Bearer ada-secret-0123456789abcdef");
const BOB: (&str, &str) = ("Authorization", "Bearer bob-secret-0123456789abcdef");

/// Writes (by rename, as operators are told to) a tokens file of two
/// callers, ada seeing `ada_sees` (patterns over plugin ids), bob every
/// tool.
fn write_tokens(file: &Path, ada_sees: &str) {
    let next = file.with_extension("next");
    std::fs::write(
        &next,
        format!(
            "[[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789abcdef\"\nrole = \"caller\"\n\
             tools = [{ada_sees}]\n\
             [[token]]\nname = \"bob\"\nsecret = \"bob-secret-0123456789abcdef\"\nrole = \"caller\"\n"
        ),
    )
    .unwrap();
    std::fs::rename(&next, file).unwrap();
}

/// A person's task records are bounded in bytes, their arguments and
/// results together (64 MiB each), and the bound outlives the server:
/// past it a task is refused (BUSY, naming the limit) and nothing is
/// written, a result that would pass it is not kept (the task fails,
/// saying so), and after a restart she is still refused while another
/// person is not.
#[test]
fn a_persons_task_records_are_bounded_in_bytes_across_a_restart() {
    let dir = conformance_dir();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    write_tokens(&tokens, "\"*\"");
    let flags = [
        "--tokens",
        tokens.to_str().unwrap(),
        "--max-body-bytes",
        "8388608",
    ];
    let server = Server::process(dir.path(), &flags);
    // Echoed in the result: about 6 MiB a task.
    let label = "x".repeat(3 << 20);
    let make = |base: &str, who: (&str, &str)| {
        rest(
            base,
            "POST",
            "/tools/slow_compute",
            &[who, ("Prefer", "respond-async")],
            Some(json!({ "seconds": 0, "label": label })),
        )
    };
    let records = || {
        std::fs::read_dir(dir.path().join(".toolhost/tasks"))
            .unwrap()
            .count()
    };
    let mut ended = Vec::new();
    let refused = loop {
        assert!(ended.len() < 16, "16 tasks of 6 MiB each were kept");
        let (status, location, created) = make(&server.base, ADA);
        if status != 202 {
            break (status, created);
        }
        let location = location.unwrap();
        let mut task = Value::Null;
        wait_until("the task to end", Duration::from_secs(20), || {
            task = rest(&server.base, "GET", &location, &[ADA], None).2;
            task["status"] != "working"
        });
        ended.push(task);
    };
    assert_eq!(
        (refused.0, refused.1["error"]["code"].clone()),
        (503, json!("BUSY")),
        "{}",
        refused.1
    );
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("64 MiB"),
        "{}",
        refused.1
    );
    // Ten whole tasks fit; the eleventh's arguments do, its result not.
    let completed = ended.iter().filter(|task| task["status"] == "completed");
    assert_eq!(completed.count(), 10);
    let failed = ended.last().unwrap();
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("64 MiB"),
        "{failed}"
    );
    let kept = records();
    assert_eq!(make(&server.base, ADA).0, 503);
    assert_eq!(records(), kept, "a refusal writes nothing");
    drop(server); // SIGKILL

    let server = Server::start(dir.path(), &flags);
    let (status, _, refused) = make(&server.base, ADA);
    assert_eq!(status, 503, "a restart forgot what she keeps: {refused}");
    let (status, _, created) = make(&server.base, BOB);
    assert_eq!(status, 202, "{created}");
}

/// A task's maker cancels it after its tool left their set (the tokens
/// file changed under a running task): it stops, though they no longer
/// read it; with the tool back in their set, they read it cancelled.
#[test]
fn an_owner_cancels_their_task_after_its_tool_left_their_set() {
    let dir = conformance_dir();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    write_tokens(&tokens, "\"conformance\"");
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let (status, location, created) = rest(
        &server.base,
        "POST",
        "/tools/slow_compute",
        &[ADA, ("Prefer", "respond-async")],
        Some(json!({ "seconds": 60, "label": "left" })),
    );
    assert_eq!(status, 202, "{created}");
    let location = location.unwrap();

    write_tokens(&tokens, "\"nothing-here\"");
    wait_until("the tool to leave her set", Duration::from_secs(20), || {
        rest(&server.base, "GET", &location, &[ADA], None).0 == 404
    });
    // Another person still cancels nothing of it.
    assert_eq!(rest(&server.base, "DELETE", &location, &[BOB], None).0, 404);
    let (status, _, task) = rest(&server.base, "DELETE", &location, &[ADA], None);
    assert_eq!(
        (status, task["status"].clone()),
        (200, json!("cancelled")),
        "{task}"
    );

    write_tokens(&tokens, "\"conformance\"");
    let mut task = Value::Null;
    wait_until("the tool to come back", Duration::from_secs(20), || {
        let (status, _, now) = rest(&server.base, "GET", &location, &[ADA], None);
        task = now;
        status == 200
    });
    assert_eq!(task["status"], "cancelled", "{task}");
}

/// A Python source that declares itself a task in its own code
/// (`@tool(task="optional")`), run as a task by the SDKs' own task
/// helpers for the 2025-11-25 revision: the TypeScript SDK 1.32.2's
/// `callToolStream` and the Python SDK 1.x's `call_tool_as_task`, each
/// past the call deadline (`--timeout-ms 1500`, the tool sleeping 3 s);
/// and a cancel through the TypeScript SDK.
#[test]
fn the_sdks_task_helpers_run_a_task_declared_in_a_sources_own_code() {
    const ADA: &str = "ada-secret-0123456789";
    const SLOW: &str = r#"import time
from toolhost_plugin import tool


@tool(task="optional")
def slow_report(seconds: float) -> str:
    """A report that takes its time."""
    time.sleep(seconds)
    return f"report ready after {seconds} s"
"#;
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n"),
    )
    .unwrap();
    let server = Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--timeout-ms", "1500"],
    );
    let (status, report) = crate::support::send(
        &server,
        "PUT",
        "/plugins/ada/slow",
        Some(ADA),
        "text/x-python",
        SLOW.as_bytes(),
    );
    assert_eq!(status, 201, "{report}");
    let url = format!("{}/mcp", server.base);
    let arguments = r#"{"seconds": 3}"#;

    // An ordinary call is cut at the call deadline.
    let (status, cut) = crate::support::call_as(&server, "ada__slow_report", ADA, arguments);
    assert_eq!(
        (status, cut["error"]["code"].as_str()),
        (504, Some("TOOL_TIMEOUT")),
        "{cut}"
    );

    let mut command = crate::clients::ts_client();
    command.args(["tasks", &url, ADA, "ada__slow_report", arguments]);
    let seen = crate::clients::run(command, "the TypeScript SDK's callToolStream");
    assert_eq!(seen["taskSupport"], "optional", "{seen}");
    assert_eq!(
        seen["capability"]["requests"]["tools"]["call"],
        json!({}),
        "{seen}"
    );
    assert_eq!(seen["error"], Value::Null, "{seen}");
    assert_eq!(
        seen["kinds"],
        json!(["taskCreated", "taskStatus", "result"]),
        "{seen}"
    );
    assert_eq!(seen["statuses"], json!(["working", "completed"]), "{seen}");
    assert_eq!(
        seen["result"]["content"][0]["text"], "report ready after 3.0 s",
        "{seen}"
    );
    assert_eq!(
        seen["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], seen["taskId"],
        "{seen}"
    );
    assert!(seen["seconds"].as_f64().unwrap() >= 3.0, "{seen}");
    assert_eq!(seen["cancelled"], "cancelled", "{seen}");
    assert_eq!(seen["afterCancel"], "cancelled", "{seen}");

    let output = Command::new(crate::support::python_venv().join("python"))
        .arg(crate::support::repo_root().join("tests/clients/python_tasks.py"))
        .args([&url, ADA, "ada__slow_report", arguments])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python SDK's call_tool_as_task:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    assert_eq!(seen["created"], "working", "{seen}");
    assert_eq!(
        seen["statuses"].as_array().unwrap().last().unwrap(),
        "completed",
        "{seen}"
    );
    assert_eq!(seen["text"], "report ready after 3.0 s", "{seen}");
    assert!(seen["seconds"].as_f64().unwrap() >= 3.0, "{seen}");
}
