//! A plugin's views (MCP Apps, the extension `io.modelcontextprotocol/ui`):
//! each checked as the plugin loads and kept whole, so `resources/read`
//! serves a view from memory, never by running the plugin, and
//! `--require-approval` pins exactly what serves (its HTML and `_meta` are
//! among the texts an admin approves, `pinned.rs`).
//!
//! What is checked: a `ui://` URI, an HTML document of at most
//! [`MAX_HTML_BYTES`], a title and description without hidden
//! characters, and every origin its CSP names: `scheme://host[:port]`
//! with an `http`, `https`, `ws` or `wss` scheme and a host of letters,
//! digits, `-` and `.` (a leading `*.` allowed), so no entry can add a
//! keyword or a directive to the policy a host builds from it.
//!
//! A view is one of the plugin's fixed resources (`catalog.rs` lists it,
//! serves its URI under the namespace's authority and keeps it apart from
//! every other plugin's); a tool names it by the URI it declared
//! (`tool_details.rs`).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::registry::invisible::{self, TextError};
use crate::runtime::{DeclaredCsp, DeclaredView};

/// The MIME type of a view's HTML, as the extension names it.
pub(crate) const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The extension's identifier in `capabilities.extensions`.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The largest view, in bytes of HTML.
pub(crate) const MAX_HTML_BYTES: usize = 1024 * 1024;

/// The most origins one list of a CSP may name.
const MAX_ORIGINS: usize = 32;

/// One view, ready to serve.
#[derive(Debug)]
pub(crate) struct AppView {
    pub(crate) html: Arc<str>,
    /// `_meta` as `resources/read` and `resources/list` give it
    /// (`{"ui": {...}}`), when the view says anything of CSP, border or
    /// domain.
    pub(crate) meta: Option<Value>,
}

/// Why a view was refused.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("view {0:?}: a view's URI starts with ui://")]
    NotUi(String),
    #[error("view {uri:?} is {bytes} bytes of HTML, over the {MAX_HTML_BYTES} a view may be")]
    TooLarge { uri: String, bytes: usize },
    #[error(
        "view {uri:?}: {list} entry {origin:?} is not an origin (scheme://host[:port], the scheme \
         http, https, ws or wss, the host letters, digits, `-` and `.`, `*.` first allowed)"
    )]
    BadOrigin {
        uri: String,
        list: &'static str,
        origin: String,
    },
    #[error("view {uri:?}: {list} names {count} origins, over the {MAX_ORIGINS} a list may")]
    TooManyOrigins {
        uri: String,
        list: &'static str,
        count: usize,
    },
    #[error(
        "view {uri:?}: domain {domain:?} is empty, longer than 253 characters, or holds a space"
    )]
    BadDomain { uri: String, domain: String },
    #[error("view {uri:?}: {text}")]
    Invisible { uri: String, text: TextError },
}

/// Checks `declared` and makes the view and its listing (its served `uri`,
/// name, title, description, MIME type and `_meta`).
pub(crate) fn build(
    declared: DeclaredView,
    uri: &str,
) -> Result<(AppView, Map<String, Value>), ViewError> {
    let DeclaredView {
        uri: declared_uri,
        name,
        title,
        description,
        html,
        csp,
        prefers_border,
        domain,
    } = declared;
    if !declared_uri.starts_with("ui://") {
        return Err(ViewError::NotUi(declared_uri));
    }
    if html.len() > MAX_HTML_BYTES {
        return Err(ViewError::TooLarge {
            uri: declared_uri,
            bytes: html.len(),
        });
    }
    for (place, text) in [
        ("title", title.as_deref()),
        ("description", description.as_deref()),
    ] {
        if let Some(text) = text {
            invisible::check(place, text).map_err(|text| ViewError::Invisible {
                uri: declared_uri.clone(),
                text,
            })?;
        }
    }
    let mut ui = Map::new();
    if let Some(csp) = csp {
        ui.insert("csp".into(), csp_json(&declared_uri, csp)?);
    }
    if let Some(prefers_border) = prefers_border {
        ui.insert("prefersBorder".into(), json!(prefers_border));
    }
    if let Some(domain) = domain {
        // Its form is each host's to say (the extension): any short text
        // without spaces or control characters is passed on.
        if domain.is_empty()
            || domain.len() > 253
            || domain.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ViewError::BadDomain {
                uri: declared_uri,
                domain,
            });
        }
        ui.insert("domain".into(), json!(domain));
    }
    let meta = (!ui.is_empty()).then(|| json!({ "ui": ui }));
    let mut listing = Map::new();
    listing.insert("uri".into(), json!(uri));
    listing.insert("name".into(), json!(name));
    if let Some(title) = title {
        listing.insert("title".into(), json!(title));
    }
    if let Some(description) = description {
        listing.insert("description".into(), json!(description));
    }
    listing.insert("mimeType".into(), json!(MIME_TYPE));
    if let Some(meta) = &meta {
        listing.insert("_meta".into(), meta.clone());
    }
    Ok((
        AppView {
            html: html.into(),
            meta,
        },
        listing,
    ))
}

impl AppView {
    /// `resources/read`'s one content: the HTML under the served `uri`.
    pub(crate) fn contents(&self, uri: &str) -> Value {
        let mut contents = json!({
            "uri": uri,
            "mimeType": MIME_TYPE,
            "text": &*self.html,
        });
        if let Some(meta) = &self.meta {
            contents["_meta"] = meta.clone();
        }
        contents
    }
}

/// The CSP's lists in the extension's names, each origin checked; empty
/// lists left out.
fn csp_json(uri: &str, csp: DeclaredCsp) -> Result<Value, ViewError> {
    let mut out = Map::new();
    for (list, origins) in [
        ("connectDomains", csp.connect_domains),
        ("resourceDomains", csp.resource_domains),
        ("frameDomains", csp.frame_domains),
        ("baseUriDomains", csp.base_uri_domains),
    ] {
        if origins.len() > MAX_ORIGINS {
            return Err(ViewError::TooManyOrigins {
                uri: uri.to_string(),
                list,
                count: origins.len(),
            });
        }
        if let Some(origin) = origins.iter().find(|origin| !is_origin(origin)) {
            return Err(ViewError::BadOrigin {
                uri: uri.to_string(),
                list,
                origin: origin.clone(),
            });
        }
        if !origins.is_empty() {
            out.insert(list.into(), json!(origins));
        }
    }
    Ok(Value::Object(out))
}

/// `scheme://host[:port]`: a web scheme, a host name (`*.` first
/// allowed), a port of digits; nothing after it.
pub(crate) fn is_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if !matches!(scheme, "http" | "https" | "ws" | "wss") {
        return false;
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let port_ok = port.is_none_or(|port| {
        (1..=5).contains(&port.len())
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|port| port > 0)
    });
    port_ok && is_host(host.strip_prefix("*.").unwrap_or(host))
}

/// Letters, digits, `-` and `.`, at most 253, no empty label.
fn is_host(host: &str) -> bool {
    (1..=253).contains(&host.len())
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(uri: &str, html: &str, csp: Option<DeclaredCsp>) -> DeclaredView {
        DeclaredView {
            uri: uri.into(),
            name: "chart".into(),
            title: None,
            description: None,
            html: html.into(),
            csp,
            prefers_border: Some(true),
            domain: None,
        }
    }

    fn csp(connect: &[&str]) -> DeclaredCsp {
        DeclaredCsp {
            connect_domains: connect.iter().map(|s| s.to_string()).collect(),
            resource_domains: Vec::new(),
            frame_domains: Vec::new(),
            base_uri_domains: Vec::new(),
        }
    }

    #[test]
    fn a_view_is_listed_and_read_with_its_mime_type_and_meta() {
        let (view, listing) = build(
            declared(
                "ui://chart",
                "<p>hi</p>",
                Some(csp(&["https://api.example.com"])),
            ),
            "ui://ada/chart",
        )
        .unwrap();
        assert_eq!(listing["mimeType"], MIME_TYPE);
        assert_eq!(listing["uri"], "ui://ada/chart");
        let read = view.contents("ui://ada/chart");
        assert_eq!(read["text"], "<p>hi</p>");
        assert_eq!(
            read["_meta"],
            json!({"ui": {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": true}})
        );
    }

    #[test]
    fn an_entry_that_is_not_an_origin_cannot_reach_the_policy() {
        for bad in [
            "'unsafe-eval'",
            "https://a.example.com; script-src *",
            "*",
            "https://a.example.com/path",
            "javascript://x",
            "https://",
            "https://a..b",
            "https://a.example.com:99999x",
            "https://a.example.com:70000",
        ] {
            let refused = build(declared("ui://v", "", Some(csp(&[bad]))), "ui://v");
            assert!(
                matches!(refused, Err(ViewError::BadOrigin { .. })),
                "{bad}: {refused:?}"
            );
        }
        for good in [
            "https://*.example.com",
            "wss://rt.example.com:8443",
            "http://127.0.0.1:8080",
        ] {
            assert!(is_origin(good), "{good}");
        }
    }

    #[test]
    fn a_view_is_ui_and_bounded() {
        assert!(matches!(
            build(declared("https://x", "", None), "https://x"),
            Err(ViewError::NotUi(_))
        ));
        let big = "x".repeat(MAX_HTML_BYTES + 1);
        assert!(matches!(
            build(declared("ui://v", &big, None), "ui://v"),
            Err(ViewError::TooLarge { .. })
        ));
    }
}
