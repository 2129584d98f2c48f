//! What one call cost, returned to the caller with its result: REST
//! answers carry it as `meta`, MCP `tools/call` results in `_meta` under
//! `toolhost/call` (the same object). Agents and the dashboard can show
//! cost per call from it.
//!
//! ```json
//! {"durationMs": 1.42, "cpuMs": 0.61, "fuel": 18234, "peakMemoryBytes": 1179648,
//!  "code": "optimised", "warm": false}
//! ```
//!
//! - `durationMs`: wall time from the front handing the call in to the
//!   envelope, every outcome included;
//! - `cpuMs`, `fuel`, `peakMemoryBytes`, `code`: present when plugin code
//!   ran (not for an unknown tool, arguments the schema refused, or a call
//!   refused as BUSY before it started). `cpuMs` is the guest thread's CPU
//!   time from the instance's creation to the answer; `fuel` is what the
//!   guest burned (wasmtime counts it on every call); `peakMemoryBytes` is
//!   the largest total of the instance's memories and tables; `code` is
//!   `baseline` or `optimised`, the compiler whose code ran;
//! - `warm`: whether the instance was made ahead of the call: a large
//!   plugin's spare (no call has used it; it has answered `list-tools`) or
//!   one kept from an earlier call by a policy's `reuse_instance`. `false`:
//!   instantiated for this call;
//! - `outbound`: present when a language runtime's tool made outbound
//!   HTTP requests (the `http` import): `requests` (redirects count),
//!   `bytesSent` and `bytesReceived` (bodies), `waitMs` (time spent
//!   waiting on them, inside `durationMs`).

use std::time::Duration;

use serde::Serialize;

use crate::runtime::CallUsage;

/// The `_meta` key of a call's accounting in an MCP result.
pub(crate) const CALL_META: &str = "toolhost/call";

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CallMeta {
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    pub warm: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outbound: Option<OutboundMeta>,
}

/// What a call did with outbound HTTP.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OutboundMeta {
    pub requests: u32,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub wait_ms: f64,
}

impl CallMeta {
    pub(crate) fn new(duration: Duration, usage: Option<&CallUsage>) -> CallMeta {
        CallMeta {
            duration_ms: milliseconds(duration),
            cpu_ms: usage.map(|usage| milliseconds(usage.cpu)),
            fuel: usage.map(|usage| usage.fuel),
            peak_memory_bytes: usage.map(|usage| usage.peak_memory_bytes),
            code: usage.map(|usage| usage.tier.code_name()),
            warm: usage.is_some_and(|usage| usage.warm),
            outbound: usage
                .map(|usage| usage.outbound)
                .filter(|outbound| outbound.requests > 0)
                .map(|outbound| OutboundMeta {
                    requests: outbound.requests,
                    bytes_sent: outbound.bytes_sent,
                    bytes_received: outbound.bytes_received,
                    wait_ms: milliseconds(outbound.wait),
                }),
        }
    }
}

/// Milliseconds, to the microsecond.
fn milliseconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}
