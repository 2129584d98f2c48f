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
//! - the request's: params rmcp parses into its own types, with no field
//!   this path does not handle (a progress token, tasks, input responses).
//!
//! The answer is rmcp's too: the same handlers (`mod.rs`) produce it, the
//! result shaped for the negotiated version as rmcp shapes it (no
//! `resultType: "complete"` before 2026-07-28; cache hints filled from it
//! on), JSON unless the plugin logs while it runs, in which case the
//! answer is an SSE stream of its log messages, then the result, as rmcp's
//! one-shot service streams it. Sampling and elicitation have no client on
//! a stateless request, as with rmcp. `tests/it/mcp.rs` compares both
//! paths' answers request by request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, LoggingLevel, PaginatedRequestParams, ProtocolVersion,
    RequestMetaObject, ServerResult,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::front::lists::ToolLists;
use crate::registry::Registry;
use crate::registry::view::View;
use crate::runtime::{ClientChannel, LogLevel};

use super::session_client::severity;

const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const PARAM_HEADER_PREFIX: &str = "mcp-param-";
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_PROGRESS_TOKEN: &str = "progressToken";

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
}

/// The keys of a `tools/call`'s params this path handles; any other (a
/// task, an input response) or one given twice goes to rmcp.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallKeys {
    #[serde(rename = "name")]
    _name: serde::de::IgnoredAny,
    #[serde(rename = "arguments", default)]
    _arguments: Option<serde::de::IgnoredAny>,
    #[serde(rename = "_meta", default)]
    _meta: Option<serde::de::IgnoredAny>,
}

/// The same for `tools/list`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListKeys {
    #[serde(rename = "cursor", default)]
    _cursor: Option<serde::de::IgnoredAny>,
    #[serde(rename = "_meta", default)]
    _meta: Option<serde::de::IgnoredAny>,
}

/// The headers a call reads: its trace context.
const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// One of the two methods, parsed as rmcp parses it.
enum Lone {
    List(Option<PaginatedRequestParams>),
    Call(CallToolRequestParams),
}

impl FastPath {
    /// The answer to the request in `body` if it is a lone stateless
    /// request this path takes; `None` sends it on to the general path
    /// (`jsonrpc.rs`'s checks, then rmcp). The body is read without a JSON
    /// value: a strict struct over the top level, rmcp's params types for
    /// the params.
    pub(super) async fn answer(&self, parts: &Parts, body: &[u8], view: View) -> Option<Response> {
        // What rmcp's reading of the body refuses and a JSON value lets
        // through: a key given twice, or one a request does not have (a
        // `result` too). A strict reading of the top level finds both in one
        // pass that skips the values, without rmcp's whole-message enums.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Strict<'a> {
            jsonrpc: &'a str,
            id: Value,
            method: &'a str,
            #[serde(borrow, default)]
            params: Option<&'a serde_json::value::RawValue>,
        }
        let strict: Strict<'_> = serde_json::from_slice(body).ok()?;
        let Strict {
            jsonrpc,
            id,
            method,
            params,
        } = strict;
        if jsonrpc != "2.0" || !matches!(method, "tools/call" | "tools/list") {
            return None;
        }
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return None;
        }
        // The params as rmcp's types read them, `_meta` moved out of them
        // as rmcp does for its handlers; only the keys this path handles.
        let params = params.map(serde_json::value::RawValue::get);
        if params.is_some_and(|params| !params.starts_with('{')) {
            return None;
        }
        let (lone, meta) = match method {
            "tools/call" => {
                let params = params?;
                serde_json::from_str::<CallKeys>(params).ok()?;
                let mut call: CallToolRequestParams = serde_json::from_str(params).ok()?;
                let meta = call.meta.take();
                (Lone::Call(call), meta)
            }
            _ => {
                let mut list: Option<PaginatedRequestParams> = match params {
                    Some(params) => {
                        serde_json::from_str::<ListKeys>(params).ok()?;
                        serde_json::from_str(params).ok()?
                    }
                    None => None,
                };
                let meta = list.as_mut().and_then(|list| list.meta.take());
                (Lone::List(list), meta)
            }
        };
        let version = self.accepts(&parts.headers, method, meta.as_ref(), &lone)?;
        let meta = meta.unwrap_or_default();
        self.answered.fetch_add(1, Ordering::Relaxed);
        let modern = version.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
        // Written straight from rmcp's types, as rmcp writes them.
        let shape = move |result: Result<ServerResult, McpError>| -> String {
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
                Ok(mut result) => {
                    if modern {
                        result.fill_missing_cache_hints();
                    } else {
                        result.strip_result_type_for_legacy_peer();
                    }
                    (Some(result), None)
                }
                Err(error) => (None, Some(error)),
            };
            serde_json::to_string(&Reply {
                jsonrpc: "2.0",
                id: &id,
                result,
                error,
            })
            .unwrap_or_default()
        };
        match lone {
            Lone::List(params) => {
                let cursor = params.as_ref().and_then(|params| params.cursor.as_deref());
                let listed = super::list_tools_page(&self.lists, &self.registry, cursor, &view)
                    .map(ServerResult::ListToolsResult);
                Some(json_response(shape(listed)))
            }
            Lone::Call(params) => {
                let (sender, notes) = mpsc::unbounded_channel();
                let client = Arc::new(StatelessClient { notes: sender });
                let (registry, calls, text_format) =
                    (self.registry.clone(), self.calls.clone(), self.text_format);
                // Only what a call reads of the headers: the trace context
                // (a stateless request has no session).
                let mut headers = HeaderMap::new();
                for name in TRACE_HEADERS {
                    if let Some(value) = parts.headers.get(name) {
                        headers.insert(name, value.clone());
                    }
                }
                let call = Box::pin(async move {
                    let answered = super::answer_call(
                        super::CallPath {
                            registry: &registry,
                            calls: &calls,
                            text_format,
                        },
                        params,
                        &meta,
                        Some(client),
                        Some(&headers),
                        &view,
                    )
                    .await;
                    shape(answered.map(ServerResult::CallToolResult))
                });
                Some(respond(call, notes, self.shutdown.clone()).await)
            }
        }
    }

    /// The negotiated version, if every check of the module's notes passes
    /// (`lone` is the request as rmcp parsed it, `meta` its `_meta`).
    fn accepts(
        &self,
        headers: &HeaderMap,
        method: &str,
        meta: Option<&RequestMetaObject>,
        lone: &Lone,
    ) -> Option<ProtocolVersion> {
        if !self.transport_accepts(headers) {
            return None;
        }
        let keys = meta.map(|meta| &meta.0.0);
        if keys.is_some_and(|keys| keys.contains_key(META_PROGRESS_TOKEN)) {
            return None;
        }
        let header_version = single(headers, PROTOCOL_VERSION_HEADER).ok()?;
        let header_version = match header_version {
            Some(text) => Some(known_version(text)?),
            None => None,
        };
        let meta_version = keys.and_then(|keys| keys.get(META_PROTOCOL_VERSION));
        let version = match (meta_version, &header_version) {
            (Some(given), Some(header)) => {
                // rmcp's own reading of `_meta`, and the keys 2026-07-28
                // requires of a request that negotiates in it.
                let meta = meta?;
                let version = meta.protocol_version()?;
                if given.as_str()? != header.as_str()
                    || !meta
                        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                        .is_empty()
                {
                    return None;
                }
                version
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
        let Ok(Some(accept)) = single(headers, header::ACCEPT.as_str()) else {
            return false;
        };
        if accept.contains(';') {
            return false;
        }
        let kinds: Vec<&str> = accept.split(',').map(str::trim).collect();
        let has = |kind: &str| kinds.iter().any(|given| given.eq_ignore_ascii_case(kind));
        if !has("application/json") || !has("text/event-stream") {
            return false;
        }
        let Ok(Some(content_type)) = single(headers, header::CONTENT_TYPE.as_str()) else {
            return false;
        };
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return false;
        }
        let Ok(Some(host)) = single(headers, header::HOST.as_str()) else {
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
                let snapshot = self.registry.snapshot();
                snapshot
                    .tool(&params.name)
                    .is_none_or(|entry| !entry.tool.marks_param_headers)
            }
        }
    }
}

/// The one value of a header: `Ok(None)` when absent, `Err` when given
/// twice or not text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
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

fn json_response(message: String) -> Response {
    let mut response = (StatusCode::OK, message).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

type Call = Pin<Box<dyn std::future::Future<Output = String> + Send>>;

/// JSON if the call ends before the plugin sends anything; otherwise an
/// SSE stream of what it sends, then the result. The call runs inside the
/// response's body from then on, so a client that goes away cancels it.
async fn respond(
    mut call: Call,
    mut notes: mpsc::UnboundedReceiver<String>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Response {
    let first = tokio::select! {
        biased;
        done = &mut call => match notes.try_recv() {
            Ok(note) => {
                let mut messages = vec![note];
                while let Ok(note) = notes.try_recv() {
                    messages.push(note);
                }
                messages.push(done);
                return sse(futures_util::stream::iter(messages).boxed(), shutdown);
            }
            Err(_) => return json_response(done),
        },
        Some(note) = notes.recv() => note,
    };
    let rest = futures_util::stream::unfold(
        (Some(call), notes, std::collections::VecDeque::new()),
        |(mut call, mut notes, mut tail)| async move {
            loop {
                if let Some(next) = tail.pop_front() {
                    return Some((next, (call, notes, tail)));
                }
                let running = call.as_mut()?;
                tokio::select! {
                    biased;
                    Some(note) = notes.recv() => return Some((note, (call, notes, tail))),
                    done = running => {
                        // What the plugin sent before it returned comes first.
                        while let Ok(note) = notes.try_recv() {
                            tail.push_back(note);
                        }
                        tail.push_back(done);
                        call = None;
                    }
                }
            }
        },
    );
    sse(
        futures_util::stream::once(async move { first })
            .chain(rest)
            .boxed(),
        shutdown,
    )
}

/// How long a stream stays silent before a keep-alive comment, as rmcp's.
const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The stream as rmcp sends one: no proxy buffering, an empty comment
/// after 15 s without a message (a plugin that logs, then works on),
/// ended at shutdown.
fn sse(
    messages: futures_util::stream::BoxStream<'static, String>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Response {
    let messages = messages.take_until(shutdown.cancelled_owned()).boxed();
    let events = futures_util::stream::unfold(messages, |mut messages| async move {
        let event = tokio::select! {
            message = messages.next() => axum::body::Bytes::from(format!("data: {}\n\n", message?)),
            () = tokio::time::sleep(SSE_KEEP_ALIVE) => axum::body::Bytes::from_static(b":\n\n"),
        };
        Some((Ok::<_, std::convert::Infallible>(event), messages))
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A stateless request's client: log messages at rmcp's default level
/// (info) go to the answer's stream; there is no progress token (a request
/// with one goes to rmcp), and no client to ask for sampling or
/// elicitation, as on rmcp's stateless path.
struct StatelessClient {
    notes: mpsc::UnboundedSender<String>,
}

#[wasmtime_wasi::async_trait]
impl ClientChannel for StatelessClient {
    async fn log(&self, level: LogLevel, message: String) {
        let level = super::session_client::logging_level(level);
        if severity(level) < severity(LoggingLevel::Info) {
            return;
        }
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": { "level": level, "data": message },
        });
        let _ = self.notes.send(note.to_string());
    }

    async fn progress(&self, _progress: f64, _total: Option<f64>, _message: Option<String>) {}

    async fn create_message(&self, _params: String) -> Result<String, String> {
        Err("the client does not support sampling/createMessage".into())
    }

    async fn elicit(&self, _params: String) -> Result<String, String> {
        Err("the client does not support elicitation/create".into())
    }
}
