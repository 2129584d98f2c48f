//! Tool sets as the tokens file writes them, resolved into the [`View`] of
//! one person: `tools = ["instructor/*", "{self}/*", "@room"]`.
//!
//! - a pattern is a glob over plugin ids (`registry/view.rs`);
//! - `{self}` is the person's namespace (their name; a token holder's
//!   mapped namespace), and a pattern that needs it is left out for
//!   someone who has none;
//! - `@name` stands for a `[[group]]`'s patterns, which many tokens share:
//!
//! ```toml
//! [[group]]
//! name = "room"
//! tools = ["instructor/*", "{self}/*"]
//! ```
//!
//! - OAuth access tokens get theirs from the claim `--auth-tools-claim`
//!   names: each of its values (a list, or a space-separated string) that
//!   names a group (with or without `@`) adds that group; other values are
//!   ignored, so the claim may be `scope` itself. A token without one of
//!   the groups sees nothing: once the operator names a claim, a set is
//!   never widened by leaving it out.
//!
//! No `tools` (and, for access tokens, no `--auth-tools-claim`) sees every
//! tool, as before sets existed.

use std::collections::BTreeMap;

use crate::registry::view::{BadPattern, View};

/// Groups by name: each a list of patterns (no `@` inside a group).
pub(super) type Groups = BTreeMap<String, Vec<String>>;

/// Why a tool set or a group cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub(super) enum SetError {
    /// `@name` names no group.
    #[error("no [[group]] is named {0:?}")]
    UnknownGroup(String),
    /// A pattern is not a glob over plugin ids.
    #[error(transparent)]
    Pattern(#[from] BadPattern),
    #[error("group {0:?}: a name is 1 to 64 letters, digits, `_` or `-`, starting with a letter")]
    GroupName(String),
    #[error("group {0:?}: a group lists patterns, not other groups")]
    GroupInGroup(String),
    /// A group's patterns do not resolve.
    #[error("group {group:?}: {source}")]
    InGroup {
        group: String,
        source: Box<SetError>,
    },
}

/// The view of someone whose namespace is `namespace`, from their
/// `patterns` (`None`: every tool). An unknown group or a bad pattern is
/// an error naming it.
pub(super) fn resolve(
    patterns: Option<&[String]>,
    groups: &Groups,
    namespace: Option<&str>,
) -> Result<View, SetError> {
    let Some(patterns) = patterns else {
        return Ok(View::all());
    };
    let mut resolved = Vec::new();
    for pattern in patterns {
        let expanded: Vec<&String> = match pattern.strip_prefix('@') {
            Some(group) => groups
                .get(group)
                .ok_or_else(|| SetError::UnknownGroup(group.to_string()))?
                .iter()
                .collect(),
            None => vec![pattern],
        };
        for pattern in expanded {
            if pattern.contains("{self}") {
                if let Some(namespace) = namespace {
                    resolved.push(pattern.replace("{self}", namespace));
                }
            } else {
                resolved.push(pattern.clone());
            }
        }
    }
    Ok(View::of(&resolved)?)
}

/// Checks the groups themselves: valid names, patterns only (a group names
/// no other group), each pattern a valid glob once `{self}` is filled in.
pub(super) fn check_groups(groups: &Groups) -> Result<(), SetError> {
    for (name, patterns) in groups {
        if !super::person::is_valid_person(name) {
            return Err(SetError::GroupName(name.clone()));
        }
        if patterns.iter().any(|pattern| pattern.starts_with('@')) {
            return Err(SetError::GroupInGroup(name.clone()));
        }
        resolve(Some(patterns), groups, Some("someone")).map_err(|error| SetError::InGroup {
            group: name.clone(),
            source: Box::new(error),
        })?;
    }
    Ok(())
}

/// An access token's view: the groups its claim names (`None`: no claim
/// is configured, every tool).
pub(super) fn of_claim(
    claimed: Option<&[String]>,
    groups: &Groups,
    namespace: Option<&str>,
) -> View {
    let Some(claimed) = claimed else {
        return View::all();
    };
    let named: Vec<String> = claimed
        .iter()
        .map(|value| value.trim_start_matches('@'))
        .filter(|group| groups.contains_key(*group))
        .map(|group| format!("@{group}"))
        .collect();
    // The groups were checked when the file was read.
    resolve(Some(&named), groups, namespace).unwrap_or_else(|_| nothing())
}

/// A view of nothing.
fn nothing() -> View {
    View::of(&[]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn groups_and_self_expand_per_person() {
        let groups: Groups = [("room".to_string(), strings(&["instructor/*", "{self}/*"]))].into();
        let ada = resolve(Some(&strings(&["@room"])), &groups, Some("ada")).unwrap();
        assert!(ada.sees("instructor/echo") && ada.sees("ada/echo") && !ada.sees("bob/echo"));
        let nobody = resolve(Some(&strings(&["{self}/*"])), &groups, None).unwrap();
        assert!(!nobody.sees("ada/echo"));
        assert!(resolve(None, &groups, Some("ada")).unwrap().is_all());
        let unknown = resolve(Some(&strings(&["@nope"])), &groups, Some("ada"));
        assert!(unknown.unwrap_err().to_string().contains("no [[group]]"));
        assert!(check_groups(&[("g".to_string(), strings(&["@room"]))].into()).is_err());
    }

    #[test]
    fn a_claim_names_groups_and_nothing_else() {
        let groups: Groups = [("support".to_string(), strings(&["support/*"]))].into();
        let claimed = strings(&["tools:call", "support", "finance/*"]);
        let view = of_claim(Some(&claimed), &groups, Some("oauth-ada"));
        assert!(view.sees("support/lookup") && !view.sees("finance/ledger"));
        let none = of_claim(Some(&strings(&["tools:call"])), &groups, None);
        assert!(!none.sees("support/lookup") && !none.is_all());
        assert!(of_claim(None, &groups, None).is_all());
    }
}
