//! Skills (SEP-2640) on the one call path: every front (MCP, REST, the
//! page) lists, gets and reads skills here, with the caller's [`View`],
//! and gets the extension's JSON or an [`Envelope`] error whose code the
//! front maps. A skill outside the view answers as one that is not there
//! (the same code and message). No plugin code runs: a skill is files.

use serde_json::{Value, json};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::registry::Registry;
use crate::registry::view::View;

/// Skills per page of `skills/list`.
pub(crate) const PAGE: usize = 100;

/// `skills/list`: one page of the skills the caller sees, after `cursor`
/// (what the page before answered as `nextCursor`).
pub(crate) fn list(
    registry: &Registry,
    view: &View,
    cursor: Option<&str>,
) -> Result<Value, Envelope> {
    let after = after_cursor(cursor, "skills/list")?;
    let (page, next) = registry.skills().page(view, after.as_deref(), PAGE);
    let mut answer =
        json!({ "skills": page.iter().map(|skill| skill.entry()).collect::<Vec<_>>() });
    if let Some(next) = next {
        answer["nextCursor"] = json!(cursor_after(&next));
    }
    Ok(answer)
}

/// What a cursor `method` gave says: the key a page ends at.
fn after_cursor(cursor: Option<&str>, method: &str) -> Result<Option<String>, Envelope> {
    use base64::Engine as _;
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(Some)
        .ok_or_else(|| {
            Envelope::host_error(
                ErrorCode::InvalidRequest,
                format!("the cursor is not one {method} gave"),
                None,
            )
        })
}

/// The cursor of the page after the one ending at `last`.
fn cursor_after(last: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last)
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`.
pub(crate) fn get(registry: &Registry, view: &View, uri: &str) -> Result<Value, Envelope> {
    let skill = registry
        .skills()
        .get(uri, view)
        .ok_or_else(|| not_found(uri))?;
    Ok(json!({ "skill": skill.entry() }))
}

/// `resources/directory/read`: one page of the direct children of the
/// folder at `uri` (a skill's, or one in it) after `cursor` (what the page
/// before answered as `nextCursor`); a URI that names no folder of a skill
/// the caller sees answers as a skill that is not there.
pub(crate) fn directory(
    registry: &Registry,
    view: &View,
    uri: &str,
    cursor: Option<&str>,
) -> Result<Value, Envelope> {
    let children = registry.skills().directory(uri, view).ok_or_else(|| {
        Envelope::host_error(
            ErrorCode::SkillNotFound,
            format!("no skill's folder at {uri:?}"),
            Some(json!({ "uri": uri })),
        )
    })?;
    let after = after_cursor(cursor, "resources/directory/read")?;
    // Children come by URI: a page starts past the last one before it.
    let rest: Vec<Value> = children
        .into_iter()
        .filter(|child| {
            after
                .as_deref()
                .is_none_or(|after| child["uri"].as_str().unwrap_or_default() > after)
        })
        .collect();
    let more = rest.len() > PAGE;
    let page: Vec<Value> = rest.into_iter().take(PAGE).collect();
    let mut answer = json!({ "resources": page });
    if more && let Some(last) = page.last().and_then(|child| child["uri"].as_str()) {
        answer["nextCursor"] = json!(cursor_after(last));
    }
    Ok(answer)
}

/// `resources/read` of a skill's file, if `uri` is one (`None`: it is not
/// a skill's URI, and the plugins' resources answer).
pub(crate) fn read(registry: &Registry, view: &View, uri: &str) -> Option<Result<Value, Envelope>> {
    if !uri.starts_with("skill://") {
        return None;
    }
    let answer = registry
        .skills()
        .holding(uri, view)
        .and_then(|skill| skill.file(uri).map(|file| file.contents()))
        .map(|contents| json!({ "contents": [contents] }))
        .ok_or_else(|| {
            Envelope::host_error(
                ErrorCode::ResourceNotFound,
                format!("no resource at {uri:?}"),
                Some(json!({ "uri": uri })),
            )
        });
    Some(answer)
}

/// Each `SKILL.md` the caller sees, as `resources/list` lists it.
pub(crate) fn listings(registry: &Registry, view: &View) -> Vec<Value> {
    registry
        .skills()
        .seen(view)
        .iter()
        .map(|skill| skill.listing())
        .collect()
}

/// The answer for a skill that is not there (or not for this caller).
pub(crate) fn not_found(uri: &str) -> Envelope {
    Envelope::host_error(
        ErrorCode::SkillNotFound,
        format!("no skill at {uri:?}"),
        Some(json!({ "uri": uri })),
    )
}
