//! How the fast path reads a request's body: the top level strictly, in
//! one pass with a call's params when they follow its method, with rmcp's
//! field types and only the keys the path handles; `_meta`'s keys in
//! place. A value it skips is still checked as reading the body into a
//! JSON value checks it (as rmcp and the general path do), so a body they
//! refuse as unreadable is never answered here. Whatever this refuses goes
//! on to rmcp, which answers it.

use rmcp::model::{CallToolRequestParams, ClientCapabilities, PaginatedRequestParams};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// What the path takes of a request: its id, its method (one of the two
/// it answers), the params as rmcp reads them and `_meta`'s keys; `None`
/// for anything else.
pub(super) fn read(body: &[u8]) -> Option<(Value, &str, Lone, Option<MetaKeys>)> {
    let Top {
        jsonrpc,
        id,
        method,
        params,
    } = serde_json::from_slice(body).ok()?;
    if jsonrpc != "2.0" || !super::super::jsonrpc::is_valid_id(&id) {
        return None;
    }
    // The params as rmcp's types read them, `_meta` moved out of them as
    // rmcp does for its handlers; only the keys this path handles.
    let (lone, meta) = match (method, params) {
        ("tools/call", Params::Call(read)) => read.into_lone(),
        ("tools/call", Params::Raw(Some(params))) if rereadable(params) => {
            serde_json::from_str::<CallParams>(params.get())
                .ok()?
                .into_lone()
        }
        ("tools/list", Params::Raw(Some(params))) if rereadable(params) => {
            let params = params.get();
            let keys: ListKeys = serde_json::from_str(params).ok()?;
            let mut list: PaginatedRequestParams = serde_json::from_str(params).ok()?;
            list.meta = None;
            (Lone::List(Some(list)), keys.meta)
        }
        ("tools/list", Params::Raw(None)) => (Lone::List(None), None),
        _ => return None,
    };
    // An arguments object keyed by serde_json's raw-value token, which a
    // JSON value's reading treats apart: left to rmcp.
    if let Lone::Call(call) = &lone
        && call
            .arguments
            .as_ref()
            .is_some_and(|arguments| arguments.contains_key(RAW_VALUE_TOKEN))
    {
        return None;
    }
    Some((id, method, lone, meta))
}

/// Whether params kept as written may be read on their own: an object,
/// nested too little for the depth a reading counts from the body's top
/// (serde_json's 128) to matter. Each level opens a bracket, so few
/// brackets (counting those in strings too) mean little nesting; params
/// with many go to rmcp.
fn rereadable(params: &RawValue) -> bool {
    let text = params.get();
    text.starts_with('{') && text.bytes().filter(|b| matches!(b, b'{' | b'[')).count() <= 100
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
/// once, the last; any other key's value is checked as a JSON value's
/// reading checks it ([`Checked`]), then dropped. Read without building
/// the object: its keys are compared in place.
#[derive(Default)]
pub(super) struct MetaKeys {
    /// `io.modelcontextprotocol/protocolVersion`, if given; a value that
    /// is not text sends the request to rmcp.
    pub(super) version: Option<String>,
    /// Whether `io.modelcontextprotocol/clientCapabilities` decodes as
    /// rmcp's `ClientCapabilities` (as its `missing_required_keys` decodes
    /// it: from the JSON value).
    pub(super) capabilities: bool,
    /// The capabilities themselves, when they decode.
    pub(super) client_capabilities: Option<Box<ClientCapabilities>>,
    /// `io.modelcontextprotocol/logLevel`: log messages only when given.
    pub(super) log_level: Option<rmcp::model::LoggingLevel>,
    /// A progress token, of any value: such a request goes to rmcp.
    pub(super) progress: bool,
    pub(super) traceparent: Option<String>,
    pub(super) tracestate: Option<String>,
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
            #[serde(rename = "io.modelcontextprotocol/logLevel")]
            LogLevel,
            #[serde(rename = "traceparent")]
            Traceparent,
            #[serde(rename = "tracestate")]
            Tracestate,
            #[serde(rename = "$serde_json::private::RawValue")]
            RawValueToken,
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
                            // Decoded from the JSON value, as rmcp does.
                            let value: Value = map.next_value()?;
                            keys.client_capabilities =
                                ClientCapabilities::deserialize(&value).ok().map(Box::new);
                            keys.capabilities = keys.client_capabilities.is_some();
                        }
                        Key::Progress => {
                            map.next_value::<Checked>()?;
                            keys.progress = true;
                        }
                        Key::LogLevel => {
                            let value: Value = map.next_value()?;
                            keys.log_level = rmcp::model::LoggingLevel::deserialize(&value).ok();
                        }
                        Key::Traceparent => keys.traceparent = text(map.next_value()?),
                        Key::Tracestate => keys.tracestate = text(map.next_value()?),
                        Key::Other => {
                            map.next_value::<Checked>()?;
                        }
                        // What a JSON value's reading treats apart.
                        Key::RawValueToken => {
                            return Err(serde::de::Error::custom("a raw-value key"));
                        }
                    }
                }
                Ok(keys)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

impl CallParams {
    fn into_lone(self) -> (Lone, Option<MetaKeys>) {
        let mut call = CallToolRequestParams::new(self.name);
        call.arguments = self.arguments;
        (Lone::Call(call), self.meta)
    }
}

/// A value read as a JSON value's reading reads it, then dropped: numbers
/// in range, strings that decode, nesting counted from the body's top.
/// serde's `IgnoredAny` skips a value without these checks, so a body
/// rmcp refuses as unreadable would pass. An object keyed by serde_json's
/// raw-value token, which a JSON value's reading treats apart, is refused
/// here (the request goes to rmcp).
struct Checked;

/// The key serde_json's `Value` reads as an embedded raw value.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A map key that is not [`RAW_VALUE_TOKEN`], read and checked as text.
struct CheckedKey;

impl<'de> serde::Deserialize<'de> for CheckedKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = CheckedKey;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<CheckedKey, E> {
                if key == RAW_VALUE_TOKEN {
                    return Err(E::custom("a raw-value key"));
                }
                Ok(CheckedKey)
            }
        }
        deserializer.deserialize_str(Text)
    }
}

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> serde::de::Visitor<'de> for Any {
            type Value = Checked;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_unit<E>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Checked, A::Error> {
                while seq.next_element::<Checked>()?.is_some() {}
                Ok(Checked)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Checked, A::Error> {
                while map.next_entry::<CheckedKey, Checked>()?.is_some() {}
                Ok(Checked)
            }
        }
        deserializer.deserialize_any(Any)
    }
}

/// A request's top level, read strictly in one pass: what rmcp's reading
/// of the body refuses and a JSON value lets through (a key given twice,
/// or one a request does not have, a `result` too) fails it, without
/// rmcp's whole-message enums. A `tools/call`'s params that follow its
/// method (as clients write them) are read in the same pass, and only
/// from an object; any other params are kept as written, to be read once
/// the method is known.
struct Top<'a> {
    jsonrpc: &'a str,
    id: Value,
    method: &'a str,
    params: Params<'a>,
}

enum Params<'a> {
    Call(CallParams),
    /// As written (`None`: absent or `null`).
    Raw(Option<&'a RawValue>),
}

impl<'de> serde::Deserialize<'de> for Top<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(serde::Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Key {
            Jsonrpc,
            Id,
            Method,
            Params,
        }
        /// Params read only from an object, as rmcp's type reads them
        /// there (a struct would also read from an array).
        struct CallObject;
        impl<'de> serde::de::Visitor<'de> for CallObject {
            type Value = CallParams;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<CallParams, A::Error> {
                serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        struct CallSeed;
        impl<'de> serde::de::DeserializeSeed<'de> for CallSeed {
            type Value = CallParams;
            fn deserialize<D: serde::Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<CallParams, D::Error> {
                deserializer.deserialize_map(CallObject)
            }
        }
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = Top<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON-RPC request")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Top<'de>, A::Error> {
                let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Jsonrpc if jsonrpc.is_none() => jsonrpc = Some(map.next_value()?),
                        Key::Id if id.is_none() => id = Some(map.next_value()?),
                        Key::Method if method.is_none() => method = Some(map.next_value()?),
                        Key::Params if params.is_none() => {
                            params = Some(if method == Some("tools/call") {
                                Params::Call(map.next_value_seed(CallSeed)?)
                            } else {
                                Params::Raw(map.next_value()?)
                            });
                        }
                        _ => return Err(A::Error::custom("a key given twice")),
                    }
                }
                Ok(Top {
                    jsonrpc: jsonrpc.ok_or_else(|| A::Error::missing_field("jsonrpc"))?,
                    id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                    method: method.ok_or_else(|| A::Error::missing_field("method"))?,
                    params: params.unwrap_or(Params::Raw(None)),
                })
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
pub(super) enum Lone {
    List(Option<PaginatedRequestParams>),
    Call(CallToolRequestParams),
}

#[cfg(test)]
mod tests {
    use rmcp::model::RequestMetaObject;
    use serde_json::json;

    use super::{MetaKeys, Params, Top, read};

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

    /// The top level is read strictly: what rmcp refuses fails, and a
    /// call's params are read in the same pass only when they follow the
    /// method (else kept as written), and only from an object.
    #[test]
    fn the_top_level_is_read_strictly_in_one_pass() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}"#;
        let top: Top<'_> = serde_json::from_str(call).unwrap();
        assert!(matches!(top.params, Params::Call(ref read) if read.name == "echo"));
        let params_first =
            r#"{"params":{"name":"echo"},"jsonrpc":"2.0","id":"x","method":"tools/call"}"#;
        let top: Top<'_> = serde_json::from_str(params_first).unwrap();
        assert!(matches!(top.params, Params::Raw(Some(raw)) if raw.get() == r#"{"name":"echo"}"#));
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":null}"#;
        let top: Top<'_> = serde_json::from_str(list).unwrap();
        assert!(matches!(top.params, Params::Raw(None)));
        for refused in [
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["echo"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":{}}}"#,
            r#"["2.0",1,"tools/list"]"#,
        ] {
            assert!(
                serde_json::from_str::<Top<'_>>(refused).is_err(),
                "{refused}"
            );
        }
    }

    /// What a JSON value's reading refuses is refused wherever the path
    /// skips a value: a number out of range, a lone surrogate, bytes that
    /// are not UTF-8, nesting past serde_json's limit counted from the
    /// body's top (rmcp reads the whole body as a value first).
    #[test]
    fn values_the_path_skips_are_still_checked() {
        let call = |meta: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","_meta":{meta}}}}}"#
            )
            .into_bytes()
        };
        let deep = |open: &str, close: &str, depth| open.repeat(depth) + &close.repeat(depth);
        let objects = |depth| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        for fine in [
            call(r#"{"x":[1,"two",{"y":null}],"progressToken":1e300}"#),
            call(&format!(
                r#"{{"x":{},"y":{}}}"#,
                objects(100),
                deep("[", "]", 100)
            )),
        ] {
            assert!(read(&fine).is_some(), "{}", String::from_utf8_lossy(&fine));
        }
        // An object keyed by serde_json's raw-value token, which a JSON
        // value reads apart: left to rmcp, whatever it holds.
        assert!(read(&call(r#"{"$serde_json::private::RawValue":"1"}"#)).is_none());
        let arguments = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"$serde_json::private::RawValue":"1"}}}"#;
        assert!(read(arguments).is_none());
        let capabilities = "io.modelcontextprotocol/clientCapabilities";
        let mut refused = vec![
            call(r#"{"x":1e400}"#),
            call(r#"{"x":{"\ud800":1}}"#),
            call(r#"{"x":{"$serde_json::private::RawValue":1}}"#),
            call(&format!(r#"{{"x":{}}}"#, objects(130))),
            call(r#"{"x":"\ud800"}"#),
            call(r#"{"progressToken":-1e400}"#),
            call(&format!(r#"{{"x":{}}}"#, deep("[", "]", 130))),
            call(&format!(
                r#"{{"{capabilities}":{{"experimental":{{"k":{{"a":{}}}}}}}}}"#,
                deep("[", "]", 124)
            )),
        ];
        let mut not_utf8 = call(r#"{"x":"?"}"#);
        let at = not_utf8.iter().position(|&b| b == b'?').unwrap();
        not_utf8[at] = 0xff;
        refused.push(not_utf8);
        // Params kept as written (before the method) with more brackets
        // than a reading on its own could count alike.
        let nested = deep("[", "]", 101);
        refused.push(
            format!(r#"{{"params":{{"name":"echo","arguments":{{"a":{nested}}}}},"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#)
                .into_bytes(),
        );
        for body in refused {
            assert!(read(&body).is_none(), "{}", String::from_utf8_lossy(&body));
            // The general path refuses each as unreadable too.
            assert!(
                serde_json::from_slice::<serde_json::Value>(&body).is_err()
                    || body.starts_with(b"{\"params\""),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }
}
