//! The one call path every front uses: look the tool up, validate the
//! arguments against its input schema, run it, normalize the outcome.
//!
//! Fronts hand in a tool name and the arguments (raw bytes, or an already
//! parsed JSON value) and get an [`Envelope`] back; they never see wasmtime
//! or the registry's internals.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::call::envelope::{Envelope, TextFormat, schema_problems};
use crate::call::errors::ErrorCode;
use crate::registry::Registry;
use crate::runtime::{CallClient, CallFailure};

/// How long a call waits for a free slot of a plugin that is at its
/// `max_concurrent` limit (or for a free slot of the host) before it is
/// refused as BUSY.
const BUSY_WAIT: std::time::Duration = crate::runtime::QUEUE_WAIT;

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

/// Looks up, validates, calls and normalizes. Never fails: every outcome,
/// good or bad, is an envelope.
pub async fn call_tool(
    registry: &Arc<Registry>,
    name: &str,
    arguments: Map<String, Value>,
    format: TextFormat,
    client: CallClient,
) -> Envelope {
    let Some(entry) = registry.snapshot().tool(name).cloned() else {
        return tool_not_found(registry, name);
    };
    let arguments = Value::Object(arguments);
    // `is_valid` stops at the first fault; listing every fault is only
    // worth its cost for arguments that are wrong.
    if !entry.tool.input_validator.is_valid(&arguments) {
        let problems = schema_problems(&entry.tool.input_validator, &arguments);
        let summary: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Envelope::host_error(
            ErrorCode::InvalidArguments,
            format!(
                "the arguments do not match the input schema of {name:?}: {}",
                summary.join("; ")
            ),
            Some(json!({ "errors": problems })),
        );
    }

    // A plugin takes calls up to its share (`max_concurrent`); a call over
    // it waits briefly for a slot, then is refused as BUSY.
    let plugin = &entry.plugin;
    let Ok(Ok(_permit)) =
        tokio::time::timeout(BUSY_WAIT, plugin.permits.clone().acquire_owned()).await
    else {
        return Envelope::host_error(
            ErrorCode::Busy,
            format!(
                "plugin {:?} is already running its maximum of {} calls; try again",
                plugin.id, plugin.max_concurrent
            ),
            Some(json!({ "plugin": plugin.id, "retryAfterMs": BUSY_WAIT.as_millis() })),
        );
    };
    let outcome = registry
        .runtime()
        .call_tool(
            &plugin.compiled,
            &plugin.grants,
            name,
            arguments.to_string(),
            client,
        )
        .await;
    match outcome {
        Ok(Ok(output)) => Envelope::success(output, &entry.tool, format),
        Ok(Err(tool_error)) => Envelope::tool_error(tool_error, name),
        Err(failure) => call_failure(name, &entry.plugin.id, failure),
    }
}

pub(crate) fn tool_not_found(registry: &Registry, name: &str) -> Envelope {
    Envelope::host_error(
        ErrorCode::ToolNotFound,
        format!("no tool named {name:?} is loaded"),
        Some(json!({ "available": registry.snapshot().tool_names() })),
    )
}

fn call_failure(tool: &str, plugin: &str, failure: CallFailure) -> Envelope {
    let code = match &failure {
        CallFailure::Timeout(_) => ErrorCode::ToolTimeout,
        CallFailure::OutOfFuel { .. } => ErrorCode::OutOfFuel,
        CallFailure::InvalidOutput(_) => ErrorCode::InvalidPluginOutput,
        CallFailure::OutOfMemory { .. } => ErrorCode::OutOfMemory,
        CallFailure::Trapped { .. } => ErrorCode::PluginTrapped,
        CallFailure::Busy { .. } => ErrorCode::Busy,
        CallFailure::Host(_) => ErrorCode::HostError,
    };
    let mut details = json!({ "tool": tool, "plugin": plugin });
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
    Envelope::host_error(code, format!("tool {tool:?} {failure}"), Some(details))
}
