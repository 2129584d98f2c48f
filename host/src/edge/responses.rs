//! The one place an [`Envelope`] becomes an HTTP response, for every HTTP
//! route (REST, the guard's refusals, the listener's connection-cap
//! refusal) and so for CGI too: the status `errors.rs` gives the code, a
//! JSON body, and the two fields seed 001 asks of every REST response.
//! [`finish`] is the last step of the one outer layer (`outer.rs`): a wrong method on
//! any route gets the envelope too (with `Allow`), and every answer says
//! `X-Content-Type-Options: nosniff`, so no browser reads a plugin's JSON
//! as anything else.

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;

/// `body` as JSON with `status` (500 if `status` is not a valid code).
pub(crate) fn json_response(status: u16, body: &impl serde::Serialize) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Room for a small answer at once (an echo's is about 230 bytes);
    // `axum::Json` starts at 128 and grows.
    let mut bytes = Vec::with_capacity(256);
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            error.to_string(),
        )
            .into_response(),
    }
}

/// Every HTTP route answers an envelope with the status `errors.rs` gives
/// its code: REST here, and the guards too. Over HTTP (and so CGI) the
/// envelope also carries `success` (the opposite of `isError`) and
/// `timestamp` (RFC 3339, UTC, milliseconds), as seed 001 asks of every
/// REST response; the MCP result keeps MCP's own shape.
impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        json_response(self.http_status(), &http_body(&self))
    }
}

/// The envelope as HTTP answers carry it: with `success` and `timestamp`,
/// serialised straight to the body (no intermediate JSON value).
pub(crate) struct HttpBody<'a> {
    envelope: &'a Envelope,
    now: std::time::SystemTime,
}

pub(crate) fn http_body(envelope: &Envelope) -> HttpBody<'_> {
    HttpBody {
        envelope,
        now: std::time::SystemTime::now(),
    }
}

/// The envelope's own fields, then the two: written as one struct, not
/// with `#[serde(flatten)]`, which goes through a map and cost a
/// microsecond an answer. A test holds it to `Envelope`'s own JSON.
impl serde::Serialize for HttpBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Every field named: a field added to `Envelope` fails to compile
        // here until it is written.
        let Envelope {
            content,
            structured_content,
            is_error,
            error,
            meta,
        } = self.envelope;
        let mut body = serializer.serialize_struct("Envelope", 7)?;
        body.serialize_field("content", content)?;
        if let Some(structured) = structured_content {
            body.serialize_field("structuredContent", structured)?;
        }
        body.serialize_field("isError", is_error)?;
        if let Some(error) = error {
            body.serialize_field("error", error)?;
        }
        if let Some(meta) = meta {
            body.serialize_field("meta", meta)?;
        }
        body.serialize_field("success", &!is_error)?;
        body.serialize_field("timestamp", &Timestamp(self.now))?;
        body.end()
    }
}

/// RFC 3339, UTC, milliseconds, written without an intermediate string.
struct Timestamp(std::time::SystemTime);

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_rfc3339_millis(self.0))
    }
}

/// JSON-RPC 2.0's code for a request that is not a valid one: what a
/// refusal at the edge is, over MCP.
pub(crate) const JSON_RPC_INVALID_REQUEST: i64 = -32600;

/// The JSON-RPC code for a refusal by a server at a limit (an
/// implementation-defined server error).
pub(crate) const JSON_RPC_SERVER_BUSY: i64 = -32000;

/// A JSON-RPC 2.0 error answer: for the edge's refusals on `/mcp` and the
/// MCP front's own.
pub(crate) fn json_rpc_error(id: serde_json::Value, code: i64, message: &str) -> serde_json::Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// What every HTTP answer gets last (see the module documentation), for a
/// request of `method` on `path` (`outer.rs` calls it).
pub(crate) fn finish(mut response: Response, method: &Method, path: &str) -> Response {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(header::CONTENT_TYPE)
    {
        let allow = response.headers().get(header::ALLOW).cloned();
        response = Envelope::host_error(
            ErrorCode::MethodNotAllowed,
            format!("{path} does not take {method}"),
            None,
        )
        .into_response();
        if let Some(allow) = allow {
            response.headers_mut().insert(header::ALLOW, allow);
        }
    }
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::call::accounting::CallMeta;

    /// `HttpBody` writes the envelope's fields by hand: they must be the
    /// envelope's own JSON, plus `success` and `timestamp`.
    #[test]
    fn the_http_body_is_the_envelope_plus_success_and_timestamp() {
        let ok = Envelope {
            content: vec![serde_json::json!({ "type": "text", "text": "{\"n\":1}" })],
            structured_content: serde_json::json!({ "n": 1 }).as_object().cloned(),
            is_error: false,
            error: None,
            meta: Some(Box::new(CallMeta::new(Duration::from_millis(3), None))),
        };
        let failed = Envelope::host_error(
            ErrorCode::InvalidArguments,
            "no",
            Some(serde_json::json!({ "why": [1] })),
        );
        for envelope in [ok, failed] {
            let mut expected = serde_json::to_value(&envelope).unwrap();
            let body = serde_json::to_value(http_body(&envelope)).unwrap();
            let timestamp = body["timestamp"].as_str().unwrap().to_string();
            assert!(
                humantime::parse_rfc3339(&timestamp).is_ok() && timestamp.ends_with('Z'),
                "{timestamp}"
            );
            expected["success"] = serde_json::json!(!envelope.is_error);
            expected["timestamp"] = serde_json::json!(timestamp);
            assert_eq!(body, expected);
            // The same order of keys as before: the envelope's, then the two.
            let text = serde_json::to_string(&http_body(&envelope)).unwrap();
            assert!(text.starts_with("{\"content\":"), "{text}");
        }
    }
}
