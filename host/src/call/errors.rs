//! The one list of host error codes, and the one place that maps each code to
//! an HTTP status, a JSON-RPC error code and a `toolhost call` exit status.
//!
//! Every front reports failures through [`ErrorCode`], so a given failure has
//! the same code whether it came over REST, MCP, CGI or the CLI. A plugin's
//! own business errors carry the plugin's code (a string); they are not in
//! this enum but share its HTTP status, [`TOOL_ERROR_HTTP_STATUS`].

use serde::Serialize;

/// Defines [`ErrorCode`] from one list: each code's variant, its wire
/// spelling and its meaning, in the order README documents them. The enum,
/// [`ErrorCode::ALL`] and [`ErrorCode::as_str`] all come from this list,
/// so the three cannot drift apart.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $wire:literal,)+) => {
        /// A failure detected by the host rather than reported by a plugin.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        pub(crate) enum ErrorCode {
            $($(#[doc = $doc])* #[serde(rename = $wire)] $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order README documents them.
            pub(crate) const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The code as it appears on the wire, e.g. `TOOL_NOT_FOUND`.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }
        }
    };
}

error_codes! {
    /// The request body is not JSON, or not a JSON object.
    InvalidJson = "INVALID_JSON",
    /// The arguments do not satisfy the tool's input schema.
    InvalidArguments = "INVALID_ARGUMENTS",
    /// No loaded plugin provides a tool of that name.
    ToolNotFound = "TOOL_NOT_FOUND",
    /// No loaded plugin serves a resource at that URI (a fixed one or one
    /// a template matches), or the plugin said it does not exist.
    ResourceNotFound = "RESOURCE_NOT_FOUND",
    /// No loaded plugin provides a prompt of that name.
    PromptNotFound = "PROMPT_NOT_FOUND",
    /// The request body is over the configured limit.
    PayloadTooLarge = "PAYLOAD_TOO_LARGE",
    /// The call ran past its deadline and was stopped.
    ToolTimeout = "TOOL_TIMEOUT",
    /// The call tried to grow its memory past the cap and was stopped.
    OutOfMemory = "OUT_OF_MEMORY",
    /// The plugin trapped (panicked, hit `unreachable`, overflowed its stack).
    PluginTrapped = "PLUGIN_TRAPPED",
    /// The plugin answered with something that is not a valid result: a bad
    /// content block, structured data that is not a JSON object, or data
    /// that breaks the tool's output schema.
    InvalidPluginOutput = "INVALID_PLUGIN_OUTPUT",
    /// The HTTP request itself is wrong (an unknown query parameter value).
    InvalidRequest = "INVALID_REQUEST",
    /// No such REST route.
    NotFound = "NOT_FOUND",
    /// The route exists, but not for that HTTP method.
    MethodNotAllowed = "METHOD_NOT_ALLOWED",
    /// The bearer token is missing or wrong.
    Unauthorized = "UNAUTHORIZED",
    /// The Host or Origin header names a host that is not allowed.
    Forbidden = "FORBIDDEN",
    /// The plugin is already running as many calls as its policy allows.
    Busy = "BUSY",
    /// The call used up the instruction budget (fuel) its policy sets.
    OutOfFuel = "OUT_OF_FUEL",
    /// The plugin's answer (a result or a tool error, every content block
    /// counted) is over the host's result limit.
    ResultTooLarge = "RESULT_TOO_LARGE",
    /// The host or the plugin's policy failed, not the plugin: a granted
    /// directory that cannot be opened, an internal fault.
    HostError = "HOST_ERROR",
    /// A published component was refused by the loader (the reason and the
    /// plugin's report in the details); what served before serves on.
    PluginRejected = "PLUGIN_REJECTED",
    /// A publish would take the person's namespace past its share of
    /// plugins or bytes (which, and the numbers, in the details); nothing
    /// was written.
    QuotaExceeded = "QUOTA_EXCEEDED",
    /// The plugin reported an error whose code breaks the rule for codes
    /// ([`is_valid_code`]); the code it gave, cut to 64 bytes, is in
    /// `details.pluginCode`. Metrics and the dashboard also count every
    /// plugin's own codes under this one.
    ToolError = "TOOL_ERROR",
    /// The client sent its request body too slowly: a pause longer than
    /// the header timeout, or the whole body past `--body-timeout-secs`.
    RequestTimeout = "REQUEST_TIMEOUT",
    /// A request a browser can send from any page without asking first
    /// (`text/plain`, a form) to a server without tokens: refused, so that
    /// other sites' pages cannot run tools on it.
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE",
    /// Published source did not build: the author's line first in the
    /// message, `details.line`, and the end of the build's log in
    /// `details.log`; or the build ran past a limit (named in
    /// `details.limit`). The version that served serves on.
    BuildFailed = "BUILD_FAILED",
    /// A newer source from the same person replaced this one while it
    /// waited for its build.
    BuildReplaced = "BUILD_REPLACED",
    /// This server turned builds on, but cannot contain them here
    /// (bubblewrap is missing or cannot run) and the operator did not opt
    /// out of containment: the message says why and what to do.
    BuildsUnavailable = "BUILDS_UNAVAILABLE",
    /// An approval or refusal of a plugin with nothing waiting for one
    /// (`--require-approval`), or on a server that asks for none.
    NothingPending = "NOTHING_PENDING",
    /// No skill the caller sees has that URI (or that namespace and name).
    SkillNotFound = "SKILL_NOT_FOUND",
    /// A published skill was refused: its `SKILL.md` or its files break a
    /// rule (the line in `details.line` for its frontmatter); nothing was
    /// written.
    SkillRefused = "SKILL_REFUSED",
    /// The store replicas share publishes through (`--redis`) cannot be
    /// reached: the publish or removal was refused, and nothing changed.
    /// Calls are not affected.
    StoreUnavailable = "STORE_UNAVAILABLE",
}

/// Whether `code` may be an error code on the wire: a capital letter, then
/// up to 63 capitals, digits or `_` (`DIVISION_BY_ZERO`). The host's own
/// codes follow it; a plugin's code that does not becomes
/// [`ErrorCode::ToolError`].
pub(crate) fn is_valid_code(code: &str) -> bool {
    (1..=64).contains(&code.len())
        && code.starts_with(|c: char| c.is_ascii_uppercase())
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// HTTP status for a plugin's own (business) tool error.
pub(crate) const TOOL_ERROR_HTTP_STATUS: u16 = 422;

impl ErrorCode {
    /// The HTTP status REST and CGI answer with.
    pub(crate) fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidJson | ErrorCode::InvalidRequest => 400,
            ErrorCode::ToolNotFound
            | ErrorCode::ResourceNotFound
            | ErrorCode::PromptNotFound
            | ErrorCode::SkillNotFound
            | ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::QuotaExceeded | ErrorCode::BuildReplaced | ErrorCode::NothingPending => 409,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::Busy | ErrorCode::BuildsUnavailable | ErrorCode::StoreUnavailable => 503,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::InvalidArguments
            | ErrorCode::PluginRejected
            | ErrorCode::ToolError
            | ErrorCode::SkillRefused
            | ErrorCode::BuildFailed => TOOL_ERROR_HTTP_STATUS,
            ErrorCode::PluginTrapped
            | ErrorCode::InvalidPluginOutput
            | ErrorCode::ResultTooLarge
            | ErrorCode::HostError => 500,
            // The plugin, not the host, ran out of its allowance: the host
            // itself is fine, but the call could not complete.
            ErrorCode::OutOfMemory | ErrorCode::OutOfFuel => 500,
            ErrorCode::ToolTimeout => 504,
        }
    }

    /// How MCP reports the code: `Some(code)` for a JSON-RPC protocol error,
    /// `None` for a tool result with `isError: true`. MCP 2025-11-25 makes
    /// only an unknown tool a protocol error; everything that happens once the
    /// tool is known, bad arguments included (SEP-1303), is a result the model
    /// can read and act on. (Malformed JSON-RPC never reaches this far: the
    /// SDK answers it with -32700 or -32600.)
    pub(crate) fn jsonrpc_code(self) -> Option<i32> {
        match self {
            ErrorCode::ToolNotFound => Some(-32602),
            _ => None,
        }
    }

    /// The JSON-RPC error code of a failed MCP request that is not a tool
    /// call (`resources/read`, `prompts/get`, `completion/complete`), where
    /// every failure is a protocol error: -32002 for a resource that is not
    /// there (the spec's code), -32602 for what the request named wrong,
    /// -32603 for the rest.
    pub(crate) fn jsonrpc_request_code(self) -> i32 {
        match self {
            ErrorCode::ResourceNotFound => -32002,
            ErrorCode::PromptNotFound
            | ErrorCode::SkillNotFound
            | ErrorCode::InvalidArguments
            | ErrorCode::InvalidJson
            | ErrorCode::InvalidRequest => -32602,
            _ => -32603,
        }
    }

    /// Exit status of `toolhost call`: 1 when the tool ran (or was about
    /// to) and failed, 2 when the call itself was wrong or impossible.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            ErrorCode::InvalidArguments
            | ErrorCode::ToolTimeout
            | ErrorCode::OutOfMemory
            | ErrorCode::OutOfFuel
            | ErrorCode::Busy
            | ErrorCode::PluginTrapped
            | ErrorCode::InvalidPluginOutput
            | ErrorCode::ResultTooLarge
            | ErrorCode::ToolError => 1,
            _ => 2,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's error table is the user's reference: it must list every code
    /// with the status this file gives it.
    #[test]
    fn readme_documents_every_code_and_status() {
        let readme = include_str!("../../../README.md");
        for &code in ErrorCode::ALL {
            let row = format!("| `{code}` | {} |", code.http_status());
            assert!(readme.contains(&row), "README lacks the row {row}");
        }
        let row = format!("| *the plugin's own code* | {TOOL_ERROR_HTTP_STATUS} |");
        assert!(readme.contains(&row), "README lacks the row {row}");
    }

    #[test]
    fn every_host_code_follows_the_rule_plugin_codes_are_held_to() {
        for &code in ErrorCode::ALL {
            assert!(is_valid_code(code.as_str()), "{code}");
        }
        for good in ["A", "DIVISION_BY_ZERO", "E2", &"A".repeat(64)] {
            assert!(is_valid_code(good), "{good}");
        }
        for bad in ["", "a", "_A", "1A", "A-B", "A B", "Ä", &"A".repeat(65)] {
            assert!(!is_valid_code(bad), "{bad}");
        }
    }
}
