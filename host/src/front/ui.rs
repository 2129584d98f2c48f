//! The dashboard: `GET /` and its assets under `/ui/`, embedded in the
//! binary at build time (no CDN, no build step: plain HTML, CSS and
//! JavaScript modules in `host/ui/`). The page holds no data of its own;
//! it reads the same routes as any client (`/me`, `/tools`, `/events`,
//! `POST /tools/{name}`, `PUT /plugins/...`) with the token the person
//! signs in with, so it needs no token itself. The Host and Origin checks
//! apply as to every route.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles
//! and connections from this origin only, no inline script or style, no
//! frames, no plugins. The page sets every text a plugin or the server
//! returns as text (`ui/dom.js`), never as HTML.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Each asset: its path, content type and bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("../../ui/index.html"),
    ),
    (
        "/ui/app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/app.js"),
    ),
    (
        "/ui/form.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/form.js"),
    ),
    (
        "/ui/dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/dom.js"),
    ),
    (
        "/ui/style.css",
        "text/css; charset=utf-8",
        include_str!("../../ui/style.css"),
    ),
    (
        "/ui/icon.svg",
        "image/svg+xml",
        include_str!("../../ui/icon.svg"),
    ),
    // Browsers ask for it whatever the page says.
    (
        "/favicon.ico",
        "image/svg+xml",
        include_str!("../../ui/icon.svg"),
    ),
];

pub(crate) fn router() -> Router {
    ASSETS
        .iter()
        .fold(Router::new(), |router, &(path, kind, body)| {
            router.route(path, get(move || async move { asset(kind, body) }))
        })
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No inline script, style or event handler in the page: the CSP
    /// would block them, and none may be needed.
    #[test]
    fn the_page_has_nothing_inline_and_sets_no_html() {
        let page = ASSETS[0].2;
        assert!(!page.contains("<script>"), "inline script");
        assert!(!page.contains("style="), "inline style");
        let handler = page.split(" on").skip(1).any(|rest| {
            let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
            !name.is_empty() && rest[name.len()..].starts_with('=')
        });
        assert!(!handler, "inline event handler");
        for (path, _, body) in ASSETS.iter().filter(|(p, _, _)| p.ends_with(".js")) {
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!body.contains(sink), "{path} uses {sink}");
            }
        }
    }
}
