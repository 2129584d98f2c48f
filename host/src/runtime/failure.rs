//! Why the runtime could not do what was asked, as types: a call that
//! produced no answer ([`CallFailure`]) and a file that is not a usable
//! plugin ([`CompileError`]). Each says in its `Display` what happened in
//! a sentence for people; the fronts decide codes and statuses.

use std::time::Duration;

/// Why a call did not produce the plugin's answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallFailure {
    /// It ran past its deadline.
    #[error("ran past its {0:?} deadline")]
    Timeout(Duration),
    /// It used up its instruction budget (fuel).
    #[error("used up its budget of {fuel} fuel")]
    OutOfFuel { fuel: u64 },
    /// It returned values the component model refuses to lift (a string
    /// that is not UTF-8).
    #[error("returned an invalid result: {0}")]
    InvalidOutput(String),
    /// It tried to grow memory past the cap.
    #[error("tried to use more than its {cap_bytes}-byte memory cap")]
    OutOfMemory { cap_bytes: usize },
    /// It trapped. `reason` is wasmtime's description of the trap;
    /// `stderr` the tail of what the plugin printed (a panic message, say).
    #[error("trapped: {reason}")]
    Trapped { reason: String, stderr: String },
    /// Every call slot of the host stayed taken for the whole queue wait.
    #[error("could not start: the host is already running its maximum of {max_calls} calls")]
    Busy { max_calls: usize },
    /// The host or the plugin's policy, not the plugin, failed: a granted
    /// directory that cannot be opened, say.
    #[error("could not run: {0}")]
    Host(String),
}

/// Why a file could not be compiled and linked as a plugin.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// No `\0asm` header.
    #[error("not a WebAssembly file ({bytes} bytes, no \\0asm header)")]
    NotWasm { bytes: usize },
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build it for \
         wasm32-wasip2, or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// wasmtime refused it (malformed, or past a per-component limit).
    #[error("invalid component: {0}")]
    Invalid(String),
    /// It imports something toolhost does not provide.
    #[error("the component needs an import toolhost does not provide: {0}")]
    MissingImport(String),
    /// It does not export the plugin world's interface.
    #[error(
        "the component does not implement the toolhost:plugin/tools@0.1.0 \
         interface (see wit/plugin.wit): {0}"
    )]
    NotAPlugin(String),
}

/// The innermost cause of a wasmtime error: a trap's own description, or
/// the root of the error chain.
pub(crate) fn root_cause(error: &wasmtime::Error) -> String {
    let trap = error
        .downcast_ref::<wasmtime::Trap>()
        .map(|trap| trap.to_string());
    trap.unwrap_or_else(|| error.root_cause().to_string())
}

/// The last `max_bytes` of `text` (cut at a character boundary), trimmed.
pub(crate) fn tail(text: &str, max_bytes: usize) -> String {
    let start = text.len().saturating_sub(max_bytes);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].trim().to_string()
}
