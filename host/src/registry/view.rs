//! What one caller may see: a tool set (the tokens file's `tools = […]`,
//! or an OAuth claim's groups), resolved for one person, and the one test
//! every list and every lookup asks of a plugin id.
//!
//! A set is a list of globs over plugin ids (`namespace/name`, or `name`
//! at the top level): `*` matches within one part (`instructor/*` is the
//! instructor's plugins, `*` the top level's), `**` matches everything,
//! `?` and `[abc]` as in shell globs. `{self}` was replaced by the
//! person's namespace before a pattern gets here. A plugin's tools,
//! resources and prompts follow it: a caller sees all of them or none.
//!
//! [`View::all`] (no set) sees everything, as a server without sets always
//! did. Anything outside a view answers as if it did not exist; that rule
//! lives with each lookup (`call/`), which asks [`View::sees`].

use std::sync::Arc;

use glob::{MatchOptions, Pattern};

/// Globs are matched with `/` literal (`*` stays within one part).
const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A tool set's pattern that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadPattern {
    /// It is made of more than plugin ids and glob signs, or a part of it
    /// names nothing.
    #[error(
        "the pattern {0:?} is not a glob over plugin ids (`namespace/name` or `name`, with `*`, \
         `**`, `?` or `[…]`, and `{{self}}` for the person's namespace)"
    )]
    NotAGlob(String),
    /// The glob crate refused it (an unclosed `[`, say).
    #[error("the pattern {pattern:?}: {source}")]
    Glob {
        pattern: String,
        source: glob::PatternError,
    },
}

/// One person's set of plugins, resolved.
#[derive(Debug)]
pub struct ToolSet {
    patterns: Vec<Pattern>,
    /// The resolved patterns, sorted and joined: equal keys see alike, so
    /// a list made for one is good for the other.
    key: Arc<str>,
}

/// What a caller sees: everything, or a [`ToolSet`].
#[derive(Debug, Clone, Default)]
pub struct View(Option<Arc<ToolSet>>);

impl View {
    /// Everything (no set).
    pub fn all() -> View {
        View(None)
    }

    /// A view of the plugins `patterns` match (already resolved: no
    /// `{self}` left). An invalid pattern is an error naming it.
    pub(crate) fn of(patterns: &[String]) -> Result<View, BadPattern> {
        let mut resolved: Vec<String> = patterns.to_vec();
        resolved.sort();
        resolved.dedup();
        let compiled = resolved
            .iter()
            .map(|pattern| {
                check_pattern(pattern)?;
                Pattern::new(pattern).map_err(|source| BadPattern::Glob {
                    pattern: pattern.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, BadPattern>>()?;
        Ok(View(Some(Arc::new(ToolSet {
            patterns: compiled,
            key: resolved.join("\n").into(),
        }))))
    }

    /// Whether the caller sees plugin `id` (and so its tools, resources
    /// and prompts).
    pub(crate) fn sees(&self, id: &str) -> bool {
        match &self.0 {
            None => true,
            Some(set) => set
                .patterns
                .iter()
                .any(|pattern| pattern.matches_with(id, OPTIONS)),
        }
    }

    /// Whether the caller holds every plugin of `namespace` (of the top
    /// level, for `None`): a pattern `namespace/*` (or a glob whose first
    /// part matches it, such as `*/*`), `*` for the top level, or `**`.
    /// What a namespace shares as a whole (its skills) follows this, not
    /// any one plugin: a set of `ada/word_count` alone does not hold it.
    pub(crate) fn holds_all_of(&self, namespace: Option<&str>) -> bool {
        let Some(set) = &self.0 else {
            return true;
        };
        set.patterns.iter().any(|pattern| {
            let text = pattern.as_str();
            text == "**"
                || match namespace {
                    None => text == "*",
                    Some(namespace) => text.split_once('/').is_some_and(|(first, rest)| {
                        matches!(rest, "*" | "**")
                            && Pattern::new(first)
                                .is_ok_and(|first| first.matches_with(namespace, OPTIONS))
                    }),
                }
        })
    }

    /// Whether this view sees everything.
    pub(crate) fn is_all(&self) -> bool {
        self.0.is_none()
    }

    /// What tells views apart: `None` for everything, else the resolved
    /// patterns (equal keys, equal views).
    pub(crate) fn key(&self) -> Option<&Arc<str>> {
        self.0.as_ref().map(|set| &set.key)
    }
}

impl PartialEq for View {
    fn eq(&self, other: &View) -> bool {
        self.key() == other.key()
    }
}

impl Eq for View {}

/// A pattern is made of what plugin ids are made of (letters, digits, `_`,
/// `-`, `.`, one `/`) and the glob signs `*`, `?`, `[`, `]`, `!`.
fn check_pattern(pattern: &str) -> Result<(), BadPattern> {
    // `!` negates a class (`[!a]`) and nothing else: `!finance/*` is no
    // exclusion, and reading it as one would widen a set.
    let bare_bang = pattern
        .char_indices()
        .any(|(at, c)| c == '!' && !pattern[..at].ends_with('['));
    // Each part names something: `instructor/`, `/echo` and `../x` match
    // no plugin id, and a typo should not quietly see nothing.
    let parts_named = pattern
        .split('/')
        .all(|part| !part.is_empty() && !part.starts_with('.') && !part.starts_with('-'));
    let fine = !pattern.is_empty()
        && parts_named
        && !bare_bang
        && pattern.len() <= 200
        && pattern.matches('/').count() <= 1
        && pattern.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'/' | b'*' | b'?' | b'[' | b']' | b'!'
                )
        });
    if fine {
        Ok(())
    } else {
        Err(BadPattern::NotAGlob(pattern.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(patterns: &[&str]) -> View {
        View::of(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn globs_match_within_a_part_and_double_stars_everything() {
        let room = view(&["instructor/*", "ada/*"]);
        assert!(room.sees("instructor/echo"));
        assert!(room.sees("ada/word_count"));
        assert!(!room.sees("bob/word_count"));
        assert!(!room.sees("echo"));
        assert!(!room.sees("instructor"));
        let top = view(&["*"]);
        assert!(top.sees("echo") && !top.sees("ada/echo"));
        let every = view(&["**"]);
        assert!(every.sees("echo") && every.sees("ada/echo"));
        let none = view(&[]);
        assert!(!none.sees("echo"));
        assert!(View::all().sees("anything/at_all"));
        assert!(view(&["finance/report_?", "[ab]*/x"]).sees("finance/report_1"));
        assert!(view(&["[ab]*/x"]).sees("bob/x"));
    }

    #[test]
    fn a_namespace_is_held_whole_or_not_at_all() {
        assert!(View::all().holds_all_of(Some("ada")) && View::all().holds_all_of(None));
        let ada = view(&["ada/*"]);
        assert!(ada.holds_all_of(Some("ada")) && !ada.holds_all_of(Some("bob")));
        assert!(!ada.holds_all_of(None));
        assert!(!view(&["ada/word_count", "ada/w*", "ada/?"]).holds_all_of(Some("ada")));
        assert!(view(&["*/*"]).holds_all_of(Some("bob")));
        assert!(view(&["*"]).holds_all_of(None) && !view(&["*"]).holds_all_of(Some("ada")));
        assert!(view(&["**"]).holds_all_of(Some("ada")));
    }

    #[test]
    fn equal_sets_are_equal_views_and_bad_patterns_are_named() {
        assert_eq!(view(&["b/*", "a/*", "a/*"]), view(&["a/*", "b/*"]));
        assert_ne!(view(&["a/*"]), View::all());
        assert!(view(&["[!f]*/x"]).sees("a/x") && !view(&["[!f]*/x"]).sees("f/x"));
        for bad in [
            "",
            "a/b/c",
            "{self}/*",
            "a b",
            "@group",
            "!finance/*",
            "instructor/",
            "/echo",
            "../*",
        ] {
            let error = View::of(&[bad.to_string()])
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
            assert!(error.contains("not a glob"), "{bad:?}: {error}");
        }
    }
}
