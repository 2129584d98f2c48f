//! CORS for browser clients on other origins (the MCP Inspector's web UI,
//! a team's own page): only for the origins named with `--cors-origin`,
//! none by default.
//!
//! - A preflight (`OPTIONS` with `Origin` and
//!   `Access-Control-Request-Method`) from a listed origin is answered here,
//!   204, before any token check: a browser never sends a token with it.
//! - Every other answer to a listed origin, refusals included, carries
//!   `Access-Control-Allow-Origin` with that origin (never `*`), `Vary:
//!   Origin`, and the headers a client must read exposed (`Mcp-Session-Id`,
//!   `WWW-Authenticate`, `Retry-After`). Tokens travel as
//!   `Authorization: Bearer`, never as cookies, so credentials are not
//!   allowed.
//! - A request from any other origin goes on to the guard, which refuses a
//!   foreign `Origin` with 403 (a preflight too).
//!
//! The guard lets a listed origin pass its `Origin` check
//! ([`CorsOrigins::allows`]); nothing else here decides who may do what.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Request headers a cross-origin client may send.
const ALLOWED_HEADERS: &str = "authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, \
     mcp-method, mcp-name, toolhost-publish, toolhost-input, toolhost-request-state, prefer";
/// Response headers a cross-origin client may read.
const EXPOSED_HEADERS: &str =
    "mcp-session-id, www-authenticate, retry-after, location, preference-applied";
const ALLOWED_METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";

/// A `--cors-origin` value that is not an origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--cors-origin {0:?} is not an origin: give scheme://host[:port], such as http://localhost:6274"
)]
pub(crate) struct NotAnOrigin(pub(crate) String);

/// The origins allowed to call from a browser, exactly as browsers send
/// them (`https://inspector.example:6274`: scheme, host, port if any).
#[derive(Debug, Clone, Default)]
pub(crate) struct CorsOrigins(Vec<String>);

impl CorsOrigins {
    /// Parses `--cors-origin` values; an entry that is not
    /// `scheme://host[:port]` (no path, no `*`) is refused with the reason.
    pub(crate) fn parse(origins: &[String]) -> Result<CorsOrigins, NotAnOrigin> {
        let mut parsed = Vec::new();
        for origin in origins {
            let origin = origin.trim().trim_end_matches('/');
            let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https")
                    && !rest.is_empty()
                    && !rest.contains(['/', '*', '?', '#', '@', ' '])
            });
            if !valid {
                return Err(NotAnOrigin(origin.to_string()));
            }
            parsed.push(origin.to_ascii_lowercase());
        }
        Ok(CorsOrigins(parsed))
    }

    /// Whether `origin` (an `Origin` header's value) is listed.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        self.0.contains(&origin)
    }

    /// The request's `Origin`, when it is listed.
    pub(crate) fn listed_origin(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        self.allows(origin.to_str().ok()?).then(|| origin.clone())
    }
}

/// Whether `request` is a CORS preflight (`OPTIONS` asking for a method).
pub(crate) fn is_preflight(request: &Request) -> bool {
    request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The answer to a listed origin's preflight.
pub(crate) fn preflight() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOWED_METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// Marks an answer to the listed `origin` (refusals too).
pub(crate) fn mark(response: &mut Response, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED_HEADERS),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_exact_and_wildcards_are_refused() {
        let origins =
            CorsOrigins::parse(&["http://localhost:6274/".into(), "https://A.example".into()])
                .unwrap();
        assert!(origins.allows("http://localhost:6274"));
        assert!(origins.allows("https://a.example"));
        assert!(!origins.allows("http://localhost:6275"));
        assert!(!origins.allows("https://a.example.evil"));
        assert!(!origins.allows("null"));
        for bad in [
            "*",
            "http://*.example",
            "localhost:6274",
            "http://a/b",
            "ftp://a",
        ] {
            assert!(CorsOrigins::parse(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
