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
//! - the request's: params that read with rmcp's field types (one pass
//!   over a local struct), with no field this path does not handle (a
//!   progress token, tasks, input responses).
//!
//! The answer is rmcp's too: the same handlers (`mod.rs`) produce it, the
//! result shaped for the negotiated version as rmcp shapes it (no
//! `resultType: "complete"` before 2026-07-28; cache hints filled from it
//! on), JSON unless the plugin logs while it runs, in which case the
//! answer is an SSE stream of its log messages, then the result, as rmcp's
//! one-shot service streams it (`answer_stream.rs`). Sampling and
//! elicitation have no client on a stateless request, as with rmcp.
//! `tests/it/mcp.rs` compares both paths' answers request by request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, ProtocolVersion, ServerResult};
use serde_json::Value;

use crate::call::Calls;
use crate::call::envelope::TextFormat;
use crate::front::lists::ToolLists;
use crate::ops::trace::TraceParent;
use crate::registry::Registry;
use crate::registry::view::View;

use super::answer_stream::{StatelessClient, json_response, respond};
use super::call_answer::call_answer;

const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
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
}

/// A `tools/call`'s params as rmcp's `CallToolRequestParams` reads them
/// (its field types), read in one pass with only the keys this path
/// handles: any other (a task, an input response) or one given twice goes
/// to rmcp.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallParams {
    name: std::borrow::Cow<'static, str>,
    #[serde(default)]
    arguments: Option<rmcp::model::JsonObject>,
    #[serde(rename = "_meta", default)]
    meta: Option<MetaKeys>,
}

/// What the path reads of a request's `_meta`, as rmcp's
/// `RequestMetaObject` (a JSON object) gives it: a key given twice counts
/// once, the last; any other key is skipped, as rmcp's handlers skip it.
/// Read without building the object: its keys are compared in place.
#[derive(Default)]
struct MetaKeys {
    /// `io.modelcontextprotocol/protocolVersion`, if given; a value that
    /// is not text sends the request to rmcp.
    version: Option<String>,
    /// Whether `io.modelcontextprotocol/clientCapabilities` decodes as
    /// rmcp's `ClientCapabilities` (as its `missing_required_keys` decodes
    /// it: from the JSON value).
    capabilities: bool,
    /// A progress token, of any value: such a request goes to rmcp.
    progress: bool,
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl<'de> serde::Deserialize<'de> for MetaKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(field_identifier)]
        enum Key {
            #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
            Version,
            #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
            Capabilities,
            #[serde(rename = "progressToken")]
            Progress,
            #[serde(rename = "traceparent")]
            Traceparent,
            #[serde(rename = "tracestate")]
            Tracestate,
            #[serde(other)]
            Other,
        }
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = MetaKeys;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MetaKeys, A::Error> {
                let mut keys = MetaKeys::default();
                let text = |value: Value| match value {
                    Value::String(text) => Some(text),
                    _ => None,
                };
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Version => keys.version = Some(map.next_value()?),
                        Key::Capabilities => {
                            let value: Value = map.next_value()?;
                            keys.capabilities =
                                serde_json::from_value::<rmcp::model::ClientCapabilities>(value)
                                    .is_ok();
                        }
                        Key::Progress => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            keys.progress = true;
                        }
                        Key::Traceparent => keys.traceparent = text(map.next_value()?),
                        Key::Tracestate => keys.tracestate = text(map.next_value()?),
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(keys)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// The same for `tools/list`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListKeys {
    #[serde(rename = "cursor", default)]
    _cursor: Option<serde::de::IgnoredAny>,
    #[serde(rename = "_meta", default)]
    meta: Option<MetaKeys>,
}

/// One of the two methods, parsed as rmcp parses it.
enum Lone {
    List(Option<PaginatedRequestParams>),
    Call(CallToolRequestParams),
}

impl FastPath {
    /// The answer to the request in `body` if it is a lone stateless
    /// request this path takes; `None` sends it on to the general path
    /// (`jsonrpc.rs`'s checks, then rmcp). The body is read without a JSON
    /// value: a strict struct over the top level, then one over the params
    /// with rmcp's field types.
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
        if !super::jsonrpc::is_valid_id(&id) {
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
                let read: CallParams = serde_json::from_str(params?).ok()?;
                let mut call = CallToolRequestParams::new(read.name);
                call.arguments = read.arguments;
                (Lone::Call(call), read.meta)
            }
            _ => match params {
                Some(params) => {
                    let keys: ListKeys = serde_json::from_str(params).ok()?;
                    let mut list: PaginatedRequestParams = serde_json::from_str(params).ok()?;
                    list.meta = None;
                    (Lone::List(Some(list)), keys.meta)
                }
                None => (Lone::List(None), None),
            },
        };
        let version = self.accepts(&parts.headers, method, meta.as_ref(), &lone)?;
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
                let client = notes.clone();
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
        let Ok(Some(accept)) = single(headers, header::ACCEPT.as_str()) else {
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
    serde_json::to_string(&Reply {
        jsonrpc: "2.0",
        id,
        result,
        error,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use rmcp::model::RequestMetaObject;
    use serde_json::json;

    use super::MetaKeys;

    /// `_meta` read in place gives what rmcp's `RequestMetaObject` gives
    /// for the keys the path reads: a key given twice counts once (the
    /// last), a key written with an escape is the same key, other keys are
    /// skipped; a version that is not text is refused (the request goes to
    /// rmcp).
    #[test]
    fn meta_keys_read_as_rmcp_reads_them() {
        let version = "io.modelcontextprotocol/protocolVersion";
        let capabilities = "io.modelcontextprotocol/clientCapabilities";
        let metas = [
            format!(r#"{{"{version}":"2026-07-28","{capabilities}":{{}}}}"#),
            format!(r#"{{"{version}":"2025-06-18","{version}":"2026-07-28"}}"#),
            r#"{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","x":[1,{"y":null}]}"#
                .to_string(),
            format!(r#"{{"{capabilities}":{{"roots":{{"listChanged":true}}}}}}"#),
            format!(r#"{{"{capabilities}":{{"roots":7}}}}"#),
            format!(r#"{{"{capabilities}":null}}"#),
            r#"{"progressToken":null}"#.to_string(),
            r#"{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01","tracestate":5}"#
                .to_string(),
            r#"{"tracestate":"a=1","tracestate":"b=2"}"#.to_string(),
            "{}".to_string(),
        ];
        for text in metas {
            let ours: MetaKeys = serde_json::from_str(&text).expect(&text);
            let theirs: RequestMetaObject = serde_json::from_str(&text).unwrap();
            let rmcp_version = theirs
                .0
                .0
                .get(version)
                .and_then(|value| value.as_str().map(str::to_string));
            assert_eq!(ours.version, rmcp_version, "{text}");
            assert_eq!(
                ours.capabilities,
                theirs.client_capabilities().is_some(),
                "{text}"
            );
            assert_eq!(
                ours.progress,
                theirs.0.0.contains_key("progressToken"),
                "{text}"
            );
            assert_eq!(
                ours.traceparent.as_deref(),
                theirs.get_traceparent(),
                "{text}"
            );
            assert_eq!(
                ours.tracestate.as_deref(),
                theirs.get_tracestate(),
                "{text}"
            );
        }
        for refused in [json!({version: 7}), json!({version: null}), json!([1])] {
            assert!(
                serde_json::from_value::<MetaKeys>(refused.clone()).is_err(),
                "{refused}"
            );
        }
    }
}
