//! The CGI/1.1 front (RFC 3875), behind `toolhost cgi`. It turns the CGI request
//! (environment variables and stdin) into an HTTP request, hands it to the
//! very router the REST server uses, and writes the response as CGI output:
//! `Status:` and `Content-Type:` headers, a blank line, the JSON body.
//!
//! Reusing the router means CGI has every route, limit and envelope REST
//! has, with nothing to keep in step. Whatever goes wrong in the host (an
//! unreadable plugin folder, say), the web server still gets a `Status:`
//! line and a HOST_ERROR envelope, never an empty answer.

use std::io::{Read, Write};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use tower::ServiceExt;

use crate::call::Calls;
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::responses::http_body;
use crate::front::rest::{self, RestSettings};
use crate::registry::Registry;

/// Answers the CGI request on stdout with a host's registry and call
/// books (or, when opening it failed, with that failure as a HOST_ERROR
/// envelope).
pub(crate) async fn run(
    host: anyhow::Result<(Arc<Registry>, Arc<Calls>)>,
    settings: RestSettings,
) -> anyhow::Result<()> {
    let (status, content_type, body) = match respond(host, settings).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "answering with HOST_ERROR");
            host_error_answer(&error)
        }
    };
    let mut stdout = std::io::stdout().lock();
    write!(
        stdout,
        "Status: {} {}\r\nContent-Type: {content_type}\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )?;
    stdout.write_all(&body)?;
    stdout.flush()?;
    Ok(())
}

/// The answer when the host itself failed: a HOST_ERROR envelope through
/// the one HTTP writer (`http.rs`), so it carries `success` and
/// `timestamp` like every other HTTP answer.
fn host_error_answer(error: &anyhow::Error) -> (StatusCode, String, axum::body::Bytes) {
    let envelope = Envelope::host_error(ErrorCode::HostError, format!("{error:#}"), None);
    let status =
        StatusCode::from_u16(envelope.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&http_body(&envelope)).unwrap_or_default();
    (status, "application/json".to_string(), body.into())
}

/// The status, content type and body of the answer to the CGI request.
async fn respond(
    host: anyhow::Result<(Arc<Registry>, Arc<Calls>)>,
    settings: RestSettings,
) -> anyhow::Result<(StatusCode, String, axum::body::Bytes)> {
    let max_body_bytes = settings.max_body_bytes;
    let (registry, calls) = host?;
    let router = rest::health_router(registry.clone(), calls.clone(), settings)
        .merge(rest::router(registry, calls, settings, None));
    let request = cgi_request(max_body_bytes)?;
    let response = router.oneshot(request).await?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    Ok((status, content_type, body))
}

/// Builds the HTTP request the CGI environment describes. As RFC 3875 says,
/// the body is CONTENT_LENGTH bytes of stdin (none without it); never more
/// than one byte past the limit is read: enough for the router to answer 413.
fn cgi_request(max_body_bytes: usize) -> anyhow::Result<Request<Body>> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let method = var("REQUEST_METHOD").unwrap_or_else(|| "GET".into());
    let path = var("PATH_INFO").unwrap_or_else(|| "/".into());
    let uri = match var("QUERY_STRING") {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let declared_length = var("CONTENT_LENGTH").and_then(|length| length.parse::<u64>().ok());
    let readable = declared_length.unwrap_or(0).min(max_body_bytes as u64 + 1);
    let mut body = Vec::new();
    std::io::stdin()
        .lock()
        .take(readable)
        .read_to_end(&mut body)?;

    let mut request = Request::builder().method(method.as_str()).uri(uri);
    if let Some(length) = declared_length {
        request = request.header(header::CONTENT_LENGTH, length);
    }
    if let Some(content_type) = var("CONTENT_TYPE") {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    Ok(request.body(Body::from(body))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fallback answer is an envelope like every other HTTP answer:
    /// status, code, message, and the two fields seed 001 asks for.
    #[test]
    fn a_host_failure_is_answered_through_the_shared_writer() {
        let error = anyhow::anyhow!("cannot read the plugin folder /x: gone");
        let (status, content_type, body) = host_error_answer(&error);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(content_type, "application/json");
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "HOST_ERROR", "{body}");
        assert_eq!(body["isError"], true, "{body}");
        assert_eq!(body["success"], false, "{body}");
        assert!(
            body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{body}"
        );
        assert!(
            body["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("gone"),
            "{body}"
        );
    }
}
