//! Resources, prompts and completion on the one call path (contract
//! 0.2.0): every front (MCP, REST) hands in a URI, a prompt name or a
//! completion request and gets the MCP-shaped JSON answer, or an
//! [`Envelope`] error whose code the front maps (`errors.rs`). The plugin's
//! answer is checked here (URIs, MIME types, sizes) as a tool's result is
//! in `envelope.rs`; its run takes the same call slots and is accounted in
//! the same ledger.
//!
//! Each list and lookup takes the caller's [`View`]: a plugin outside it
//! lists nothing, and its resources and prompts answer as ones that do not
//! exist (the same code, message and details).
//!
//! A view (`registry/app_views.rs`) is read from what its plugin declared
//! as it loaded, with no code run.
//!
//! With `--require-approval`, a fixed resource and a prompt without
//! arguments answer what their version answered as its definitions were
//! judged approved (`registry/pinned.rs`), with no code run; a template's
//! resources and a prompt with arguments run the code, as a tool does.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::call::Calls;
use crate::call::envelope::{
    Envelope, InvalidBlock, MAX_RESULT_BYTES, content_block, resource_contents,
};
use crate::call::errors::ErrorCode;
use crate::call::invoke::failure_envelope;
use crate::call::slots::slots;
use crate::registry::Registry;
use crate::registry::pinned::{Answers, Kept};
use crate::registry::plugin::LoadedPlugin;
use crate::registry::view::View;
use crate::runtime::{Answer, Ask, CallClient, CompletionRef, Role};

/// Completion values returned at most (MCP's cap).
const MAX_COMPLETIONS: usize = 100;

/// Refuses a URI longer than `max_bytes` (`--max-uri-bytes`) before it is
/// looked up, kept or echoed back.
pub(crate) fn check_uri(uri: &str, max_bytes: usize) -> Result<(), Envelope> {
    if uri.len() <= max_bytes {
        return Ok(());
    }
    Err(Envelope::host_error(
        ErrorCode::InvalidRequest,
        format!(
            "the resource URI is {} bytes, over the limit of {max_bytes} (--max-uri-bytes)",
            uri.len()
        ),
        Some(json!({ "uriBytes": uri.len(), "limitBytes": max_bytes })),
    ))
}

/// `resources/list`: every fixed resource `view` sees, in plugin order.
pub(crate) fn list_resources(registry: &Registry, view: &View) -> Value {
    let snapshot = registry.snapshot();
    let resources: Vec<&Map<String, Value>> = snapshot
        .serving()
        .filter(|plugin| view.sees(&plugin.id))
        .flat_map(|plugin| plugin.catalog.resources.iter().map(|r| &r.listing))
        .collect();
    let mut resources = json!(resources);
    // Each skill's SKILL.md is a resource too (SEP-2640).
    if let Some(list) = resources.as_array_mut() {
        list.extend(crate::call::skills_path::listings(registry, view));
    }
    json!({ "resources": resources })
}

/// `resources/templates/list`.
pub(crate) fn list_templates(registry: &Registry, view: &View) -> Value {
    let snapshot = registry.snapshot();
    let templates: Vec<&Map<String, Value>> = snapshot
        .serving()
        .filter(|plugin| view.sees(&plugin.id))
        .flat_map(|plugin| plugin.catalog.templates.iter().map(|t| &t.listing))
        .collect();
    json!({ "resourceTemplates": templates })
}

/// `prompts/list`.
pub(crate) fn list_prompts(registry: &Registry, view: &View) -> Value {
    let snapshot = registry.snapshot();
    let prompts: Vec<&Map<String, Value>> = snapshot
        .serving()
        .filter(|plugin| view.sees(&plugin.id))
        .flat_map(|plugin| plugin.catalog.prompts.iter().map(|p| &p.listing))
        .collect();
    json!({ "prompts": prompts })
}

/// What the server has besides tools, for the MCP capabilities.
pub(crate) struct Offered {
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
    pub(crate) completion: bool,
}

pub(crate) fn offered(registry: &Registry, view: &View) -> Offered {
    let snapshot = registry.snapshot();
    let mut offered = Offered {
        resources: false,
        prompts: false,
        completion: false,
    };
    for plugin in snapshot.serving().filter(|plugin| view.sees(&plugin.id)) {
        let catalog = &plugin.catalog;
        offered.resources |= !catalog.resources.is_empty() || !catalog.templates.is_empty();
        offered.prompts |= !catalog.prompts.is_empty();
        offered.completion |=
            catalog.completion && (!catalog.prompts.is_empty() || !catalog.templates.is_empty());
    }
    offered.resources |= registry.skills().any_seen(view);
    offered
}

/// `resources/read`: `{contents: [...]}`.
pub(crate) async fn read_resource(
    registry: &Arc<Registry>,
    calls: &Calls,
    uri: &str,
    view: &View,
) -> Result<Value, Envelope> {
    let not_found = || {
        Envelope::host_error(
            ErrorCode::ResourceNotFound,
            format!("no resource at {uri:?}"),
            Some(json!({ "uri": uri })),
        )
    };
    // A skill's file is read from the skill, never from a plugin.
    if let Some(answer) = crate::call::skills_path::read(registry, view, uri) {
        return answer;
    }
    let Some((plugin, declared)) = registry.snapshot().resource_seen(uri, view) else {
        return Err(not_found());
    };
    let what = format!("resource {uri:?}");
    let fixed = plugin.catalog.resources.iter().find(|r| r.uri == uri);
    // A view answers what it declared as its version loaded (the approved
    // one, under approval): no code runs.
    if let Some(view) = fixed.and_then(|r| r.view.as_ref()) {
        return Ok(json!({ "contents": [view.contents(uri)] }));
    }
    let fixed = fixed.is_some();
    let pinned = if fixed {
        approved_answers(registry, &plugin, &what)?
    } else {
        None
    };
    let answer = match pinned {
        Some(answers) => {
            let kept = answers.resource(uri);
            answer_kept(calls, &plugin, "resources/read", kept, &what)?
        }
        None => {
            let ask = Ask::ReadResource { uri: declared };
            let Answer::Contents(answer) = run(registry, calls, &plugin, ask, &what, None).await?
            else {
                return Err(wrong_answer(&what));
            };
            answer
        }
    };
    let contents = answer.map_err(|error| match error.code.as_str() {
        "NOT_FOUND" => not_found(),
        _ => Envelope::tool_error(error, &what),
    })?;
    let size: usize = contents
        .iter()
        .map(|c| c.uri.len() + body_len(&c.body))
        .sum();
    if size > MAX_RESULT_BYTES {
        return Err(too_large(&what, size));
    }
    let namespace = crate::registry::layout::namespace_of(&plugin.id);
    let contents = contents
        .into_iter()
        .map(|c| {
            let uri = plugin.catalog.served_uri(namespace, c.uri);
            resource_contents(uri, c.mime_type, c.body)
        })
        .collect::<Result<Vec<Value>, _>>()
        .map_err(|problem| invalid(&what, &problem))?;
    Ok(json!({ "contents": contents }))
}

/// `prompts/get`: `{description?, messages: [...]}`. Arguments are
/// strings; a required one missing or an unknown one is refused before the
/// plugin runs.
pub(crate) async fn get_prompt(
    registry: &Arc<Registry>,
    calls: &Calls,
    name: &str,
    arguments: Map<String, Value>,
    view: &View,
    client: CallClient,
) -> Result<Value, Envelope> {
    let snapshot = registry.snapshot();
    let Some(plugin) = snapshot.prompt(name, view) else {
        let available = snapshot
            .serving()
            .filter(|plugin| view.sees(&plugin.id))
            .flat_map(|p| p.catalog.prompts.iter().map(|p| p.name.as_str()));
        return Err(Envelope::host_error(
            ErrorCode::PromptNotFound,
            format!("no prompt named {name:?} is loaded"),
            Some(crate::call::invoke::not_found_details(available)),
        ));
    };
    let prompt = plugin
        .catalog
        .prompt(name)
        .ok_or_else(|| wrong_answer(name))?;
    let mut given = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in arguments {
        match value {
            _ if !prompt.arguments.iter().any(|(n, _)| *n == key) => {
                problems.push(format!("{key:?} is not an argument of this prompt"))
            }
            Value::String(text) => given.push((key, text)),
            other => problems.push(format!("{key:?} must be a string, not {other}")),
        }
    }
    for (argument, required) in &prompt.arguments {
        if *required && !given.iter().any(|(key, _)| key == argument) {
            problems.push(format!("{argument:?} is required"));
        }
    }
    if !problems.is_empty() {
        return Err(Envelope::host_error(
            ErrorCode::InvalidArguments,
            format!(
                "the arguments of prompt {name:?} are not valid: {}",
                problems.join("; ")
            ),
            Some(json!({ "problems": problems })),
        ));
    }
    let what = format!("prompt {name:?}");
    let pinned = if prompt.arguments.is_empty() {
        approved_answers(registry, &plugin, &what)?
    } else {
        None
    };
    let answer = match pinned {
        Some(answers) => {
            let kept = answers.prompt(name);
            answer_kept(calls, &plugin, "prompts/get", kept, &what)?
        }
        None => {
            let ask = Ask::GetPrompt {
                name: prompt.declared.clone(),
                arguments: given,
            };
            let Answer::Prompt(answer) = run(registry, calls, &plugin, ask, &what, client).await?
            else {
                return Err(wrong_answer(&what));
            };
            answer
        }
    };
    let result = answer.map_err(|error| Envelope::tool_error(error, &what))?;
    let mut messages = Vec::with_capacity(result.messages.len());
    let mut size = 0;
    for message in result.messages {
        let content = content_block(message.content).map_err(|p| invalid(&what, &p))?;
        size += content.to_string().len();
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({ "role": role, "content": content }));
    }
    if size > MAX_RESULT_BYTES {
        return Err(too_large(&what, size));
    }
    let mut answer = json!({ "messages": messages });
    if let Some(description) = result.description {
        answer["description"] = json!(description);
    }
    Ok(answer)
}

/// What `completion/complete` names: a prompt by its served name, or a URI
/// template.
pub(crate) enum Completing {
    Prompt(String),
    Template(String),
}

/// `completion/complete`: `{completion: {values, total?, hasMore}}`. A
/// reference no plugin completes gets no values, as MCP allows.
pub(crate) async fn complete(
    registry: &Arc<Registry>,
    calls: &Calls,
    reference: Completing,
    argument: String,
    value: String,
    context: Vec<(String, String)>,
    view: &View,
) -> Result<Value, Envelope> {
    let empty = json!({ "completion": { "values": [], "hasMore": false } });
    let snapshot = registry.snapshot();
    let (plugin, reference, what) = match reference {
        Completing::Prompt(name) => {
            let Some(plugin) = snapshot.prompt(&name, view) else {
                return Ok(empty);
            };
            let declared = plugin
                .catalog
                .prompt(&name)
                .map(|p| p.declared.clone())
                .unwrap_or_default();
            (
                plugin,
                CompletionRef::Prompt(declared),
                format!("prompt {name:?}"),
            )
        }
        Completing::Template(template) => {
            let mut seen = snapshot.serving().filter(|plugin| view.sees(&plugin.id));
            let Some((plugin, declared)) = seen.find_map(|p| {
                let t = p
                    .catalog
                    .templates
                    .iter()
                    .find(|t| t.template == template)?;
                Some((p.clone(), t.declared.clone()))
            }) else {
                return Ok(empty);
            };
            let what = format!("URI template {template:?}");
            (plugin, CompletionRef::ResourceTemplate(declared), what)
        }
    };
    if !plugin.catalog.completion {
        return Ok(empty);
    }
    let ask = Ask::Complete {
        reference,
        argument,
        value,
        context,
    };
    let Answer::Completions(completions) = run(registry, calls, &plugin, ask, &what, None).await?
    else {
        return Err(wrong_answer(&what));
    };
    let has_more = completions.has_more || completions.values.len() > MAX_COMPLETIONS;
    let values: Vec<String> = completions
        .values
        .into_iter()
        .take(MAX_COMPLETIONS)
        .collect();
    let mut completion = json!({ "values": values, "hasMore": has_more });
    if let Some(total) = completions.total {
        completion["total"] = json!(total);
    }
    Ok(json!({ "completion": completion }))
}

/// Runs one ask on `plugin` in its call slots, counted in the ledger (and
/// so in the metrics and the dashboard) under the MCP method's name:
/// `resources/read`, `prompts/get` or `completion/complete` (not the URI:
/// templates make those endless).
async fn run(
    registry: &Arc<Registry>,
    calls: &Calls,
    plugin: &Arc<LoadedPlugin>,
    ask: Ask,
    what: &str,
    client: CallClient,
) -> Result<Answer, Envelope> {
    let method = match &ask {
        Ask::ReadResource { .. } => "resources/read",
        Ask::GetPrompt { .. } => "prompts/get",
        Ask::Complete { .. } => "completion/complete",
    };
    let started = Instant::now();
    let _slots = match slots(&calls.slots, plugin).await {
        Ok(slots) => slots,
        Err(busy) => {
            calls
                .ledger
                .record(Some((method, &plugin.id)), "BUSY", started.elapsed(), None);
            return Err(busy);
        }
    };
    // The same span a tool call gets (`invoke.rs`): what was asked, of
    // which plugin, and with debug logs, how it ended.
    let span = tracing::info_span!(
        "call",
        tool = method,
        plugin = %plugin.id,
        asked = what,
        outcome = tracing::field::Empty,
        duration_ms = tracing::field::Empty,
        cpu_ms = tracing::field::Empty,
        fuel = tracing::field::Empty,
        peak_memory_bytes = tracing::field::Empty,
    );
    let (outcome, usage) = registry
        .runtime()
        .ask(&plugin.compiled, &plugin.grants, ask, client)
        .instrument(span.clone())
        .await;
    let result =
        outcome.map_err(|failure| failure_envelope(what, json!({ "plugin": plugin.id }), failure));
    let outcome = match &result {
        Ok(_) => "ok",
        Err(envelope) => envelope
            .error
            .as_ref()
            .map_or(ErrorCode::HostError.as_str(), |e| e.outcome()),
    };
    calls.settle(
        &span,
        Some((method, &plugin.id)),
        outcome,
        started.elapsed(),
        usage.as_ref(),
    );
    result
}

/// With `--require-approval`, the answers `plugin` serves its fixed
/// resources and prompts without arguments from: those it gave as its
/// definitions were judged approved (`registry/approvals.rs`). `None`
/// without approvals: the code answers. A version serving without them is
/// refused, not run.
fn approved_answers(
    registry: &Registry,
    plugin: &LoadedPlugin,
    what: &str,
) -> Result<Option<Arc<Answers>>, Envelope> {
    let Some(approvals) = registry.approvals() else {
        return Ok(None);
    };
    match approvals.answers(plugin) {
        Some(answers) => Ok(Some(answers)),
        None => Err(Envelope::host_error(
            ErrorCode::HostError,
            format!("{what}: no approved answer is kept for the version serving it"),
            Some(json!({ "plugin": plugin.id })),
        )),
    }
}

/// The answer `kept` for `plugin` when its definitions were approved,
/// counted in the ledger under `method` like a run, with no usage: no code
/// runs, so it takes no call slot either.
fn answer_kept<T: Clone>(
    calls: &Calls,
    plugin: &LoadedPlugin,
    method: &str,
    kept: Option<&Kept<T>>,
    what: &str,
) -> Result<T, Envelope> {
    let started = Instant::now();
    let result = match kept {
        Some(Kept::Answered(answer)) => Ok(answer.clone()),
        Some(Kept::Failed(failure)) => Err(failure_envelope(
            &format!("{what} (as its approved version loaded)"),
            json!({ "plugin": plugin.id }),
            failure.clone(),
        )),
        Some(Kept::TooLarge { bytes }) => Err(Envelope::host_error(
            ErrorCode::ResultTooLarge,
            format!(
                "{what} answered with {bytes} bytes as its approved version loaded, more than \
                 is kept of an approved answer ({} bytes, {} for a version's)",
                crate::registry::pinned::KEPT_BYTES,
                crate::registry::pinned::KEPT_VERSION_BYTES
            ),
            Some(json!({ "sizeBytes": bytes })),
        )),
        None => Err(Envelope::host_error(
            ErrorCode::HostError,
            format!("{what}: no approved answer is kept for it"),
            Some(json!({ "plugin": plugin.id })),
        )),
    };
    let outcome = match &result {
        Ok(_) => "ok",
        Err(envelope) => envelope
            .error
            .as_ref()
            .map_or(ErrorCode::HostError.as_str(), |e| e.outcome()),
    };
    calls
        .ledger
        .record(Some((method, &plugin.id)), outcome, started.elapsed(), None);
    result
}

fn body_len(body: &crate::runtime::ResourceBody) -> usize {
    match body {
        crate::runtime::ResourceBody::Text(text) => text.len(),
        crate::runtime::ResourceBody::Blob(bytes) => bytes.len() * 4 / 3,
    }
}

fn too_large(what: &str, size: usize) -> Envelope {
    Envelope::host_error(
        ErrorCode::ResultTooLarge,
        format!("{what} answered with {size} bytes, over the {MAX_RESULT_BYTES}-byte limit"),
        Some(json!({ "sizeBytes": size, "limitBytes": MAX_RESULT_BYTES })),
    )
}

fn invalid(what: &str, problem: &InvalidBlock) -> Envelope {
    Envelope::host_error(
        ErrorCode::InvalidPluginOutput,
        format!("{what} returned an invalid answer: {problem}"),
        None,
    )
}

fn wrong_answer(what: &str) -> Envelope {
    Envelope::host_error(
        ErrorCode::HostError,
        format!("{what}: the host asked for one thing and got another"),
        None,
    )
}
