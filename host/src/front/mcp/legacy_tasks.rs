//! Tasks as MCP's 2025-11-25 revision has them, for the clients that speak
//! it (the TypeScript SDK 1.x's `client.experimental.tasks.callToolStream`,
//! the Python SDK's task helpers): a `tools/call` whose params carry
//! `task: {ttl}` answers a `CreateTaskResult` at once, and `tasks/get`,
//! `tasks/result` and `tasks/cancel` follow it. rmcp models only the
//! 2026-07-28 tasks extension (`tasks.rs`), so these are answered here, in
//! front of it, for requests whose `MCP-Protocol-Version` is 2025-11-25;
//! anything else goes on to rmcp unchanged.
//!
//! The task is the same durable task the other fronts make (`crate::tasks`:
//! the person's share, the store, replicas, the task's own deadline), run
//! through the same call path. What differs is the wire: the revision's
//! `ttl` and `pollInterval` (milliseconds), and `tasks/result`, which waits
//! for the task to end and answers its call's result, marked with the
//! related task. A 2025-11-25 task cannot be asked anything (that revision
//! asks through the result's stream): a question its tool asks is answered
//! as one the client cannot take, as for a client without the capability.
//! `initialize` at 2025-11-25 declares `tasks.requests.tools.call` and
//! `tasks.cancel` (not `tasks.list`: a person's tasks are not listed).

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::Rounds;
use super::jsonrpc;
use super::tasks::{Caller, RunPath, run_deadline, start_run};
use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::edge::auth::Identity;
use crate::registry::Registry;
use crate::registry::view::View;
use crate::tasks::{TaskError, TaskRecord};

/// The revision these tasks are of.
pub(crate) const REVISION: &str = "2025-11-25";

/// The key of `_meta` that names the task a result belongs to.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// How often `tasks/result` looks at a task that has not ended.
const WAIT_STEP: Duration = Duration::from_millis(200);

/// How long one `tasks/result` waits before it answers that the task is
/// still working (the client asks again).
const MAX_WAIT: Duration = Duration::from_secs(300);

/// JSON-RPC's codes.
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

pub(crate) struct LegacyTasks {
    pub(crate) registry: Arc<Registry>,
    pub(crate) calls: Arc<Calls>,
    pub(crate) text_format: TextFormat,
    pub(crate) rounds: Rounds,
    /// The server's shutdown: a waiting `tasks/result` answers then.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
}

/// Whether a request speaks the 2025-11-25 revision (its header says so).
pub(crate) fn speaks_legacy(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        == Some(REVISION)
}

/// Whether `message` is one of the requests answered here (so that the
/// dispatcher may count a `tasks/result`, which waits, as a stream).
pub(crate) fn waits(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tasks/result")
}

impl LegacyTasks {
    /// The answer to `message` when it is a 2025-11-25 task request of a
    /// person `requester` (`None`: an open server); `None` lets rmcp
    /// answer it.
    pub(crate) async fn answer(
        &self,
        message: &Value,
        requester: Option<&Identity>,
    ) -> Option<Response> {
        let id = message.get("id")?.clone();
        let method = message.get("method")?.as_str()?;
        let params = message.get("params").and_then(Value::as_object);
        let view = requester.map_or_else(View::all, |identity| identity.tools.clone());
        let caller = Caller::new(
            &self.registry,
            requester.map(|identity| identity.name.clone()),
            view,
        );
        let answer = match method {
            "tools/call" => {
                let params = params?;
                // Only a call that asks for a task is this revision's task.
                params.get("task").filter(|task| task.is_object())?;
                self.call(params, &caller).await?
            }
            "tasks/get" | "tasks/cancel" | "tasks/result" => {
                let Some(task_id) = params
                    .and_then(|params| params.get("taskId"))
                    .and_then(Value::as_str)
                else {
                    return Some(rpc_error(
                        id,
                        INVALID_PARAMS,
                        "taskId: a string is required",
                    ));
                };
                self.task_method(method, task_id, &caller).await
            }
            "tasks/list" => Err((
                METHOD_NOT_FOUND,
                "tasks/list is not served: a person's tasks are not listed (the capability \
                 says so); follow each by its taskId"
                    .to_string(),
                None,
            )),
            _ => return None,
        };
        Some(match answer {
            Ok(result) => rpc_result(id, result),
            Err((code, message, data)) => rpc_error_with(id, code, &message, data),
        })
    }

    /// A `tools/call` with `task`: `None` for a call the ordinary path
    /// answers (a tool the caller does not see, arguments that do not
    /// fit); else the task made, or why not.
    async fn call(&self, params: &Map<String, Value>, caller: &Caller) -> Option<Outcome> {
        let name = params.get("name")?.as_str()?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments.clone(),
            Some(_) => return None,
        };
        let support = {
            let snapshot = self.registry.snapshot();
            let entry = snapshot.tool(name)?;
            if !caller.view.sees(&entry.plugin.id)
                || !entry
                    .tool
                    .input_validator
                    .is_valid(&Value::Object(arguments.clone()))
            {
                return None;
            }
            entry.tool.task_support
        };
        if support.is_none() {
            return Some(Err((
                METHOD_NOT_FOUND,
                format!(
                    "{name} does not run as a task (its execution.taskSupport is forbidden): call it without `task`"
                ),
                None,
            )));
        }
        let Some(tasks) = &self.rounds.tasks else {
            return Some(Err((
                METHOD_NOT_FOUND,
                "this server runs no tasks".to_string(),
                None,
            )));
        };
        let made = tasks
            .create(
                caller.owner.as_deref(),
                name,
                arguments,
                // A task of this revision is never asked anything here.
                json!({}),
                Map::new(),
                run_deadline(&self.registry, tasks, name),
            )
            .await;
        let (record, claim) = match made {
            Ok(made) => made,
            Err(error) => return Some(Err(task_error(error))),
        };
        start_run(
            RunPath {
                registry: self.registry.clone(),
                calls: self.calls.clone(),
                text_format: self.text_format,
                keys: self.rounds.input_keys.clone(),
                front: crate::call::invoke::Front::Mcp,
            },
            tasks,
            &record,
            claim,
            caller.view.clone(),
        );
        Some(Ok(json!({ "task": wire(&record) })))
    }

    async fn task_method(&self, method: &str, id: &str, caller: &Caller) -> Outcome {
        let Some(tasks) = &self.rounds.tasks else {
            return Err((METHOD_NOT_FOUND, "this server runs no tasks".into(), None));
        };
        let asker = caller.asker();
        match method {
            "tasks/get" => tasks
                .get(id, &asker)
                .await
                .map(|record| Value::Object(wire(&record))),
            "tasks/cancel" => tasks
                .cancel(id, &asker)
                .await
                .map(|record| Value::Object(wire(&record))),
            _ => {
                // Waits for it to end (its run has its own deadline), then
                // answers what its call answered.
                let waited = std::time::Instant::now();
                let record = loop {
                    let record = tasks.get(id, &asker).await.map_err(task_error)?;
                    if record.status.is_terminal() {
                        break record;
                    }
                    if record.status == crate::tasks::Status::InputRequired {
                        return Err((
                            INTERNAL_ERROR,
                            "the task waits for input, which a 2025-11-25 session cannot \
                             give: answer it with tasks/update (2026-07-28) or over REST \
                             (POST /tasks/{id})"
                                .to_string(),
                            None,
                        ));
                    }
                    if waited.elapsed() > MAX_WAIT {
                        return Err((
                            INTERNAL_ERROR,
                            format!(
                                "the task is still working after {} s: ask for its result again",
                                MAX_WAIT.as_secs()
                            ),
                            None,
                        ));
                    }
                    tokio::select! {
                        () = tokio::time::sleep(WAIT_STEP) => {}
                        () = self.shutdown.cancelled() => {
                            return Err((
                                INTERNAL_ERROR,
                                "the server is shutting down: ask for the task's result again"
                                    .to_string(),
                                None,
                            ));
                        }
                    }
                };
                return result_of(&record);
            }
        }
        .map_err(task_error)
    }
}

type Outcome = Result<Value, (i64, String, Option<Value>)>;

/// A task as this revision writes it.
fn wire(record: &TaskRecord) -> Map<String, Value> {
    let mut task = record.wire(false);
    if let Some(ttl) = task.remove("ttlMs") {
        task.insert("ttl".into(), ttl);
    }
    if let Some(poll) = task.remove("pollIntervalMs") {
        task.insert("pollInterval".into(), poll);
    }
    task
}

/// `tasks/result` of an ended task: its call's result, marked with the
/// task, or the error it failed with.
fn result_of(record: &TaskRecord) -> Outcome {
    let related = json!({ RELATED_TASK: { "taskId": record.id } });
    match (&record.result, &record.error) {
        (Some(Value::Object(result)), _) => {
            let mut result = result.clone();
            result.remove("resultType");
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let (Some(meta), Value::Object(related)) = (meta.as_object_mut(), related) {
                meta.extend(related);
            }
            Ok(Value::Object(result))
        }
        (_, Some(error)) => Err((
            error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR),
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the task failed")
                .to_string(),
            error.get("data").cloned(),
        )),
        _ => Err((
            INTERNAL_ERROR,
            format!("the task ended {} without a result", status_of(record)),
            Some(related),
        )),
    }
}

fn status_of(record: &TaskRecord) -> String {
    serde_json::to_value(record.status)
        .ok()
        .and_then(|status| status.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn task_error(error: TaskError) -> (i64, String, Option<Value>) {
    match error {
        TaskError::Unknown(_) => (INVALID_PARAMS, error.to_string(), None),
        TaskError::Busy(_) => (INTERNAL_ERROR, error.to_string(), None),
        TaskError::BadAnswer(_) => (INVALID_PARAMS, error.to_string(), None),
        TaskError::Store(_) => {
            tracing::warn!(%error, "task store");
            (INTERNAL_ERROR, error.to_string(), None)
        }
    }
}

/// `initialize`'s answer (`body`, JSON or one SSE event) with the tasks
/// capability of this revision added to the server's capabilities.
pub(crate) fn declare_in(body: &[u8]) -> Option<Vec<u8>> {
    rewrite(body, |message| {
        let capabilities = message
            .get_mut("result")?
            .get_mut("capabilities")?
            .as_object_mut()?;
        capabilities.insert(
            "tasks".into(),
            json!({ "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
        Some(())
    })
}

/// A `tools/list` answer (`body`) with each tool that runs as a task
/// marked as this revision marks it (`execution.taskSupport`), which
/// rmcp's tool model does not carry.
pub(crate) fn mark_task_tools(body: &[u8], registry: &Registry) -> Option<Vec<u8>> {
    rewrite(body, |message| {
        let tools = message
            .get_mut("result")?
            .get_mut("tools")?
            .as_array_mut()?;
        let snapshot = registry.snapshot();
        let mut marked = false;
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            let support = tool
                .get("name")
                .and_then(Value::as_str)
                .and_then(|name| snapshot.tool(name))
                .and_then(|entry| entry.tool.task_support);
            if let Some(support) = support {
                tool.insert("execution".into(), json!({ "taskSupport": support }));
                marked = true;
            }
        }
        marked.then_some(())
    })
}

/// `body` (a JSON-RPC answer, or SSE events carrying one) with the answer
/// changed by `change`; `None` when it changed nothing.
fn rewrite(body: &[u8], change: impl Fn(&mut Value) -> Option<()>) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let changed = |data: &str| -> Option<String> {
        let mut message = serde_json::from_str::<Value>(data).ok()?;
        change(&mut message)?;
        serde_json::to_string(&message).ok()
    };
    if text.trim_start().starts_with('{') {
        return changed(text).map(String::into_bytes);
    }
    // An SSE stream: the `data:` line that is the answer is rewritten.
    let mut out = String::with_capacity(text.len() + 80);
    let mut any = false;
    for line in text.split_inclusive('\n') {
        let (content, end) = match line.strip_suffix('\n') {
            Some(content) => (content, "\n"),
            None => (line, ""),
        };
        if let Some(data) = content.strip_prefix("data:")
            && let Some(rewritten) = changed(data.trim_start())
        {
            out.push_str("data: ");
            out.push_str(&rewritten);
            out.push_str(end);
            any = true;
        } else {
            out.push_str(line);
        }
    }
    any.then(|| out.into_bytes())
}

fn rpc_result(id: Value, result: Value) -> Response {
    json_answer(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

fn rpc_error(id: Value, code: i64, message: &str) -> Response {
    rpc_error_with(id, code, message, None)
}

fn rpc_error_with(id: Value, code: i64, message: &str, data: Option<Value>) -> Response {
    let mut answer = jsonrpc::error_response(id, code, message);
    if let (Some(data), Some(error)) = (data, answer.get_mut("error")) {
        error["data"] = data;
    }
    json_answer(answer)
}

fn json_answer(body: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_declares_the_revisions_tasks_in_json_and_in_sse() {
        let answer = br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}}"#;
        let json: Value = serde_json::from_slice(&declare_in(answer).unwrap()).unwrap();
        assert_eq!(
            json["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let sse = format!(
            "event: message\ndata: {}\n\n",
            std::str::from_utf8(answer).unwrap()
        );
        let rewritten = String::from_utf8(declare_in(sse.as_bytes()).unwrap()).unwrap();
        assert!(
            rewritten.starts_with("event: message\ndata: {"),
            "{rewritten}"
        );
        assert!(rewritten.ends_with("}\n\n"), "{rewritten}");
        assert!(rewritten.contains("\"tasks\":{"), "{rewritten}");
    }
}
