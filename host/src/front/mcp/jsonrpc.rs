//! What toolhost checks of an incoming JSON-RPC message before rmcp sees
//! it, on every MCP transport (Streamable HTTP in `http.rs`, stdio in
//! `stdio.rs`), and the error object it answers with.
//!
//! rmcp answers a message it cannot parse with plain text over HTTP, or
//! with a misleading code (`-32601 "tools/call"` for a `tools/call` whose
//! arguments are an array). These checks turn each case into the error
//! JSON-RPC 2.0 and MCP name, with a sentence saying what is wrong:
//!
//! | message | code |
//! | --- | --- |
//! | not JSON | -32700 parse error |
//! | a batch (an array), not an object, no `"jsonrpc": "2.0"`, an `id` that is not a string or a 64-bit integer, neither a method nor a result/error | -32600 invalid request |
//! | `params` not an object (`null` counts as absent); `tools/call` without params, without a string `name`, or with `arguments` that are not an object or `null` | -32602 invalid params |

use serde_json::{Value, json};

use crate::call::envelope::json_kind as kind;

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = crate::edge::responses::JSON_RPC_INVALID_REQUEST;
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// Why a message was refused, and the id to answer it with (`null` when
/// the message has no usable id).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    pub(crate) id: Value,
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl Rejection {
    fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Rejection {
            id,
            code,
            message: message.into(),
        }
    }

    /// A message larger than the transport accepts.
    pub(crate) fn too_large(limit: usize) -> Self {
        Rejection::new(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: the message is larger than {limit} bytes"),
        )
    }

    /// The JSON-RPC error response.
    pub(crate) fn to_json(&self) -> Value {
        error_response(self.id.clone(), self.code, &self.message)
    }
}

/// A JSON-RPC 2.0 error response.
pub(crate) fn error_response(id: Value, code: i64, message: &str) -> Value {
    crate::edge::responses::json_rpc_error(id, code, message)
}

/// Parses and checks one message's text.
pub(crate) fn parse(text: &[u8]) -> Result<Value, Rejection> {
    let message: Value = serde_json::from_slice(text)
        .map_err(|e| Rejection::new(Value::Null, PARSE_ERROR, format!("Parse error: {e}")))?;
    check(&message)?;
    Ok(message)
}

/// An id JSON-RPC requests may carry here, as rmcp's `NumberOrString`
/// reads one: a string, or an integer that fits in an i64.
pub(crate) fn is_valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// Checks a parsed message.
pub(crate) fn check(message: &Value) -> Result<(), Rejection> {
    let invalid = |id: &Value, problem: &str| {
        Rejection::new(
            id.clone(),
            INVALID_REQUEST,
            format!("Invalid Request: {problem}"),
        )
    };
    let object = match message {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(invalid(
                &Value::Null,
                "batches are not supported; send one message per request",
            ));
        }
        _ => return Err(invalid(&Value::Null, "a message must be a JSON object")),
    };
    let id = match object.get("id") {
        None => Value::Null,
        Some(id) if is_valid_id(id) => id.clone(),
        Some(_) => {
            return Err(invalid(
                &Value::Null,
                "id must be a string or an integer that fits in 64 bits",
            ));
        }
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid(&id, r#"jsonrpc must be "2.0""#));
    }
    let method = match object.get("method") {
        Some(Value::String(method)) => method.as_str(),
        Some(_) => return Err(invalid(&id, "method must be a string")),
        None if object.contains_key("id")
            && (object.contains_key("result") || object.contains_key("error")) =>
        {
            return Ok(());
        }
        None => {
            return Err(invalid(
                &id,
                "a message needs a method, or a result or error",
            ));
        }
    };
    // `null` means absent, as rmcp reads it (some clients send
    // `"params": null` for methods without params).
    let params = object.get("params").filter(|params| !params.is_null());
    let invalid_params = |problem: String| {
        Rejection::new(
            id.clone(),
            INVALID_PARAMS,
            format!("Invalid params: {problem}"),
        )
    };
    if let Some(params) = params
        && !params.is_object()
    {
        return Err(invalid_params(format!(
            "params of {method} must be an object, not {}",
            kind(params)
        )));
    }
    if method == "tools/call" {
        let Some(params) = params else {
            return Err(invalid_params(
                "tools/call needs params with the tool's name".into(),
            ));
        };
        match params.get("name") {
            Some(Value::String(_)) => {}
            None => return Err(invalid_params("tools/call needs a name".into())),
            Some(other) => {
                return Err(invalid_params(format!(
                    "the tool name must be a string, not {}",
                    kind(other)
                )));
            }
        }
        if let Some(arguments) = params.get("arguments")
            && !arguments.is_object()
            && !arguments.is_null()
        {
            return Err(invalid_params(format!(
                "arguments must be an object of named values, not {}",
                kind(arguments)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Option<i64> {
        parse(text.as_bytes()).err().map(|rejection| rejection.code)
    }

    #[test]
    fn well_formed_messages_pass() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"s1","error":{"code":-1,"message":"declined"}}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":null}}"#,
        ] {
            assert_eq!(code(text), None, "{text}");
        }
    }

    #[test]
    fn malformed_messages_get_the_code_the_standards_name() {
        assert_eq!(code("{"), Some(PARSE_ERROR));
        for text in [
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"42"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            assert_eq!(code(text), Some(INVALID_REQUEST), "{text}");
        }
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":"x"}}"#,
        ] {
            assert_eq!(code(text), Some(INVALID_PARAMS), "{text}");
        }
    }

    #[test]
    fn a_usable_id_is_kept_in_the_answer() {
        let rejection =
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[]}"#).unwrap_err();
        assert_eq!(rejection.to_json()["id"], 7);
        assert!(
            rejection
                .message
                .contains("must be an object, not an array")
        );
        let rejection = parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).unwrap_err();
        assert_eq!(rejection.to_json()["id"], Value::Null);
    }
}
