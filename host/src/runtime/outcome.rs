//! A finished call's store turned into the runtime's own outcome: what the
//! call used ([`usage_of`]), what the plugin printed ([`Printed`], logged
//! by whoever holds the call's span), and wasmtime's result or trap as the
//! plugin's value or a [`CallFailure`].

use std::time::Duration;

use wasmtime::{Store, Trap};

use super::bindings::exports::toolhost::plugin0_1_0::tools::{
    Output as PluginOutput, ToolError as PluginError,
};
use super::compiler;
use super::failure::{CallFailure, root_cause, tail};
use super::grants::Grants;
use super::sandbox::Sandbox;
use super::usage::CallUsage;

/// What a call used in `store`, but its CPU time (the executor measures
/// that).
pub(super) fn usage_of(
    store: &Store<Sandbox>,
    grants: &Grants,
    code: &compiler::Code,
) -> CallUsage {
    CallUsage {
        cpu: Duration::ZERO,
        fuel: grants
            .fuel_budget()
            .saturating_sub(store.get_fuel().unwrap_or(0)),
        peak_memory_bytes: store.data().limiter.peak_bytes as u64,
        tier: code.tier,
    }
}

/// One `call-tool`, as the runtime hands it back: the plugin's answer or
/// the failure, what the call used (when its code ran), and what it
/// printed.
#[derive(Debug)]
pub struct ToolRun {
    pub outcome: Result<Result<PluginOutput, PluginError>, CallFailure>,
    pub usage: Option<CallUsage>,
    pub printed: Printed,
}

/// What a plugin printed in one call, bounded (`log_capture.rs`): each
/// stream's text and how many bytes past the bound were dropped.
#[derive(Debug, Default)]
pub struct Printed {
    stdout: (String, usize),
    stderr: (String, usize),
}

impl Printed {
    /// Whether there is nothing to log.
    pub fn is_empty(&self) -> bool {
        [&self.stdout, &self.stderr]
            .iter()
            .all(|(text, dropped)| text.is_empty() && *dropped == 0)
    }

    /// Logs it, a line at `info` per printed line, in the span the caller
    /// is in (a tool call's, `call/invoke.rs`).
    pub fn log(&self, plugin: &str) {
        log_output(plugin, "stdout", &self.stdout);
        log_output(plugin, "stderr", &self.stderr);
    }
}

/// Turns wasmtime's outcome into ours, with what the plugin printed.
pub(super) fn settle<T>(
    grants: &Grants,
    store: &mut Store<Sandbox>,
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> (Result<T, CallFailure>, Printed) {
    let sandbox = store.data_mut();
    let printed = Printed {
        stdout: sandbox.stdout.take(),
        stderr: sandbox.stderr.take(),
    };
    let refused = sandbox.limiter.refused;
    (
        failure_of(grants, refused, &printed.stderr, outcome),
        printed,
    )
}

/// `refused`: whether the memory budget refused a growth in the call.
fn failure_of<T>(
    grants: &Grants,
    refused: bool,
    stderr: &(String, usize),
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, CallFailure> {
    let error = match outcome {
        Ok(Ok(value)) => return Ok(value),
        Err(_elapsed) => return Err(CallFailure::Timeout(grants.limits.timeout)),
        Ok(Err(error)) => error,
    };
    Err(match error.downcast_ref::<Trap>() {
        _ if refused => CallFailure::OutOfMemory {
            cap_bytes: grants.limits.memory_bytes,
        },
        Some(Trap::Interrupt) => CallFailure::Timeout(grants.limits.timeout),
        Some(Trap::OutOfFuel) => CallFailure::OutOfFuel {
            fuel: grants.fuel_budget(),
        },
        None if error.downcast_ref::<std::str::Utf8Error>().is_some() => {
            CallFailure::InvalidOutput(format!(
                "a string is not valid UTF-8 ({})",
                root_cause(&error)
            ))
        }
        _ => CallFailure::Trapped {
            reason: root_cause(&error),
            stderr: tail(&stderr.0, 1024),
        },
    })
}

fn log_output(plugin: &str, stream: &str, (text, dropped): &(String, usize)) {
    for line in text.lines() {
        tracing::info!(target: "toolhost::plugin", plugin, stream, "{line}");
    }
    if *dropped > 0 {
        tracing::warn!(target: "toolhost::plugin", plugin, stream, dropped, "output over the log limit was dropped");
    }
}
