//! A `SKILL.md`'s frontmatter (the Agent Skills format, SEP-2640): the
//! YAML block between two `---` lines that opens the file, read into JSON
//! (served as it was written, every field kept) and checked, each fault
//! with the line of the file it is on.
//!
//! Checked: the block is there and is a mapping; `name` is 1–64 lowercase
//! letters, digits and single hyphens (none leading or trailing) and is the
//! skill's folder name; `description` is 1–1024 characters; `license` and
//! `allowed-tools` are strings; `compatibility` a string of at most 500;
//! `metadata` a mapping of strings to strings, with no key under the
//! `io.modelcontextprotocol/` prefix MCP keeps for itself.

use serde_json::{Map, Value};

/// The most a frontmatter block may take.
const MAX_BLOCK: usize = 64 * 1024;

/// A `SKILL.md` whose frontmatter cannot be served: its line (1 is the
/// file's first) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SKILL.md line {line}: {reason}")]
pub struct FrontmatterError {
    pub line: usize,
    pub reason: String,
}

fn fault(line: usize, reason: impl Into<String>) -> FrontmatterError {
    FrontmatterError {
        line,
        reason: reason.into(),
    }
}

/// The frontmatter of `text`, read and checked for a skill that lives in a
/// folder named `folder_name`.
pub(crate) fn read(text: &str, folder_name: &str) -> Result<Map<String, Value>, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let opening = lines.next().unwrap_or_default();
    if opening.trim_end() != "---" {
        return Err(fault(
            1,
            "a SKILL.md opens with YAML frontmatter: a line `---`, `name:` and `description:`, \
             then `---`",
        ));
    }
    let mut block = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push_str(line);
        if block.len() > MAX_BLOCK {
            return Err(fault(
                1,
                format!("the frontmatter is over {MAX_BLOCK} bytes"),
            ));
        }
    }
    if !closed {
        return Err(fault(
            1,
            "the frontmatter opened on line 1 is never closed by a line `---`",
        ));
    }
    // Line n of the block is line n + 1 of the file.
    // Bounded as the block is: no aliases (which would expand it), a few
    // thousand nodes, one document, shallow.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_aliases = 0;
    budget.max_anchors = 0;
    budget.max_documents = 1;
    budget.max_nodes = 4_096;
    budget.max_depth = 16;
    budget.max_events = 16_384;
    budget.max_total_scalar_bytes = MAX_BLOCK;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let value: Value = serde_saphyr::from_str_with_options(&block, options).map_err(|error| {
        let line = error.location().map_or(1, |at| at.line() as usize + 1);
        let reason = error.to_string();
        let reason = reason.lines().next().unwrap_or("not YAML").trim();
        // The parser's own place is the block's, not the file's: left out.
        let reason = reason.strip_prefix("error: ").unwrap_or(reason);
        let reason = match reason.strip_prefix("line ") {
            Some(rest) => rest.split_once(": ").map_or(rest, |(_, why)| why),
            None => reason,
        };
        fault(line, format!("the frontmatter is not valid YAML: {reason}"))
    })?;
    // What is served of it is bounded as the block is.
    if serde_json::to_vec(&value).map_or(usize::MAX, |json| json.len()) > MAX_BLOCK {
        return Err(fault(
            1,
            format!("the frontmatter is over {MAX_BLOCK} bytes as JSON"),
        ));
    }
    let Value::Object(fields) = value else {
        return Err(fault(
            2,
            "the frontmatter is not a mapping of fields (`name: …`, `description: …`)",
        ));
    };
    let line_of = |key: &str| {
        block
            .lines()
            .position(|line| {
                line.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
            .map_or(2, |at| at + 2)
    };
    let string = |key: &str| -> Result<Option<&str>, FrontmatterError> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(fault(line_of(key), format!("`{key}` is not a string"))),
        }
    };
    let name = string("name")?.ok_or_else(|| fault(2, "the frontmatter has no `name`"))?;
    if !is_skill_name(name) {
        return Err(fault(
            line_of("name"),
            format!(
                "`name: {name}` is not a skill name: 1 to 64 lowercase letters, digits and \
                 hyphens, no hyphen first, last or twice in a row"
            ),
        ));
    }
    if name != folder_name {
        return Err(fault(
            line_of("name"),
            format!("`name: {name}` is not the skill's folder name {folder_name:?}"),
        ));
    }
    let description =
        string("description")?.ok_or_else(|| fault(2, "the frontmatter has no `description`"))?;
    let length = description.chars().count();
    if description.trim().is_empty() || length > 1024 {
        return Err(fault(
            line_of("description"),
            format!(
                "`description` is {length} characters: it says what the skill does and when to use it, in 1 to 1024"
            ),
        ));
    }
    string("license")?;
    string("allowed-tools")?;
    if string("compatibility")?.is_some_and(|text| text.chars().count() > 500) {
        return Err(fault(
            line_of("compatibility"),
            "`compatibility` is over 500 characters",
        ));
    }
    match fields.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(metadata)) => {
            for (key, value) in metadata {
                if !value.is_string() {
                    return Err(fault(
                        line_of("metadata"),
                        format!("`metadata.{key}` is not a string"),
                    ));
                }
                if key.starts_with("io.modelcontextprotocol/") {
                    return Err(fault(
                        line_of("metadata"),
                        format!(
                            "`metadata.{key}`: keys under io.modelcontextprotocol/ are MCP's own"
                        ),
                    ));
                }
            }
        }
        Some(_) => {
            return Err(fault(
                line_of("metadata"),
                "`metadata` is not a mapping of strings",
            ));
        }
    }
    Ok(fields)
}

/// Whether `name` follows the Agent Skills naming rules: 1–64 lowercase
/// ASCII letters, digits and hyphens, no hyphen first, last or doubled.
pub(crate) fn is_skill_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frontmatter_is_read_whole() {
        let fields = read(
            "---\nname: csv-report\ndescription: Turn a CSV into a report\nlicense: MIT\nmetadata:\n  author: ada\n---\n# Body\n",
            "csv-report",
        )
        .unwrap();
        assert_eq!(fields["name"], "csv-report");
        assert_eq!(fields["metadata"]["author"], "ada");
        assert_eq!(fields["license"], "MIT");
    }

    #[test]
    fn each_fault_names_its_line() {
        let cases = [
            ("# no frontmatter\n", 1, "opens with YAML"),
            ("---\nname: a\n", 1, "never closed"),
            (
                "---\nname: x\ndescription: [unclosed\n---\n",
                3,
                "not valid YAML",
            ),
            ("---\ndescription: d\n---\n", 2, "no `name`"),
            (
                "---\ndescription: d\nname: Bad_Name\n---\n",
                3,
                "not a skill name",
            ),
            ("---\nname: other\ndescription: d\n---\n", 2, "folder name"),
            ("---\nname: x\n---\n", 2, "no `description`"),
            ("---\nname: x\ndescription: \"  \"\n---\n", 3, "1 to 1024"),
            (
                "---\nname: x\ndescription: d\nlicense: [1]\n---\n",
                4,
                "not a string",
            ),
            (
                "---\nname: x\ndescription: d\nmetadata:\n  io.modelcontextprotocol/x: v\n---\n",
                4,
                "MCP's own",
            ),
            ("---\n- a list\n---\n", 2, "not a mapping"),
            (
                "---\nname: x\ndescription: d\na: &a [1, 2]\nb: [*a, *a]\n---\n",
                4,
                "not valid YAML",
            ),
        ];
        for (text, line, says) in cases {
            let error = read(text, "x").unwrap_err();
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(error.reason.contains(says), "{text:?}: {error}");
        }
    }

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for good in ["a", "pdf-processing", "v2", &"a".repeat(64)] {
            assert!(is_skill_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!is_skill_name(bad), "{bad}");
        }
    }
}
