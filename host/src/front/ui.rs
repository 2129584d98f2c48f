//! The dashboard: `GET /` and its assets under `/ui/`, embedded in the
//! binary at build time (no CDN, no build step: plain HTML, CSS and
//! JavaScript modules in `host/ui/`; the code editor, CodeMirror 6, is one
//! bundled module, `ui/vendor/codemirror.js`, committed and rebuilt from
//! pinned packages by `make ui-editor`). The page holds no data of its own;
//! it reads the same routes as any client (`/me`, `/tools`, `/events`,
//! `POST /tools/{name}`, `PUT /plugins/...`) with the token the person
//! signs in with, so it needs no token itself. The Host and Origin checks
//! apply as to every route.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles
//! and connections from this origin only, no inline script or style, no
//! frames but this server's (a tool's view runs in one, `view_frame.rs`),
//! no plugins. The one exception is the code editor's theme, which
//! CodeMirror writes into a `<style>` element: the page admits that element
//! by a nonce drawn afresh for each `GET /` (in the CSP and in the page's
//! `style-nonce` meta, which `ui/editor.js` hands to CodeMirror). The page sets every text a plugin or the server
//! returns as text (`ui/dom.js`), never as HTML.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// Where the page's nonce goes in `ui/index.html`.
const NONCE_SLOT: &str = "STYLE_NONCE";

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
        "/ui/editor.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/editor.js"),
    ),
    (
        "/ui/connect.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/connect.js"),
    ),
    (
        "/ui/room.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/room.js"),
    ),
    (
        "/ui/asks.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/asks.js"),
    ),
    (
        "/ui/views.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/views.js"),
    ),
    (
        "/ui/skills.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/skills.js"),
    ),
    // The templates `toolhost new` writes, which the editor starts from
    // (text: the page inserts them into the editor, never runs them).
    (
        "/ui/templates/app.py",
        "text/plain; charset=utf-8",
        include_str!("../commands/templates/python/app.py"),
    ),
    (
        "/ui/templates/app.js",
        "text/plain; charset=utf-8",
        include_str!("../commands/templates/js/app.js"),
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

/// The bundled modules, gzipped as the binary was built (`build.rs`):
/// CodeMirror 6 from the pinned packages of `ui/editor/` (`make
/// ui-editor`), and the ext-apps bridge that hosts a tool's view from
/// those of `ui/apps/` (`make ui-apps`); a test rebuilds each and
/// compares.
const BUNDLES: &[(&str, &[u8])] = &[
    (
        "/ui/vendor/codemirror.js",
        include_bytes!(concat!(env!("OUT_DIR"), "/codemirror.js.gz")),
    ),
    (
        "/ui/vendor/app-bridge.js",
        include_bytes!(concat!(env!("OUT_DIR"), "/app-bridge.js.gz")),
    ),
];

pub(crate) fn router() -> Router {
    let router = BUNDLES
        .iter()
        .fold(Router::new(), |router, &(path, gzipped)| {
            router.route(
                path,
                get(move |headers: axum::http::HeaderMap| async move { bundle(&headers, gzipped) }),
            )
        });
    ASSETS
        .iter()
        .skip(1)
        .fold(router, |router, &(path, kind, body)| {
            router.route(path, get(move || async move { asset(kind, body) }))
        })
        .route("/", get(page))
}

/// The page, with a fresh nonce for the editor's `<style>` element.
async fn page() -> Response {
    let (_, kind, body) = ASSETS[0];
    let Some(nonce) = nonce() else {
        return asset(kind, body.replace(NONCE_SLOT, ""));
    };
    let mut response = asset(kind, body.replace(NONCE_SLOT, &nonce));
    let policy = CSP.replace(
        "style-src 'self'",
        &format!("style-src 'self' 'nonce-{nonce}'"),
    );
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// 128 random bits from the system, base64: a CSP nonce. Without the
/// system's randomness the page keeps the plain policy (the editor then
/// shows unstyled), never a guessable nonce.
fn nonce() -> Option<String> {
    use base64::Engine;
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A bundle as it is embedded, to a browser that takes gzip (every one
/// does); unpacked for a client that does not.
fn bundle(headers: &axum::http::HeaderMap, gzipped: &'static [u8]) -> Response {
    let kind = "text/javascript; charset=utf-8";
    let takes_gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let weight = parts
                .find_map(|param| param.trim().strip_prefix("q="))
                .map_or(1.0, |q| q.trim().parse::<f32>().unwrap_or(0.0));
            (name == "gzip" || name == "*").then_some((name, weight))
        })
        // `gzip` itself decides over `*`.
        .max_by_key(|(name, _)| name == "gzip")
        .is_some_and(|(_, weight)| weight > 0.0);
    let mut response = if takes_gzip {
        let mut response = asset(kind, gzipped);
        response
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        response
    } else {
        let mut plain = Vec::new();
        let unpacked =
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gzipped), &mut plain);
        match unpacked {
            Ok(_) => asset(kind, plain),
            Err(_) => return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    };
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    response
}

pub(super) fn asset(kind: &'static str, body: impl IntoResponse) -> Response {
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

    /// A bundle is served gzipped to a browser, which takes gzip, and
    /// unpacked to a client that does not: the same module either way.
    #[tokio::test]
    async fn a_bundle_is_gzipped_for_who_takes_it_and_plain_for_the_rest() {
        let (_, gzipped) = BUNDLES[1];
        let read = |response: Response| async move {
            let encoding = response
                .headers()
                .get(header::CONTENT_ENCODING)
                .map(|value| value.to_str().unwrap().to_string());
            let body = axum::body::to_bytes(response.into_body(), 1 << 22)
                .await
                .unwrap();
            (encoding, body)
        };
        let mut takes = axum::http::HeaderMap::new();
        takes.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip, deflate, br"),
        );
        let (encoding, body) = read(bundle(&takes, gzipped)).await;
        assert_eq!(encoding.as_deref(), Some("gzip"));
        assert_eq!(&body[..], gzipped);
        let mut refuses = axum::http::HeaderMap::new();
        refuses.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip;q=0"),
        );
        for headers in [axum::http::HeaderMap::new(), refuses] {
            let (encoding, body) = read(bundle(&headers, gzipped)).await;
            assert_eq!(encoding, None);
            assert_eq!(&body[..], include_bytes!("../../ui/vendor/app-bridge.js"));
        }
        assert!(gzipped.len() * 3 < body_len(), "gzip saves most of it");
    }

    fn body_len() -> usize {
        include_bytes!("../../ui/vendor/app-bridge.js").len()
    }

    /// No inline script, style or event handler in the page: the CSP
    /// would block them, and none may be needed.
    #[tokio::test]
    async fn each_page_admits_the_editors_style_by_a_nonce_of_its_own() {
        let policy = |response: &Response| {
            response.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .to_string()
        };
        let (first, second) = (page().await, page().await);
        let (one, two) = (policy(&first), policy(&second));
        assert!(one.contains("style-src 'self' 'nonce-"), "{one}");
        assert_ne!(one, two, "the nonce is drawn for each page");
        assert!(!one.contains("unsafe-inline"), "{one}");
        let nonce = one
            .split("'nonce-")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap();
        assert_eq!(nonce.len(), 24, "128 bits, base64");
        let body = axum::body::to_bytes(first.into_body(), 1 << 20)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            body.contains(&format!("content=\"{nonce}\"")),
            "the page carries it"
        );
        assert!(!body.contains(NONCE_SLOT));
    }

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
