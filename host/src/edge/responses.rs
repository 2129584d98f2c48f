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
    (status, axum::Json(body)).into_response()
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
#[derive(serde::Serialize)]
pub(crate) struct HttpBody<'a> {
    #[serde(flatten)]
    envelope: &'a Envelope,
    success: bool,
    timestamp: String,
}

pub(crate) fn http_body(envelope: &Envelope) -> HttpBody<'_> {
    HttpBody {
        envelope,
        success: !envelope.is_error,
        timestamp: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
    }
}

/// JSON-RPC 2.0's code for a request that is not a valid one: what a
/// refusal at the edge is, over MCP.
pub(crate) const JSON_RPC_INVALID_REQUEST: i64 = -32600;

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
