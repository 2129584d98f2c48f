//! The stateless fast path: a lone `tools/call` or `tools/list` without a
//! session, answered here rather than by rmcp's one-shot service, which
//! builds, runs and tears down a whole service (tasks, channels, a peer)
//! for every such request: 40 % of an MCP call's samples (bench/README.md,
//! "MCP beside REST").
//!
//! Only a request rmcp would accept as it is takes this path; anything
//! else goes on to rmcp, which answers it (with its refusal, if that is
//! what it deserves). So the checks here are rmcp's, made conservatively:
//! - the transport's: `Accept` naming both `application/json` and
//!   `text/event-stream` (no parameters, which may carry `q=0`),
//!   `Content-Type: application/json`, a `Host` on the allowed list and no
//!   `Origin`;
//! - the protocol's: at most one `MCP-Protocol-Version`, a version rmcp
//!   knows; `_meta`'s `protocolVersion`, if given, equal to that header,
//!   with the 2026-07-28 revision's required keys; from 2026-07-28 on, the
//!   `Mcp-Method` and `Mcp-Name` headers (SEP-2243) equal to the body's,
//!   no `Mcp-Param-*` header and no tool whose schema asks for one;
//! - the request's: params that read with rmcp's field types (`read.rs`),
//!   with no field this path does not handle (a progress token, tasks,
//!   input responses), for a tool that does not run as a task.
//!
//! The answer is rmcp's too: the same handlers (`mod.rs`) produce it, a
//! call's result written as rmcp writes a session's (`call_answer.rs`),
//! shaped for the negotiated version as rmcp shapes it (no
//! `resultType: "complete"` before 2026-07-28; cache hints filled from it
//! on), JSON unless the plugin logs while it runs, in which case the
//! answer is an SSE stream of its log messages, then the result, as rmcp's
//! one-shot service streams it (`answer_stream.rs`). Sampling and
//! elicitation have no client on a stateless request, as with rmcp.
//! `tests/it/mcp.rs` compares both paths' answers request by request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use axum::response::Response;
use rmcp::ErrorData as McpError;
use rmcp::model::{ProtocolVersion, ServerResult};
use serde_json::Value;

use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::front::lists::ToolLists;
use crate::ops::trace::TraceParent;
use crate::registry::Registry;
use crate::registry::view::View;

use self::read::{Lone, MetaKeys, read};
use super::answer_stream::{StatelessClient, json_response, respond};
use super::call_answer::call_answer;
use super::input_round::{InputRound, Relay, bind, overrides_binding};
use crate::runtime::ClientChannel;

mod read;

// Names made once, so that a lookup hashes them without parsing them.
const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// What the fast path needs of the MCP front.
pub(super) struct FastPath {
    /// How many requests this path answered (`/metrics`).
    pub(super) answered: Arc<AtomicU64>,
    pub(super) registry: Arc<Registry>,
    pub(super) calls: Arc<Calls>,
    pub(super) text_format: TextFormat,
    pub(super) lists: Arc<ToolLists>,
    pub(super) allowed_hosts: Vec<String>,
    /// Cancelled at shutdown: ends the streams this path answers with.
    pub(super) shutdown: tokio_util::sync::CancellationToken,
    /// What `requestState` is sealed with (`input_round.rs`).
    pub(super) input_keys: Arc<super::InputKeys>,
}

impl FastPath {
    /// The answer to the request in `body` if it is a lone stateless
    /// request this path takes; `None` sends it on to the general path
    /// (`jsonrpc.rs`'s checks, then rmcp). The body is read without a JSON
    /// value (`read.rs`).
    pub(super) async fn answer(&self, parts: &Parts, body: &[u8], view: View) -> Option<Response> {
        let (id, method, lone, meta) = read(body)?;
        let version = self.accepts(&parts.headers, method, meta.as_ref(), &lone)?;
        // A tool that runs as a task: rmcp's path (`tasks.rs`).
        if let Lone::Call(params) = &lone
            && self
                .registry
                .peek()
                .tool(&params.name)
                .is_some_and(|entry| entry.tool.task_support.is_some())
        {
            return None;
        }
        // 2025-11-25's list marks its task tools (`legacy_tasks.rs`), which
        // this path does not: rmcp's path answers it, and the mark is added.
        if matches!(lone, Lone::List(_))
            && version.as_str() == super::legacy_tasks::REVISION
            && self.registry.has_task_tools()
        {
            return None;
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        let modern = version.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
        match lone {
            Lone::List(params) => {
                let cursor = params.as_ref().and_then(|params| params.cursor.as_deref());
                let listed = super::list_tools_page(&self.lists, &self.registry, cursor, &view)
                    .map(|listed| {
                        let mut result = ServerResult::ListToolsResult(listed);
                        if modern {
                            result.fill_missing_cache_hints();
                        } else {
                            result.strip_result_type_for_legacy_peer();
                        }
                        result
                    });
                Some(json_response(reply(&id, listed)))
            }
            Lone::Call(params) => {
                let notes = Arc::new(StatelessClient::default());
                // 2026-07-28: the plugin's requests become an input-required
                // result, and it logs only at the level the request names.
                let round = match meta.as_ref().and_then(|meta| {
                    modern.then(|| (meta.client_capabilities.clone(), meta.log_level))
                }) {
                    Some((capabilities, log_level)) => {
                        let person = parts
                            .extensions
                            .get::<crate::edge::guard::Requester>()
                            .and_then(|requester| requester.0.as_ref())
                            .map(|identity| identity.name.clone());
                        // What a requestState would be bound to, made only
                        // if the tool asks (from the request, read again):
                        // a lone call that asks nothing hashes nothing.
                        let request = body.to_vec();
                        let bound = move || {
                            let (name, arguments) = match read(&request) {
                                Some((_, _, Lone::Call(params), _)) => {
                                    (params.name.to_string(), params.arguments)
                                }
                                _ => (String::new(), None),
                            };
                            bind("tools/call", &name, person.as_deref(), arguments.as_ref())
                        };
                        let relay = Relay {
                            log_level,
                            to: notes.clone(),
                        };
                        // A fresh round opens no requestState: its binding
                        // is not read.
                        let round = InputRound::open(
                            &self.input_keys,
                            "",
                            Some(capabilities.map(|c| *c).unwrap_or_default()),
                            None,
                            None,
                            relay,
                        )
                        .ok()?;
                        Some((Arc::new(round), bound))
                    }
                    None => None,
                };
                let client: Arc<dyn ClientChannel> = match &round {
                    Some((round, _)) => round.clone(),
                    None => notes.clone(),
                };
                let keys = self.input_keys.clone();
                let marks = notes.clone();
                let (registry, calls, text_format) =
                    (self.registry.clone(), self.calls.clone(), self.text_format);
                // Only what a call reads of the headers: the trace context
                // (a stateless request has no session).
                let mut headers = HeaderMap::new();
                for name in crate::ops::trace::TRACE_HEADERS {
                    if let Some(value) = parts.headers.get(name) {
                        headers.insert(name, value.clone());
                    }
                }
                let from_meta = meta.map_or_else(TraceParent::default, |meta| TraceParent {
                    traceparent: meta.traceparent,
                    tracestate: meta.tracestate,
                });
                let call = Box::pin(async move {
                    let envelope = super::answer_call(
                        super::CallPath {
                            registry: &registry,
                            calls: &calls,
                            text_format,
                        },
                        params,
                        move || from_meta,
                        Some(client),
                        Some(&headers),
                        &view,
                    )
                    .await;
                    if let Some((round, bound)) = round
                        && let Some(answer) =
                            overrides_binding(&round, &keys, bound, envelope.is_error)
                    {
                        if answer.as_ref().is_err_and(|error| {
                            error.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                        }) {
                            marks.answer_with_bad_request();
                        }
                        return reply(&id, answer.map(ServerResult::InputRequiredResult));
                    }
                    // Written from the envelope, as rmcp writes the result
                    // a session gets (`call_answer.rs`).
                    let answer = call_answer(envelope).map(|mut answer| {
                        if !modern {
                            answer.result_type = None;
                        }
                        answer
                    });
                    reply(&id, answer)
                });
                Some(respond(call, notes, &self.shutdown).await)
            }
        }
    }

    /// The negotiated version, if every check of the module's notes passes
    /// (`lone` is the request as rmcp parsed it, `meta` its `_meta`).
    fn accepts(
        &self,
        headers: &HeaderMap,
        method: &str,
        meta: Option<&MetaKeys>,
        lone: &Lone,
    ) -> Option<ProtocolVersion> {
        if !self.transport_accepts(headers) {
            return None;
        }
        if meta.is_some_and(|meta| meta.progress) {
            return None;
        }
        let header_version = single(headers, PROTOCOL_VERSION_HEADER).ok()?;
        let header_version = match header_version {
            Some(text) => Some(known_version(text)?),
            None => None,
        };
        let meta_version = meta.and_then(|meta| meta.version.as_deref());
        let version = match (meta_version, &header_version) {
            (Some(given), Some(header)) => {
                // The same version as the header (so one rmcp knows, as
                // its reading of `_meta` would find), and the other key
                // 2026-07-28 requires of a request that negotiates in it,
                // checked as rmcp's `missing_required_keys` checks it: the
                // client's capabilities decode as rmcp's type.
                if given != header.as_str() || !meta?.capabilities {
                    return None;
                }
                header.clone()
            }
            (Some(_), None) => return None,
            (None, Some(header)) if header.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => {
                return None;
            }
            (None, header) => header.clone().unwrap_or(ProtocolVersion::V_2025_03_26),
        };
        let standard_headers = header_version
            .as_ref()
            .is_some_and(|version| version.as_str() >= ProtocolVersion::STANDARD_HEADERS.as_str());
        if standard_headers && !self.standard_headers_match(headers, method, lone) {
            return None;
        }
        Some(version)
    }

    fn transport_accepts(&self, headers: &HeaderMap) -> bool {
        if headers.contains_key(header::ORIGIN) {
            return false;
        }
        let Ok(Some(accept)) = single(headers, header::ACCEPT) else {
            return false;
        };
        if accept.contains(';') {
            return false;
        }
        let has = |kind: &str| {
            accept
                .split(',')
                .any(|given| given.trim().eq_ignore_ascii_case(kind))
        };
        if !has("application/json") || !has("text/event-stream") {
            return false;
        }
        let Ok(Some(content_type)) = single(headers, header::CONTENT_TYPE) else {
            return false;
        };
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return false;
        }
        let Ok(Some(host)) = single(headers, header::HOST) else {
            return false;
        };
        host_allowed(host, &self.allowed_hosts)
    }

    /// SEP-2243's headers, from 2026-07-28 on: `Mcp-Method` (and for a
    /// call `Mcp-Name`) as in the body; no `Mcp-Param-*`, for no tool
    /// whose schema asks for one.
    fn standard_headers_match(&self, headers: &HeaderMap, method: &str, lone: &Lone) -> bool {
        if single(headers, METHOD_HEADER) != Ok(Some(method)) {
            return false;
        }
        if headers
            .keys()
            .any(|name| name.as_str().starts_with(PARAM_HEADER_PREFIX))
        {
            return false;
        }
        match lone {
            Lone::List(_) => true,
            Lone::Call(params) => {
                if single(headers, NAME_HEADER) != Ok(Some(params.name.as_ref())) {
                    return false;
                }
                self.registry
                    .peek()
                    .tool(&params.name)
                    .is_none_or(|entry| !entry.tool.marks_param_headers)
            }
        }
    }
}

/// The one value of a header: `Ok(None)` when absent, `Err` when given
/// twice or not text.
fn single(headers: &HeaderMap, name: HeaderName) -> Result<Option<&str>, ()> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    first.to_str().map(Some).map_err(|_| ())
}

fn known_version(text: &str) -> Option<ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|known| known.as_str() == text)
        .cloned()
}

/// A `Host` the allowed list names: its host alone (any port) or with
/// its port, compared as rmcp compares them (ASCII case aside), without
/// allocating.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim();
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        let entry_name = entry.trim_start_matches('[').trim_end_matches(']');
        entry.eq_ignore_ascii_case(host) || entry_name.eq_ignore_ascii_case(name)
    })
}

/// A JSON-RPC answer to the request with `id`, written as rmcp writes its
/// `ServerJsonRpcMessage`.
fn reply<T: serde::Serialize>(id: &Value, result: Result<T, McpError>) -> String {
    #[derive(serde::Serialize)]
    struct Reply<'a, T: serde::Serialize> {
        jsonrpc: &'static str,
        id: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<T>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<McpError>,
    }
    let (result, error) = match result {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error)),
    };
    // Room for a small answer at once (an echo's is about 250 bytes).
    let mut bytes = Vec::with_capacity(320);
    serde_json::to_writer(
        &mut bytes,
        &Reply {
            jsonrpc: "2.0",
            id,
            result,
            error,
        },
    )
    .map_or_else(
        |_| String::new(),
        |()| String::from_utf8(bytes).unwrap_or_default(),
    )
}
