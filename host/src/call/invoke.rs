//! The one call path every front uses: look the tool up, validate the
//! arguments against its input schema, run it, normalize the outcome.
//!
//! Fronts hand in a tool name and the arguments (raw bytes, or an already
//! parsed JSON value) and get an [`Envelope`] back; they never see wasmtime
//! or the registry's internals.
//!
//! Every line a call logs is in one `tracing` span named `call` (tool,
//! plugin, front, outcome, duration, and the guest's CPU time, fuel and
//! peak memory when its code ran), made up front only for debug logs and
//! traces (`span.rs`); what the plugin prints is logged inside it. A
//! failure the host detects (a deadline, the memory cap, a trap, a full
//! house) is logged once at `warn`; a caller's own mistake (bad arguments,
//! an unknown tool) only at `debug`. Nothing is logged per call at
//! `info`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::call::Calls;
use crate::call::accounting::CallMeta;
use crate::call::envelope::{Envelope, TextFormat, schema_problems};
use crate::call::errors::ErrorCode;
use crate::call::slots::{BUSY_WAIT, slots, try_slots};
use crate::call::span::CallSpan;
use crate::registry::Registry;
use crate::registry::view::View;
use crate::runtime::{CallClient, CallFailure, CallUsage};

/// Parses a request body into an arguments object. An empty body means no
/// arguments (`{}`), so `curl -X POST` works for tools that take none.
pub(crate) fn parse_arguments(body: &[u8]) -> Result<Map<String, Value>, Envelope> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => arguments_object(value),
        Err(e) => Err(Envelope::host_error(
            ErrorCode::InvalidJson,
            format!("the body is not valid JSON: {e}"),
            Some(json!({ "line": e.line(), "column": e.column() })),
        )),
    }
}

/// Arguments must be a JSON object; `null` counts as "no arguments".
pub(crate) fn arguments_object(value: Value) -> Result<Map<String, Value>, Envelope> {
    match value {
        Value::Object(object) => Ok(object),
        Value::Null => Ok(Map::new()),
        other => Err(Envelope::host_error(
            ErrorCode::InvalidJson,
            "the arguments must be a JSON object",
            Some(json!({ "received": other })),
        )),
    }
}

/// Which front a call came in through, as the call's span names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    Rest,
    Mcp,
    Cgi,
    Cli,
    /// A program that embeds the library.
    Library,
}

impl Front {
    pub fn as_str(self) -> &'static str {
        match self {
            Front::Rest => "rest",
            Front::Mcp => "mcp",
            Front::Cgi => "cgi",
            Front::Cli => "cli",
            Front::Library => "library",
        }
    }
}

/// Looks up, validates, calls and normalizes, inside the call's span.
/// Never fails: every outcome, good or bad, is an envelope. A tool outside
/// `view` answers exactly as one that does not exist.
#[allow(clippy::too_many_arguments)]
pub async fn call_tool(
    registry: &Arc<Registry>,
    calls: &Calls,
    name: &str,
    arguments: Map<String, Value>,
    format: TextFormat,
    client: CallClient,
    front: Front,
    view: &View,
) -> Envelope {
    call_tool_until(
        registry, calls, name, arguments, format, client, front, view, None,
    )
    .await
}

/// As [`call_tool`], with `task_deadline`, a task's own deadline when the
/// call is a task's run (its tool's call deadline still holds if longer).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn call_tool_until(
    registry: &Arc<Registry>,
    calls: &Calls,
    name: &str,
    arguments: Map<String, Value>,
    format: TextFormat,
    client: CallClient,
    front: Front,
    view: &View,
    task_deadline: Option<Duration>,
) -> Envelope {
    let started = Instant::now();
    // The tool is looked up first, so that the span is made with its
    // plugin rather than told it afterwards (each field recorded later is
    // formatted again by the log layer).
    let entry = visible_tool(registry, name, view);
    let plugin = entry.as_ref().map(|entry| entry.plugin.id.as_str());
    let span = CallSpan::new(name, plugin, front.as_str());
    let (mut envelope, usage) = match &entry {
        Some(entry) => {
            run_tool(
                registry,
                calls,
                name,
                entry,
                arguments,
                format,
                client,
                task_deadline,
                &span,
            )
            .instrument(span.running())
            .await
        }
        None => (tool_not_found(registry, name, view), None),
    };
    // One reading of the clock for the answer's `meta` and the ledger.
    let duration = started.elapsed();
    envelope.meta = Some(Box::new(CallMeta::new(duration, usage.as_ref())));
    let outcome = envelope
        .error
        .as_ref()
        .map_or("ok", |error| error.outcome());
    calls.settle(
        &span.running(),
        plugin.map(|plugin| (name, plugin)),
        outcome,
        duration,
        usage.as_ref(),
    );
    envelope
}

#[allow(clippy::too_many_arguments)]
async fn run_tool(
    registry: &Arc<Registry>,
    calls: &Calls,
    name: &str,
    entry: &crate::registry::ServedTool,
    arguments: Map<String, Value>,
    format: TextFormat,
    client: CallClient,
    task_deadline: Option<Duration>,
    span: &CallSpan<'_>,
) -> (Envelope, Option<CallUsage>) {
    let arguments = Value::Object(arguments);
    // `is_valid` stops at the first fault; listing every fault is only
    // worth its cost for arguments that are wrong.
    if !entry.tool.input_validator.is_valid(&arguments) {
        let problems = schema_problems(&entry.tool.input_validator, &arguments);
        tracing::debug!(code = %ErrorCode::InvalidArguments, "arguments refused");
        let summary: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        let refused = Envelope::host_error(
            ErrorCode::InvalidArguments,
            format!(
                "the arguments do not match the input schema of {name:?}: {}",
                summary.join("; ")
            ),
            Some(json!({ "errors": problems })),
        );
        return (refused, None);
    }

    let plugin = &entry.plugin;
    // Free slots are taken at once; a call that must wait for them, and
    // may be refused as BUSY (a warn line), waits in its span.
    let slots = match try_slots(&calls.slots, plugin) {
        Some(slots) => Ok(slots),
        None => {
            slots(&calls.slots, plugin)
                .instrument(span.for_lines())
                .await
        }
    };
    let _slots = match slots {
        Ok(slots) => slots,
        Err(busy) => return (busy, None),
    };
    let mut run = registry
        .runtime()
        .call_tool_until(
            &plugin.compiled,
            &plugin.grants,
            // The plugin is called by the name it declared; clients use the
            // served one (`namespace__tool` in a namespace).
            &entry.tool.declared,
            arguments.to_string(),
            client,
            task_deadline,
        )
        .await;
    if !run.printed.is_empty() {
        span.for_lines().in_scope(|| run.printed.log());
    }
    let envelope = tracing::debug_span!("normalise").in_scope(|| match run.outcome {
        Ok(Ok(output)) => Envelope::success(output, &entry.tool, format),
        Ok(Err(tool_error)) => Envelope::tool_error(tool_error, name),
        Err(failure) => span
            .for_lines()
            .in_scope(|| call_failure(name, &entry.plugin.id, failure)),
    });
    (envelope, run.usage)
}

/// The tool `name`, if it serves and `view` sees its plugin.
pub(crate) fn visible_tool(
    registry: &Registry,
    name: &str,
    view: &View,
) -> Option<crate::registry::ServedTool> {
    let snapshot = registry.peek();
    let found = snapshot.tool(name);
    // One match either way: a tool out of view costs what a missing one
    // does.
    let seen = view.sees(found.map_or("", |entry| entry.plugin.id.as_str()));
    found.filter(|_| seen).cloned()
}

/// The answer for a tool that does not exist, or that `view` does not
/// see: the two are the same, to the byte (`available` is what `view`
/// sees, at most [`MAX_AVAILABLE`] names).
pub(crate) fn tool_not_found(registry: &Registry, name: &str, view: &View) -> Envelope {
    let snapshot = registry.snapshot();
    let available = snapshot
        .tools()
        .filter(|entry| view.sees(&entry.plugin.id))
        .map(|entry| entry.tool.name.as_str());
    Envelope::host_error(
        ErrorCode::ToolNotFound,
        format!("no tool named {name:?} is loaded"),
        Some(not_found_details(available)),
    )
}

/// How many names a not-found answer lists at most.
pub(crate) const MAX_AVAILABLE: usize = 100;

/// A not-found answer's details: the first [`MAX_AVAILABLE`] names there
/// are (`available`), and with more, how many there are in all
/// (`availableCount`). A name mistyped on a server of 10,000 tools was
/// answered with all of them, 300 kB written for each wrong name.
pub(crate) fn not_found_details<'a>(names: impl Iterator<Item = &'a str>) -> Value {
    let mut available = Vec::new();
    let mut count = 0usize;
    for name in names {
        if count < MAX_AVAILABLE {
            available.push(name);
        }
        count += 1;
    }
    if count > MAX_AVAILABLE {
        json!({ "available": available, "availableCount": count })
    } else {
        json!({ "available": available })
    }
}

fn call_failure(tool: &str, plugin: &str, failure: CallFailure) -> Envelope {
    let subject = format!("tool {tool:?}");
    failure_envelope(&subject, json!({ "tool": tool, "plugin": plugin }), failure)
}

/// A failure the host detected while `subject` ("tool \"echo\"",
/// "prompt \"greet\"") ran, as its envelope with `details` and what the
/// failure adds; logged once at `warn`.
pub(crate) fn failure_envelope(
    subject: &str,
    mut details: Value,
    failure: CallFailure,
) -> Envelope {
    let code = match &failure {
        CallFailure::Timeout(_) => ErrorCode::ToolTimeout,
        CallFailure::OutOfFuel { .. } => ErrorCode::OutOfFuel,
        CallFailure::InvalidOutput(_) => ErrorCode::InvalidPluginOutput,
        CallFailure::OutOfMemory { .. } => ErrorCode::OutOfMemory,
        CallFailure::Trapped { .. } => ErrorCode::PluginTrapped,
        CallFailure::Busy { .. } => ErrorCode::Busy,
        CallFailure::Host(_) => ErrorCode::HostError,
    };
    match &failure {
        CallFailure::Timeout(limit) => details["timeoutMs"] = json!(limit.as_millis()),
        CallFailure::OutOfFuel { fuel } => details["fuel"] = json!(fuel),
        CallFailure::OutOfMemory { cap_bytes } => details["memoryCapBytes"] = json!(cap_bytes),
        CallFailure::Trapped { stderr, .. } if !stderr.is_empty() => {
            details["stderr"] = json!(stderr)
        }
        CallFailure::Busy { max_calls } => {
            details["maxCalls"] = json!(max_calls);
            details["retryAfterMs"] = json!(BUSY_WAIT.as_millis());
        }
        CallFailure::Trapped { .. } | CallFailure::InvalidOutput(_) | CallFailure::Host(_) => {}
    }
    // The one line the server log gets for a failure the host detected.
    match &failure {
        CallFailure::Trapped { stderr, .. } if !stderr.is_empty() => {
            tracing::warn!(%code, stderr = ?stderr, "{subject} {failure}")
        }
        _ => tracing::warn!(%code, "{subject} {failure}"),
    }
    Envelope::host_error(code, format!("{subject} {failure}"), Some(details))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_not_found_answer_lists_at_most_a_hundred_names_and_counts_the_rest() {
        let few: Vec<String> = (0..3).map(|n| format!("t{n}")).collect();
        assert_eq!(
            not_found_details(few.iter().map(String::as_str)),
            json!({ "available": ["t0", "t1", "t2"] })
        );
        let exactly: Vec<String> = (0..MAX_AVAILABLE).map(|n| format!("t{n}")).collect();
        let details = not_found_details(exactly.iter().map(String::as_str));
        assert_eq!(
            details["available"].as_array().unwrap().len(),
            MAX_AVAILABLE
        );
        assert!(details.get("availableCount").is_none(), "{details}");
        let many: Vec<String> = (0..10_000).map(|n| format!("t{n:05}")).collect();
        let details = not_found_details(many.iter().map(String::as_str));
        assert_eq!(details["availableCount"], 10_000);
        let listed = details["available"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_AVAILABLE);
        assert_eq!(listed[0], "t00000");
        assert_eq!(listed[MAX_AVAILABLE - 1], "t00099");
    }
}
