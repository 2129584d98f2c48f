//! The one rule for the texts of a plugin's definitions that an agent
//! reads: no invisible characters. The titles and descriptions of tools,
//! resources, URI templates, prompts and prompts' arguments, and every
//! `title` and `description` at any depth of a tool's input and output
//! schemas, may hold no character of Unicode general category Cc (controls:
//! NUL, ESC, carriage return, ...) or Cf (format: zero-width spaces and
//! joiners, the soft hyphen, the byte order mark, bidirectional controls,
//! ...) other than newline and tab, and nothing of the tag block (U+E0000
//! to U+E007F). Such characters show as nothing to the admin who approves
//! a plugin, or make text display other than it reads, while a model reads
//! them all: tag characters mirror ASCII, so a sentence spelt in them is an
//! instruction nobody sees.
//!
//! A refusal names the code point, what kind of character it is and where
//! (which text, the path into a schema, the character counted from 1); it
//! never repeats the text. The general categories are those of
//! `unicode-general-category` (Unicode 16.0).

use serde_json::Value;
use unicode_general_category::{GeneralCategory, get_general_category};

/// Why a definition's text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// `place` names the text (`title`,
    /// `inputSchema.properties.text.description`); `at` is where the
    /// character is in it, counted in characters from 1.
    #[error(
        "{place}: U+{code:04X} ({kind}) at character {at}: no title or description may \
         hold an invisible character"
    )]
    Invisible {
        place: String,
        code: u32,
        kind: &'static str,
        at: usize,
    },
}

/// Refuses `text`, which `place` names, if it holds an invisible character.
pub(crate) fn check(place: &str, text: &str) -> Result<(), TextError> {
    check_at(|| place.to_string(), text)
}

/// Refuses a tool's schema (`root` names it: `inputSchema`) if any
/// `title` or `description` in it holds an invisible character, at any
/// depth: under `properties`, `items`, `$defs`, `anyOf` and every other
/// keyword, and in `default` and `examples` values too. A property named
/// `title` or `description` is a schema, not a text, and is walked into.
/// The depth is bounded by the JSON parser's (128).
pub(crate) fn check_schema(root: &str, schema: &Value) -> Result<(), TextError> {
    walk(root, schema, &mut Vec::new())
}

/// One step into a schema: a key of an object, or an index of an array.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn walk<'a>(root: &str, value: &'a Value, path: &mut Vec<Step<'a>>) -> Result<(), TextError> {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                path.push(Step::Key(key));
                if let ("title" | "description", Value::String(text)) = (key.as_str(), value) {
                    check_at(|| place(root, path), text)?;
                }
                walk(root, value, path)?;
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(Step::Index(index));
                walk(root, item, path)?;
                path.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// A path into a schema as a refusal names it: `.key` for a key of
/// letters, digits, `_`, `-` and `$`, `["key"]` (escaped) for any other,
/// `[index]` for an array's item.
fn place(root: &str, path: &[Step]) -> String {
    let mut place = root.to_string();
    for step in path {
        match step {
            Step::Key(key)
                if !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$')) =>
            {
                place.push('.');
                place.push_str(key);
            }
            Step::Key(key) => place.push_str(&format!("[{key:?}]")),
            Step::Index(index) => place.push_str(&format!("[{index}]")),
        }
    }
    place
}

/// [`check`] with the place named only when there is a refusal.
fn check_at(place: impl FnOnce() -> String, text: &str) -> Result<(), TextError> {
    let found = text
        .chars()
        .enumerate()
        .find_map(|(index, c)| Some((index + 1, c, kind(c)?)));
    match found {
        None => Ok(()),
        Some((at, c, kind)) => Err(TextError::Invisible {
            place: place(),
            code: u32::from(c),
            kind,
            at,
        }),
    }
}

/// What kind of invisible character `c` is, or `None` for a character a
/// text may hold.
fn kind(c: char) -> Option<&'static str> {
    if c.is_ascii() {
        return match c {
            '\n' | '\t' => None,
            '\0' => Some("NUL"),
            '\u{1B}' => Some("ESC"),
            c if c.is_ascii_control() => Some("a control character"),
            _ => None,
        };
    }
    match c {
        // Unassigned ones included: the block is reserved for tags.
        '\u{E0000}'..='\u{E007F}' => Some("a tag character"),
        '\u{061C}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' => Some("a bidirectional control character"),
        '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' => Some("a zero-width character"),
        '\u{00AD}' => Some("a soft hyphen"),
        // Invisible operators and deprecated format controls; the block's
        // one unassigned code point (U+2065) is reserved for more of them.
        '\u{2060}'..='\u{206F}' => Some("an invisible format character"),
        _ => match get_general_category(c) {
            GeneralCategory::Control => Some("a control character"),
            GeneralCategory::Format => Some("an invisible format character"),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(text: &str) -> String {
        check("description", text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn each_kind_of_invisible_character_is_named_and_newlines_and_tabs_pass() {
        let cases = [
            // Tag characters: "Ig" in tags, the block's first and last.
            (
                "Adds.\u{E0049}\u{E0067}",
                "U+E0049 (a tag character) at character 6",
            ),
            ("\u{E0001}", "U+E0001 (a tag character) at character 1"),
            ("x\u{E007F}", "U+E007F (a tag character) at character 2"),
            ("\u{E0000}", "U+E0000 (a tag character) at character 1"),
            // Zero-width characters.
            (
                "a\u{200B}b",
                "U+200B (a zero-width character) at character 2",
            ),
            (
                "a\u{200C}b",
                "U+200C (a zero-width character) at character 2",
            ),
            (
                "a\u{200D}b",
                "U+200D (a zero-width character) at character 2",
            ),
            (
                "a\u{2060}b",
                "U+2060 (a zero-width character) at character 2",
            ),
            (
                "\u{FEFF}a",
                "U+FEFF (a zero-width character) at character 1",
            ),
            // ESC, NUL and the other controls.
            ("\u{1B}[8mhidden", "U+001B (ESC) at character 1"),
            ("Adds\0.", "U+0000 (NUL) at character 5"),
            ("one\r\ntwo", "U+000D (a control character) at character 4"),
            ("\u{7F}", "U+007F (a control character) at character 1"),
            ("a\u{85}", "U+0085 (a control character) at character 2"),
            // The soft hyphen.
            ("co\u{AD}operate", "U+00AD (a soft hyphen) at character 3"),
            // Bidirectional controls.
            (
                "safe\u{202E}txt",
                "U+202E (a bidirectional control character) at character 5",
            ),
            (
                "\u{2066}x\u{2069}",
                "U+2066 (a bidirectional control character) at character 1",
            ),
            (
                "a\u{200F}",
                "U+200F (a bidirectional control character) at character 2",
            ),
            (
                "\u{061C}",
                "U+061C (a bidirectional control character) at character 1",
            ),
            // Other format characters, and the unassigned U+2065.
            (
                "a\u{2062}b",
                "U+2062 (an invisible format character) at character 2",
            ),
            (
                "\u{2065}",
                "U+2065 (an invisible format character) at character 1",
            ),
            (
                "\u{180E}",
                "U+180E (an invisible format character) at character 1",
            ),
            (
                "\u{1D173}",
                "U+1D173 (an invisible format character) at character 1",
            ),
            // Counted in characters, not bytes.
            (
                "Grüße\u{200B}",
                "U+200B (a zero-width character) at character 6",
            ),
        ];
        // Every case is tried, so a failure lists each kind that is missed.
        let mut wrong: Vec<String> = cases
            .into_iter()
            .filter_map(|(text, named)| {
                let refusal = refusal(text);
                let right = refusal.starts_with(&format!("description: {named}"));
                (!right).then(|| format!("{text:?}: {refusal:?}"))
            })
            .collect();
        let visible = [
            "",
            "Adds two numbers.\n\n\tReturns their sum.",
            "Grüße aus 東京 — «ça va» ✓ 👍🏽",
            "non\u{A0}breaking, ‘quoted’ …",
        ];
        for text in visible {
            if check("description", text).is_err() {
                wrong.push(format!("{text:?} is refused"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn schemas_are_walked_to_any_depth() {
        let mut schema = json!({
            "type": "object",
            "title": "Input",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A property named description is a schema.\n\tFine."
                },
                "list": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "deep": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/d"}]}
                        }
                    }
                }
            },
            "$defs": {"d": {"type": "number", "title": "D", "description": "ok"}}
        });
        assert_eq!(check_schema("inputSchema", &schema), Ok(()));
        let refusal = |schema: &Value| {
            check_schema("inputSchema", schema)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };

        let mut defs = schema.clone();
        defs["$defs"]["d"]["description"] = json!("ok\u{E0020}");
        assert!(
            refusal(&defs).starts_with(
                "inputSchema.$defs.d.description: U+E0020 (a tag character) at character 3"
            ),
            "{}",
            refusal(&defs)
        );

        let deep = &mut schema["properties"]["list"]["items"]["properties"]["deep"];
        deep["anyOf"][0]["title"] = json!("\u{200C}");
        let expected = "inputSchema.properties.list.items.properties.deep.anyOf[0].title: \
                        U+200C (a zero-width character) at character 1";
        assert!(
            refusal(&schema).starts_with(expected),
            "{}",
            refusal(&schema)
        );

        // A key that is no plain word is quoted and escaped: the refusal
        // holds no invisible character of its own.
        let odd = json!({"type": "object", "properties": {
            "a.b\u{E0041}": {"type": "string", "description": "x\u{1B}"}
        }});
        let refusal = refusal(&odd);
        assert!(
            refusal.starts_with(
                r#"inputSchema.properties["a.b\u{e0041}"].description: U+001B (ESC) at character 2"#
            ),
            "{refusal}"
        );
        assert!(refusal.chars().all(|c| kind(c).is_none()), "{refusal}");
    }
}
