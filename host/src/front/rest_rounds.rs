//! REST's longer calls, as MCP's 2026-07-28 revision has them:
//! - input: a client that says what it can answer (`Toolhost-Input:
//!   elicitation, sampling, roots`) gets a plugin's requests as an
//!   input-required result (HTTP 200, `resultType: "input_required"`,
//!   `inputRequests`, `requestState`), and calls again with
//!   `Toolhost-Request-State` and the body `{"arguments": ...,
//!   "inputResponses": ...}`;
//! - tasks: `Prefer: respond-async` on a tool that runs as a task answers
//!   202 with `Location: /tasks/{id}` once the task is stored; `GET`
//!   reads it, `POST` (`{"inputResponses": ...}`) answers it, `DELETE`
//!   cancels it. A tool that runs only as a task refuses a call without
//!   the preference.
//!
//! Without those headers, a call is what it always was.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientCapabilities;
use serde_json::{Map, Value, json};

use crate::call::envelope::{Envelope, TextFormat};
use crate::call::errors::ErrorCode;
use crate::call::invoke;
use crate::edge::guard::Requester;
use crate::edge::responses::json_response;
use crate::front::mcp::{
    Caller, InputKeys, InputRound, Relay, Rounds, RunPath, answer_fits, start_run,
};
use crate::registry::Registry;
use crate::registry::tools::TaskSupport;
use crate::registry::view::View;
use crate::tasks::{TaskError, TaskRecord, Tasks};

pub(crate) const INPUT_HEADER: &str = "toolhost-input";
pub(crate) const STATE_HEADER: &str = "toolhost-request-state";

/// What REST's longer calls need.
pub(crate) struct RestRounds {
    pub(crate) registry: Arc<Registry>,
    pub(crate) calls: Arc<crate::call::Calls>,
    pub(crate) rounds: Rounds,
    pub(crate) max_body_bytes: usize,
}

/// Whether the call is this file's to answer: it asks for input or a
/// task, or its tool runs only as a task.
pub(crate) fn takes(headers: &HeaderMap, registry: &Registry, name: &str) -> bool {
    headers.contains_key(INPUT_HEADER)
        || headers.contains_key(STATE_HEADER)
        || prefers_async(headers)
        || registry
            .snapshot()
            .tool(name)
            .is_some_and(|entry| entry.tool.task_support == Some(TaskSupport::Required))
}

fn prefers_async(headers: &HeaderMap) -> bool {
    headers.get_all("prefer").iter().any(|value| {
        value.to_str().is_ok_and(|text| {
            text.split(',')
                .any(|part| part.trim().eq_ignore_ascii_case("respond-async"))
        })
    })
}

/// What `Toolhost-Input` declares, as MCP's client capabilities; `None`
/// without the header.
fn capabilities(headers: &HeaderMap) -> Result<Option<ClientCapabilities>, Envelope> {
    if !headers.contains_key(INPUT_HEADER) {
        return Ok(None);
    }
    let mut declared = serde_json::Map::new();
    for value in headers.get_all(INPUT_HEADER) {
        let text = value.to_str().map_err(|_| bad_input_header("not text"))?;
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            match part {
                "elicitation" | "sampling" | "roots" => {
                    declared.insert(part.into(), json!({}));
                }
                other => return Err(bad_input_header(other)),
            }
        }
    }
    Ok(Some(
        serde_json::from_value(Value::Object(declared)).unwrap_or_default(),
    ))
}

/// A task made over REST is answered by whoever reads it (`GET` shows
/// what it waits for): it may ask for anything.
fn answers_anything() -> ClientCapabilities {
    serde_json::from_value(json!({ "elicitation": {}, "sampling": {}, "roots": {} }))
        .unwrap_or_default()
}

fn bad_input_header(what: &str) -> Envelope {
    Envelope::host_error(
        ErrorCode::InvalidRequest,
        format!(
            "Toolhost-Input names what the client can answer, from elicitation, sampling and \
             roots, separated by commas; {what:?} is not one"
        ),
        None,
    )
}

/// The second round's body: the arguments again, and the answers.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Answered {
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default)]
    input_responses: Map<String, Value>,
}

/// `POST /tools/{name}` with input or a task asked for.
pub(crate) async fn call(
    longer: &RestRounds,
    name: &str,
    format: TextFormat,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    body: Body,
    view: &View,
) -> Response {
    match call_inner(longer, name, format, headers, extensions, body, view).await {
        Ok(response) | Err(response) => response,
    }
}

// Refusals are answers, handed back as they go out: once per refused call.
#[allow(clippy::result_large_err)]
async fn call_inner(
    longer: &RestRounds,
    name: &str,
    format: TextFormat,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    body: Body,
    view: &View,
) -> Result<Response, Response> {
    let capabilities = capabilities(headers).map_err(IntoResponse::into_response)?;
    let state = headers
        .get(STATE_HEADER)
        .map(|value| {
            value
                .to_str()
                .map_err(|_| refused("Toolhost-Request-State is not text"))
        })
        .transpose()?;
    let body = crate::edge::body::read_arguments(headers, body, longer.max_body_bytes)
        .await
        .map_err(IntoResponse::into_response)?;
    let (arguments, responses) = if state.is_some() {
        let answered: Answered = serde_json::from_value(Value::Object(body)).map_err(|e| {
            refused(&format!(
                "with Toolhost-Request-State, the body is {{\"arguments\": {{...}}, \
                 \"inputResponses\": {{...}}}}: {e}"
            ))
        })?;
        (answered.arguments, Some(answered.input_responses))
    } else {
        (body, None)
    };
    let owner = owner(extensions);
    let bound = crate::front::mcp::bind("rest/tools", name, owner.as_deref(), Some(&arguments));
    let keys = &longer.rounds.input_keys;
    let responses = responses.map(|map| map.into_iter().collect());
    let round = Arc::new(
        InputRound::open(
            keys,
            &bound,
            capabilities.clone(),
            state,
            responses.as_ref(),
            Relay::silent(),
        )
        .map_err(|error| refused(&error.message))?,
    );
    let (support, fits) = longer
        .registry
        .snapshot()
        .tool(name)
        .filter(|entry| view.sees(&entry.plugin.id))
        .map_or((None, true), |entry| {
            let fits = entry
                .tool
                .input_validator
                .is_valid(&Value::Object(arguments.clone()));
            (entry.tool.task_support, fits)
        });
    // Arguments that do not fit make no task: the call refuses them.
    if let (Some(_), true, true, Some(tasks)) =
        (support, fits, prefers_async(headers), &longer.rounds.tasks)
    {
        let (record, claim) = tasks
            .create(
                owner.as_deref(),
                name,
                arguments,
                serde_json::to_value(capabilities.clone().unwrap_or_else(answers_anything))
                    .unwrap_or_default(),
                round.given(),
                crate::front::mcp::run_deadline(&longer.registry, tasks, name),
            )
            .await
            .map_err(task_error)?;
        start_run(
            run_path(longer, keys, format),
            tasks,
            &record,
            claim,
            view.clone(),
        );
        let mut task = record.wire(false);
        task.insert("resultType".into(), json!("task"));
        let mut response = json_response(202, &Value::Object(task));
        let location = format!("/tasks/{}", record.id);
        if let Ok(location) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        response.headers_mut().insert(
            "preference-applied",
            HeaderValue::from_static("respond-async"),
        );
        return Ok(response);
    }
    if support == Some(TaskSupport::Required) && fits {
        return Err(refused(&format!(
            "{name} runs only as a task: send Prefer: respond-async, then read the task at the \
             Location given"
        )));
    }
    let client: crate::runtime::CallClient = Some(round.clone());
    let envelope = invoke::call_tool(
        &longer.registry,
        &longer.calls,
        name,
        arguments,
        format,
        client,
        invoke::Front::Rest,
        view,
    )
    .await;
    match crate::front::mcp::overrides(&round, keys, &bound, envelope.is_error) {
        Some(Ok(input)) => Ok(json_response(
            200,
            &serde_json::to_value(input).unwrap_or_default(),
        )),
        Some(Err(error)) => Err(Envelope::host_error(
            ErrorCode::InvalidRequest,
            error.message.to_string(),
            error.data,
        )
        .into_response()),
        None => Ok(envelope.into_response()),
    }
}

fn run_path(longer: &RestRounds, keys: &Arc<InputKeys>, format: TextFormat) -> RunPath {
    RunPath {
        registry: longer.registry.clone(),
        calls: longer.calls.clone(),
        text_format: format,
        keys: keys.clone(),
        front: invoke::Front::Rest,
    }
}

fn owner(extensions: &axum::http::Extensions) -> Option<String> {
    extensions
        .get::<Requester>()
        .and_then(|requester| requester.0.as_ref())
        .map(|identity| identity.name.clone())
}

fn refused(message: &str) -> Response {
    Envelope::host_error(ErrorCode::InvalidRequest, message.to_string(), None).into_response()
}

fn task_error(error: TaskError) -> Response {
    match error {
        TaskError::Unknown(_) => {
            Envelope::host_error(ErrorCode::NotFound, error.to_string(), None).into_response()
        }
        TaskError::Busy(_) => {
            Envelope::host_error(ErrorCode::Busy, error.to_string(), None).into_response()
        }
        TaskError::BadAnswer(_) => {
            Envelope::host_error(ErrorCode::InvalidRequest, error.to_string(), None).into_response()
        }
        TaskError::Store(_) => {
            tracing::warn!(%error, "task store");
            Envelope::host_error(ErrorCode::HostError, error.to_string(), None).into_response()
        }
    }
}

fn task_json(record: &TaskRecord) -> Response {
    json_response(200, &Value::Object(record.wire(true)))
}

/// `GET /tasks/{id}`: the task, with its result, error or what it waits
/// for.
pub(crate) async fn get_task(
    State(longer): State<Arc<RestRounds>>,
    Path(id): Path<String>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let Some(tasks) = &longer.rounds.tasks else {
        return no_tasks();
    };
    match tasks
        .get(&id, &caller(&longer, requester.as_ref()).asker())
        .await
    {
        Ok(record) => task_json(&record),
        Err(error) => task_error(error),
    }
}

/// `DELETE /tasks/{id}`: cancels it (a task already ended stays as it
/// ended), even once its tool left the maker's set; the task as it is
/// then (without its result, once its tool left their set).
pub(crate) async fn cancel_task(
    State(longer): State<Arc<RestRounds>>,
    Path(id): Path<String>,
    requester: Option<axum::Extension<Requester>>,
) -> Response {
    let Some(tasks) = &longer.rounds.tasks else {
        return no_tasks();
    };
    let caller = caller(&longer, requester.as_ref());
    match tasks.cancel(&id, &caller.asker()).await {
        Ok(record) => task_json(&record),
        Err(error) => task_error(error),
    }
}

/// The body of `POST /tasks/{id}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskAnswers {
    input_responses: Map<String, Value>,
}

/// `POST /tasks/{id}` with `{"inputResponses": {...}}`: answers what the
/// task waits for (other keys are ignored); once nothing is missing, the
/// call runs again here. The task as it is then.
pub(crate) async fn answer_task(
    State(longer): State<Arc<RestRounds>>,
    Path(id): Path<String>,
    requester: Option<axum::Extension<Requester>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(tasks) = &longer.rounds.tasks else {
        return no_tasks();
    };
    let caller = caller(&longer, requester.as_ref());
    let body = match crate::edge::body::read_arguments(&headers, body, longer.max_body_bytes).await
    {
        Ok(body) => body,
        Err(envelope) => return envelope.into_response(),
    };
    let answers: TaskAnswers = match serde_json::from_value(Value::Object(body)) {
        Ok(answers) => answers,
        Err(e) => return refused(&format!("the body is {{\"inputResponses\": {{...}}}}: {e}")),
    };
    match answer(tasks, &longer, &id, &caller, answers.input_responses).await {
        Ok(record) => task_json(&record),
        Err(error) => task_error(error),
    }
}

async fn answer(
    tasks: &Arc<Tasks>,
    longer: &RestRounds,
    id: &str,
    caller: &Caller,
    responses: Map<String, Value>,
) -> Result<TaskRecord, TaskError> {
    let asker = caller.asker();
    if let Some((record, claim)) = tasks.answer(id, &asker, responses, &answer_fits).await? {
        let path = run_path(longer, &longer.rounds.input_keys, TextFormat::Json);
        start_run(path, tasks, &record, claim, caller.view.clone());
    }
    tasks.get(id, &asker).await
}

/// Who asks about a task.
fn caller(longer: &RestRounds, requester: Option<&axum::Extension<Requester>>) -> Caller {
    let identity = requester.and_then(|requester| requester.0.0.as_ref());
    Caller::new(
        &longer.registry,
        identity.map(|identity| identity.name.clone()),
        identity.map_or_else(View::all, |identity| identity.tools.clone()),
    )
}

fn no_tasks() -> Response {
    Envelope::host_error(
        ErrorCode::NotFound,
        "this server keeps no tasks".to_string(),
        None,
    )
    .into_response()
}
