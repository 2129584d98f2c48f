//! MCP's tasks extension (SEP-2663) over the tasks room (`crate::tasks`):
//! a call of a tool that runs as a task, for a 2026-07-28 client that
//! declared the extension, answers a `CreateTaskResult` once the task is
//! stored; `tasks/get`, `tasks/update` and `tasks/cancel` read and change
//! it. Each run of the task's call goes through the same call path as any
//! call (the same accounting, limits and tool set), in an input round
//! (`input_round.rs`) whose answers are the task's.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, GetTaskParams, GetTaskResult, Task, UpdateTaskParams,
};
use serde_json::{Map, Value, json};

use super::input_round::{InputRound, Relay};
use tracing::Instrument;

use crate::registry::tools::TaskSupport;
use crate::registry::view::View;
use crate::runtime::{CallClient, NotAResult};
use crate::tasks::{Asker, RunClaim, RunEnd, TaskError, TaskRecord, Tasks};

/// How long a tool that asks for its input first (`input_first`) runs as
/// an ordinary call: what it asks in that time is answered as a call's
/// input is; past it, or once it ends, it is a task.
const INPUT_FIRST: std::time::Duration = std::time::Duration::from_secs(1);

/// How a call of `name` runs for a client with `capabilities`: `None`, as
/// an ordinary call; else the task's answer (or the refusal of a client
/// that cannot take the task a tool requires).
pub(super) async fn maybe_task(
    path: RunPath,
    tasks: Option<&Arc<Tasks>>,
    request: &CallToolRequestParams,
    capabilities: &ClientCapabilities,
    round: &Arc<InputRound>,
    bound: &str,
    caller: &Caller,
) -> Option<Result<CallToolResponse, McpError>> {
    let (owner, view) = (caller.owner.as_deref(), &caller.view);
    let (support, input_first) = {
        let snapshot = path.registry.snapshot();
        let entry = snapshot.tool(&request.name)?;
        if !view.sees(&entry.plugin.id) {
            return None;
        }
        let support = entry.tool.task_support?;
        // Arguments that do not fit make no task: the call refuses them.
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        if !entry.tool.input_validator.is_valid(&arguments) {
            return None;
        }
        (support, entry.tool.task_input_first)
    };
    if !capabilities.supports_tasks() || tasks.is_none() {
        return match support {
            TaskSupport::Optional => None,
            TaskSupport::Required => Some(Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))),
        };
    }
    let tasks = tasks?;
    let run_for = run_deadline(&path.registry, tasks, &request.name);
    let create = |answers| {
        tasks.create(
            owner,
            &request.name,
            request.arguments.clone().unwrap_or_default(),
            serde_json::to_value(capabilities).unwrap_or_default(),
            answers,
            run_for,
        )
    };
    if !input_first {
        return Some(match create(round.given()).await {
            Ok((record, claim)) => {
                start_run(path, tasks, &record, claim, view.clone());
                Ok(CallToolResponse::Task(create_result(&record)))
            }
            Err(error) => Err(task_error(error)),
        });
    }
    // Input first: the call runs as a call until it asks (answered as a
    // call's input is), ends, or runs past INPUT_FIRST; then, having what
    // it asked for, it is a task, which this run goes on as.
    let keys = path.keys.clone();
    let call = {
        let (round, bound, view) = (round.clone(), bound.to_string(), view.clone());
        let deadline = run_for;
        let (tool, arguments) = (
            request.name.to_string(),
            request.arguments.clone().unwrap_or_default(),
        );
        AbortOnDrop(tokio::spawn(async move {
            let envelope = path.call(&tool, arguments, &round, &view, deadline).await;
            (envelope, round, bound, path.keys)
        }))
    };
    let mut call = call;
    let early = tokio::select! {
        ended = &mut call.0 => Some(ended),
        () = round.has_stopped() => None,
        () = tokio::time::sleep(INPUT_FIRST) => None,
    };
    if let Some(answer) = round.stopped(&keys, bound) {
        // It asks: answered as any call's input, before any task.
        return Some(
            answer.map(|super::input_round::Stopped { requests, state }| {
                CallToolResponse::InputRequired(rmcp::model::InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                ))
            }),
        );
    }
    let (record, claim) = match create(round.given()).await {
        Ok(created) => created,
        Err(error) => return Some(Err(task_error(error))),
    };
    let run: crate::tasks::Run = match early {
        Some(Ok((envelope, round, bound, keys))) => {
            let end = ended(&round, &keys, &bound, envelope);
            Box::pin(async move { end })
        }
        Some(Err(_)) => Box::pin(async { stopped_early() }),
        None => Box::pin(async move {
            match (&mut call.0).await {
                Ok((envelope, round, bound, keys)) => ended(&round, &keys, &bound, envelope),
                Err(_) => stopped_early(),
            }
        }),
    };
    tasks.run(&record, claim, run);
    Some(Ok(CallToolResponse::Task(create_result(&record))))
}

/// A spawned call that ended without an envelope (it panicked).
fn stopped_early() -> RunEnd {
    RunEnd::Failed(json!({ "code": -32603, "message": "the call stopped before it ended" }))
}

/// A spawned call, stopped when its task is cancelled (dropped).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a task's run needs of its front.
#[derive(Clone)]
pub(crate) struct RunPath {
    pub(crate) registry: Arc<crate::registry::Registry>,
    pub(crate) calls: Arc<crate::call::Calls>,
    pub(crate) text_format: crate::call::envelope::TextFormat,
    pub(crate) keys: Arc<super::input_keys::InputKeys>,
    /// Which front its calls are counted under.
    pub(crate) front: crate::call::invoke::Front,
}

/// How long a run of `tool`'s task may take: its policy's `timeout_secs`
/// in `[tasks]`, else the server's (`--task-timeout-secs`).
pub(crate) fn run_deadline(
    registry: &crate::registry::Registry,
    tasks: &Tasks,
    tool: &str,
) -> std::time::Duration {
    registry
        .snapshot()
        .tool(tool)
        .and_then(|entry| entry.tool.task_timeout)
        .unwrap_or(tasks.run_deadline)
}

impl RunPath {
    /// The tool's call on the call path, as a run of a task with
    /// `deadline` (`Tasks::run_deadline`), its requests for input going to
    /// `round`.
    async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        round: &Arc<InputRound>,
        view: &View,
        deadline: std::time::Duration,
    ) -> crate::call::envelope::Envelope {
        let client: CallClient = Some(round.clone());
        crate::call::invoke::call_tool_until(
            &self.registry,
            &self.calls,
            tool,
            arguments,
            self.text_format,
            client,
            self.front,
            view,
            Some(deadline),
        )
        .await
    }
}

/// Runs the task's call (again) on this server, for whichever front made
/// it: the same call path as any call, in an input round whose answers
/// are the task's.
pub(crate) fn start_run(
    path: RunPath,
    tasks: &Arc<Tasks>,
    record: &TaskRecord,
    claim: RunClaim,
    view: View,
) {
    let (tool, arguments, answers) = (
        record.tool.clone(),
        record.arguments.clone(),
        record.answers.clone(),
    );
    let capabilities: ClientCapabilities =
        serde_json::from_value(record.capabilities.clone()).unwrap_or_default();
    let bound = format!("task\0{}", record.id);
    let deadline = run_deadline(&path.registry, tasks, &tool);
    let span = tracing::info_span!("task", id = %record.id, tool = %record.tool);
    tasks.run(
        record,
        claim,
        Box::pin(
            async move {
                let responses = answers.into_iter().collect();
                let round = match InputRound::open(
                    &path.keys,
                    &bound,
                    Some(capabilities),
                    None,
                    Some(&responses),
                    Relay::silent(),
                ) {
                    Ok(round) => Arc::new(round),
                    Err(error) => return RunEnd::Failed(json!(error)),
                };
                let envelope = path.call(&tool, arguments, &round, &view, deadline).await;
                ended(&round, &path.keys, &bound, envelope)
            }
            .instrument(span),
        ),
    );
}

/// How a run ended, from its round and its envelope.
fn ended(
    round: &InputRound,
    keys: &super::input_keys::InputKeys,
    bound: &str,
    envelope: crate::call::envelope::Envelope,
) -> RunEnd {
    if let Some(answer) = super::input_round::overrides(round, keys, bound, envelope.is_error) {
        return match answer {
            Ok(input) => RunEnd::NeedsInput {
                requests: serde_json::to_value(input.input_requests).unwrap_or_default(),
                answers: round.used(),
            },
            Err(error) => RunEnd::Failed(json!(error)),
        };
    }
    // A call that never ran the tool's code to an answer (a trap, a
    // limit, a refusal) failed; a business error completed.
    if let Some(error) = envelope.error.as_ref().filter(|e| e.host_code.is_some()) {
        return RunEnd::Failed(json!({
            "code": -32603,
            "message": error.message,
            "data": error,
        }));
    }
    match super::call_answer::call_tool_result(envelope) {
        Ok(mut result) => {
            result.result_type = None;
            RunEnd::Completed(serde_json::to_value(result).unwrap_or_default())
        }
        Err(error) => RunEnd::Failed(json!(error)),
    }
}

fn create_result(record: &TaskRecord) -> CreateTaskResult {
    let task: Task = serde_json::from_value(Value::Object(record.wire(false)))
        .unwrap_or_else(|_| Task::new(record.id.clone(), Default::default(), "", ""));
    CreateTaskResult::new(task)
}

/// Who asks about a task, for MCP and REST alike: their name, and which
/// tools their set holds now (a task of a tool taken from it is no longer
/// theirs to read; a tool gone altogether still counts).
pub(crate) struct Caller {
    pub(crate) owner: Option<String>,
    pub(crate) view: View,
    sees: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Caller {
    pub(crate) fn new(
        registry: &Arc<crate::registry::Registry>,
        owner: Option<String>,
        view: View,
    ) -> Self {
        let (registry, seen) = (registry.clone(), view.clone());
        Caller {
            owner,
            view,
            sees: Box::new(move |tool: &str| {
                registry
                    .snapshot()
                    .tool(tool)
                    .is_none_or(|entry| seen.sees(&entry.plugin.id))
            }),
        }
    }

    pub(crate) fn asker(&self) -> Asker<'_> {
        Asker {
            owner: self.owner.as_deref(),
            sees_tool: &*self.sees,
        }
    }
}

pub(super) async fn get(
    tasks: &Tasks,
    request: GetTaskParams,
    asker: &Asker<'_>,
) -> Result<GetTaskResult, McpError> {
    let record = tasks
        .get(&request.task_id, asker)
        .await
        .map_err(task_error)?;
    let mut wire: Map<String, Value> = record.wire(true);
    wire.insert("resultType".into(), json!("complete"));
    serde_json::from_value(Value::Object(wire))
        .map_err(|e| McpError::internal_error(format!("task shape: {e}"), None))
}

pub(super) async fn update(
    path: RunPath,
    tasks: &Arc<Tasks>,
    request: UpdateTaskParams,
    asker: &Asker<'_>,
    view: View,
) -> Result<(), McpError> {
    let responses: Map<String, Value> = request.input_responses.into_iter().collect();
    if let Some((record, claim)) = tasks
        .answer(&request.task_id, asker, responses, &answer_fits)
        .await
        .map_err(task_error)?
    {
        start_run(path, tasks, &record, claim, view);
    }
    Ok(())
}

pub(super) async fn cancel(
    tasks: &Tasks,
    request: CancelTaskParams,
    asker: &Asker<'_>,
) -> Result<(), McpError> {
    tasks
        .cancel(&request.task_id, asker)
        .await
        .map(drop)
        .map_err(task_error)
}

/// Whether an answer fits its request, by the request's method.
pub(crate) fn answer_fits(method: &str, answer: &Value) -> Result<(), NotAResult> {
    super::input_round::check_answer(method, answer)
}

fn task_error(error: TaskError) -> McpError {
    match error {
        TaskError::Unknown(_) | TaskError::BadAnswer(_) => {
            McpError::invalid_params(error.to_string(), None)
        }
        TaskError::Busy(_) => McpError::new(
            rmcp::model::ErrorCode(-32000),
            error.to_string(),
            Some(json!({ "code": "BUSY" })),
        ),
        TaskError::Store(error) => store_error(TaskError::Store(error)),
    }
}

fn store_error(error: TaskError) -> McpError {
    tracing::warn!(%error, "task store");
    McpError::internal_error(error.to_string(), None)
}
