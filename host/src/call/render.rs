//! Renders structured data as the text block that goes with it: pretty
//! JSON by default, or a fenced markdown block of `Key: Value` lines, which
//! language models read as data rather than as code to run.

use serde_json::{Map, Value};

/// How structured-only results are rendered into their text block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TextFormat {
    /// The structured data as pretty-printed JSON.
    #[default]
    Json,
    /// A fenced block of `Key: Value` lines, which language models read as
    /// data rather than as code to run.
    Markdown,
}

impl TextFormat {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "json" => Some(TextFormat::Json),
            "markdown" => Some(TextFormat::Markdown),
            _ => None,
        }
    }
}

/// Renders structured data as the text block that accompanies it.
pub(crate) fn render(object: &Map<String, Value>, format: TextFormat) -> String {
    match format {
        TextFormat::Json => serde_json::to_string_pretty(object).unwrap_or_default(),
        TextFormat::Markdown => render_markdown(object),
    }
}

/// `Key: Value` lines in a fenced code block. Keys are spelled as words
/// (`wind_speed` and `windSpeed` become `Wind Speed`); null is `N/A`;
/// nested values are compact JSON. The fence grows past the longest run of
/// backticks in the data, so a value cannot close the block early.
fn render_markdown(object: &Map<String, Value>) -> String {
    let lines: Vec<String> = object
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::Null => "N/A".to_string(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            format!("{}: {value}", key_label(key))
        })
        .collect();
    let body = lines.join("\n");
    let longest_run = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    format!("{fence}\n{body}\n{fence}")
}

fn key_label(key: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if c == '_' || c == '-' || c == ' ' {
            words.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.push(c);
    }
    words.push(current);
    words
        .into_iter()
        .filter(|word| !word.is_empty())
        .map(|word| {
            if word.eq_ignore_ascii_case("id") {
                return "ID".to_string();
            }
            let mut chars = word.chars();
            let first = chars.next().map(|c| c.to_uppercase().collect::<String>());
            first.unwrap_or_default() + chars.as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_become_words() {
        assert_eq!(key_label("wind_speed"), "Wind Speed");
        assert_eq!(key_label("windSpeed"), "Wind Speed");
        assert_eq!(key_label("user_id"), "User ID");
        assert_eq!(key_label("temperature"), "Temperature");
    }

    #[test]
    fn markdown_is_a_fenced_key_value_block() {
        let data = json!({"name": "Alice", "phone": null, "tags": ["a"], "age": 42});
        let text = render(data.as_object().unwrap(), TextFormat::Markdown);
        assert_eq!(
            text,
            "```\nName: Alice\nPhone: N/A\nTags: [\"a\"]\nAge: 42\n```"
        );
    }

    #[test]
    fn backticks_in_data_lengthen_the_fence() {
        let data = json!({"code": "```rust"});
        let text = render(data.as_object().unwrap(), TextFormat::Markdown);
        assert!(
            text.starts_with("````\n") && text.ends_with("\n````"),
            "{text}"
        );
    }
}
