//! The frame a tool's view runs in on the page (`GET /ui/view-frame`):
//! an empty document whose one script takes the view's HTML from the page
//! (`postMessage`) and writes it in. It is served with the view's CSP and
//! nothing more, built here from the origins the page passes (each checked
//! as a view's are at load, `registry/app_views.rs`), and with the CSP's
//! `sandbox`: the document runs in an opaque origin, so the view reads
//! nothing of the page (its token, its storage, this server's cookies) and
//! fetches only from what its CSP names. The page frames it with the same
//! sandbox, and closes it if it loads another page into its frame, which
//! no CSP forbids (`ui/views.js`); no other site may frame it.
//!
//! The document holds no data: anyone may load it. The view's HTML is
//! read by the page with the person's token, as any resource is.

use axum::extract::Query;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::registry::app_views::is_origin;

/// The most origins one list may name, as for a view.
const MAX_ORIGINS: usize = 32;

/// The frame's document: it says it is ready, takes the first HTML its
/// parent sends, and writes it in place of itself.
const FRAME: &str = r#"<!doctype html><meta charset="utf-8"><script>
addEventListener("message", function take(event) {
  if (event.source !== parent || !event.data || typeof event.data.toolhostView !== "string") return;
  removeEventListener("message", take);
  document.open();
  document.write(event.data.toolhostView);
  document.close();
});
parent.postMessage({ toolhostFrame: "ready" }, "*");
</script>"#;

/// The view's CSP lists, each origins separated by spaces.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Lists {
    #[serde(default)]
    connect: String,
    #[serde(default)]
    resource: String,
    #[serde(default)]
    frame: String,
    #[serde(default)]
    base: String,
}

/// `GET /ui/view-frame`, served beside the page's assets, under the page's
/// guard.
pub(crate) fn router() -> axum::Router {
    axum::Router::new().route("/ui/view-frame", axum::routing::get(frame))
}

/// `GET /ui/view-frame?connect=…&resource=…&frame=…&base=…`.
async fn frame(query: Result<Query<Lists>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(lists)) = query else {
        return refuse("the query names lists other than connect, resource, frame and base".into());
    };
    let policy = match policy(&lists) {
        Ok(policy) => policy,
        Err(reason) => return refuse(reason),
    };
    let Ok(policy) = HeaderValue::from_str(&policy) else {
        return refuse("the origins do not make a header".into());
    };
    // An asset as the page's others are, with the view's policy in place
    // of the page's, and never kept.
    let mut response = super::ui::asset("text/html; charset=utf-8", FRAME);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The frame's CSP: the extension's restrictive default, widened by the
/// view's lists only, in an opaque origin (`sandbox allow-scripts`).
fn policy(lists: &Lists) -> Result<String, String> {
    let list = |name: &str, text: &str| -> Result<String, String> {
        let origins: Vec<&str> = text.split_whitespace().collect();
        if origins.len() > MAX_ORIGINS {
            return Err(format!(
                "{name} names {} origins, over {MAX_ORIGINS}",
                origins.len()
            ));
        }
        if let Some(bad) = origins.iter().find(|origin| !is_origin(origin)) {
            return Err(format!(
                "{name} entry {bad:?} is not an origin (scheme://host[:port])"
            ));
        }
        Ok(origins.join(" "))
    };
    let connect = list("connect", &lists.connect)?;
    let resource = list("resource", &lists.resource)?;
    let frame = list("frame", &lists.frame)?;
    let base = list("base", &lists.base)?;
    let or_none = |text: &str| {
        if text.is_empty() {
            "'none'".to_string()
        } else {
            text.to_string()
        }
    };
    Ok(format!(
        "sandbox allow-scripts; default-src 'none'; \
         script-src 'unsafe-inline' {resource}; style-src 'unsafe-inline' {resource}; \
         img-src data: {resource}; media-src data: {resource}; font-src {font}; \
         connect-src {connect}; frame-src {frame}; base-uri {base}; \
         object-src 'none'; form-action 'none'; frame-ancestors 'self'",
        font = or_none(&resource),
        connect = or_none(&connect),
        frame = or_none(&frame),
        base = or_none(&base),
    ))
}

fn refuse(reason: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": { "code": "INVALID_REQUEST", "message": reason } })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_the_restrictive_default_widened_by_origins_only() {
        let plain = policy(&Lists::default()).unwrap();
        assert!(plain.starts_with("sandbox allow-scripts;"));
        assert!(plain.contains("connect-src 'none'"));
        assert!(plain.contains("frame-src 'none'"));
        let wider = policy(&Lists {
            connect: "https://api.example.com wss://rt.example.com".into(),
            ..Lists::default()
        })
        .unwrap();
        assert!(wider.contains("connect-src https://api.example.com wss://rt.example.com;"));
        for sneaky in [
            "'unsafe-eval'",
            "https://a.example;",
            "*",
            "https://a.example/x",
        ] {
            let refused = policy(&Lists {
                resource: sneaky.into(),
                ..Lists::default()
            });
            assert!(refused.is_err(), "{sneaky}");
        }
    }
}
