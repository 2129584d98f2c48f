//! A finished call's store turned into the runtime's own outcome: what the
//! call used ([`usage_of`]), what the plugin printed (logged), and
//! wasmtime's result or trap as the plugin's value or a [`CallFailure`].

use std::time::Duration;

use wasmtime::{Store, Trap};

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

/// Logs what the plugin printed and turns wasmtime's outcome into ours.
pub(super) fn settle<T>(
    plugin: &str,
    grants: &Grants,
    store: &mut Store<Sandbox>,
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, CallFailure> {
    let sandbox = store.data_mut();
    log_output(plugin, "stdout", &sandbox.stdout.take());
    let stderr = sandbox.stderr.take();
    log_output(plugin, "stderr", &stderr);
    let error = match outcome {
        Ok(Ok(value)) => return Ok(value),
        Err(_elapsed) => return Err(CallFailure::Timeout(grants.limits.timeout)),
        Ok(Err(error)) => error,
    };
    Err(match error.downcast_ref::<Trap>() {
        _ if sandbox.limiter.refused => CallFailure::OutOfMemory {
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
