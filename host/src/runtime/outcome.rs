//! A finished call's store turned into the runtime's own outcome: what the
//! call used ([`usage_of`]), what the plugin printed ([`Printed`], logged
//! by whoever holds the call's span), and wasmtime's result or trap as the
//! plugin's value or a [`CallFailure`].

use std::mem::take;
use std::sync::Arc;
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
        warm: false,
        outbound: store.data().outbound.usage,
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
/// stream's text and how many bytes past the bound were dropped. Never
/// lost: what is not logged by [`Printed::log`] is logged when it is
/// dropped, as when a caller went away before the call ended and its
/// answer is dropped unread. Such lines name the plugin and the stream,
/// but no call span holds them (the call's future is gone).
#[derive(Debug, Default)]
pub struct Printed {
    plugin: Arc<str>,
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
    /// is in (a tool call's, `call/invoke.rs`); once.
    pub fn log(&mut self) {
        let (stdout, stderr) = (take(&mut self.stdout), take(&mut self.stderr));
        log_output(&self.plugin, "stdout", &stdout);
        log_output(&self.plugin, "stderr", &stderr);
    }
}

impl Drop for Printed {
    fn drop(&mut self) {
        if !self.is_empty() {
            self.log();
        }
    }
}

/// Turns wasmtime's outcome into ours, with what `plugin` printed;
/// `timeout` is the deadline the call ran under.
pub(super) fn settle<T>(
    plugin: &Arc<str>,
    grants: &Grants,
    timeout: std::time::Duration,
    store: &mut Store<Sandbox>,
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> (Result<T, CallFailure>, Printed) {
    let sandbox = store.data_mut();
    let printed = Printed {
        plugin: plugin.clone(),
        stdout: sandbox.stdout.take(),
        stderr: sandbox.stderr.take(),
    };
    let refused = sandbox.limiter.refused;
    (
        failure_of(grants, timeout, refused, &printed.stderr, outcome),
        printed,
    )
}

/// `refused`: whether the memory budget refused a growth in the call.
fn failure_of<T>(
    grants: &Grants,
    timeout: std::time::Duration,
    refused: bool,
    stderr: &(String, usize),
    outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, CallFailure> {
    let error = match outcome {
        Ok(Ok(value)) => return Ok(value),
        Err(_elapsed) => return Err(CallFailure::Timeout(timeout)),
        Ok(Err(error)) => error,
    };
    Err(match error.downcast_ref::<Trap>() {
        _ if refused => CallFailure::OutOfMemory {
            cap_bytes: grants.limits.memory_bytes,
        },
        Some(Trap::Interrupt) => CallFailure::Timeout(timeout),
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

/// What `run` logs under a text subscriber at `level`, for tests of the
/// lines a call logs (here and `call/span.rs`).
#[cfg(test)]
pub(crate) fn logged_at(level: tracing::Level, run: impl FnOnce()) -> String {
    use std::sync::Mutex;

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let logs = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || Sink(sink.clone()))
        .finish();
    tracing::subscriber::with_default(logs, run);
    String::from_utf8(lines.lock().unwrap().clone()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `printed` leaves in an `info` log when `handle` is done with
    /// it.
    fn logged(printed: Printed, handle: impl FnOnce(Printed)) -> String {
        logged_at(tracing::Level::INFO, || handle(printed))
    }

    fn printed() -> Printed {
        Printed {
            plugin: "chatty".into(),
            stdout: ("one\ntwo\n".into(), 0),
            stderr: (String::new(), 7),
        }
    }

    #[test]
    fn what_a_plugin_printed_is_logged_once_even_when_nobody_reads_it() {
        // Logged by whoever holds the call's span ...
        let read = logged(printed(), |mut printed| {
            assert!(!printed.is_empty());
            printed.log();
            assert!(printed.is_empty(), "logged once, and so left empty");
        });
        // ... or, when the caller went away and the answer is dropped
        // unread, when it is dropped.
        let dropped = logged(printed(), drop);
        for log in [read, dropped] {
            assert_eq!(log.matches("one").count(), 1, "{log}");
            assert_eq!(log.matches("two").count(), 1, "{log}");
            assert_eq!(log.matches("dropped=7").count(), 1, "{log}");
            assert!(log.contains(r#"plugin="chatty""#), "{log}");
        }
        assert!(Printed::default().is_empty());
    }
}
