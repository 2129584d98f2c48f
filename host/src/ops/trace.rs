//! A request's span at the front edge, continuing the caller's trace: a
//! W3C `traceparent` (and `tracestate`) from the HTTP headers, or from an
//! MCP request's `params._meta` (the MCP trace-context convention), makes
//! the request a child of the caller's span instead of a new trace. The
//! span is at `debug`: only the OpenTelemetry exporter (when configured,
//! `commands/telemetry.rs`) takes it, so without one it costs nothing.
//!
//! Attributes follow the OpenTelemetry semantic conventions for MCP and
//! GenAI where they exist: `mcp.method.name`, `mcp.session.id`, the span
//! named `{method} {tool}`, `gen_ai.tool.name`, `gen_ai.operation.name`
//! and `error.type` (the error code) on a failure. Below it come `call`
//! (the invoke, `call/invoke.rs`), and its `instantiate`, `guest` and
//! `normalise`.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::call::envelope::Envelope;

/// The headers that carry a caller's trace context (W3C Trace Context):
/// `traceparent`, then `tracestate`.
pub(crate) const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// The caller's trace context, as it came in.
#[derive(Debug, Default, Clone)]
pub(crate) struct TraceParent {
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
}

impl TraceParent {
    /// From HTTP headers.
    pub(crate) fn from_headers(headers: &axum::http::HeaderMap) -> TraceParent {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        TraceParent {
            traceparent: header(TRACE_HEADERS[0]),
            tracestate: header(TRACE_HEADERS[1]),
        }
    }

    /// `other` where this one has nothing.
    pub(crate) fn or(self, other: TraceParent) -> TraceParent {
        if self.traceparent.is_some() {
            self
        } else {
            other
        }
    }
}

/// The span of one request to tool `tool` at a front: `name` makes the
/// span's name (`POST /tools/echo`, `tools/call echo`) and `parent` the
/// caller's context, both only when an exporter takes the span (without
/// one, this costs a disabled span and nothing else).
pub(crate) fn request_span(
    name: impl FnOnce() -> String,
    tool: &str,
    session: Option<&str>,
    parent: impl FnOnce() -> TraceParent,
) -> tracing::Span {
    let span = tracing::debug_span!(
        "request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        "mcp.method.name" = "tools/call",
        "mcp.session.id" = session,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "error.type" = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("otel.name", name());
    let parent = parent();
    if let Some(traceparent) = &parent.traceparent {
        let mut carrier = HashMap::from([("traceparent".to_string(), traceparent.clone())]);
        if let Some(tracestate) = &parent.tracestate {
            carrier.insert("tracestate".to_string(), tracestate.clone());
        }
        let context = TraceContextPropagator::new().extract(&carrier);
        // Refused only when no OpenTelemetry layer is installed: then
        // there is no trace to continue.
        let _ = span.set_parent(context);
    }
    span
}

/// Marks the request's span with the call's error code, if it failed.
pub(crate) fn record_outcome(span: &tracing::Span, envelope: &Envelope) {
    if let Some(error) = &envelope.error {
        span.record("error.type", error.code.as_str());
        span.record("otel.status_code", "ERROR");
    }
}
