//! Schema constructs that a major LLM tool-calling API refuses or cannot
//! read. A tool's input schema is handed to the model's API as the tool's
//! parameters; OpenAI (function calling, strict mode) and Gemini (function
//! declarations) accept only a subset of JSON Schema, and a schema outside
//! it makes the whole request fail on the agent's side, far from the
//! plugin. These are warnings, never rejections: the schema is valid JSON
//! Schema and the host serves it. `toolhost check`, `/plugins` and the load
//! log show them, for plugins in any language.
//!
//! Only input schemas are checked: output schemas are read by MCP clients,
//! not sent to a model's API. Tool names are checked too: the host accepts
//! dots (`^[A-Za-z0-9_.-]{1,64}$`, MCP's own rule), but OpenAI's, Anthropic's
//! and Gemini's function-calling APIs take `^[a-zA-Z0-9_-]{1,64}$` only.

use std::fmt;

use serde_json::{Map, Value};

use crate::registry::tools::Tool;

/// One construct at one place in one tool's input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaWarning {
    pub(crate) tool: String,
    /// JSON Pointer into the input schema ("" is the root); `None` for a
    /// warning about the tool's name.
    pub(crate) path: Option<String>,
    pub(crate) construct: String,
    pub(crate) why: &'static str,
}

impl fmt::Display for SchemaWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(path) = &self.path else {
            return write!(f, "tool {:?}: {}: {}", self.tool, self.construct, self.why);
        };
        let at = if path.is_empty() { "/" } else { path };
        write!(
            f,
            "tool {:?}: input schema at {at}: {}: {}",
            self.tool, self.construct, self.why
        )
    }
}

/// The formats JSON Schema 2020-12 defines (Gemini refuses others, such as
/// the `uint32` some generators add), and the number formats Gemini
/// documents. The Rust SDK keeps the standard ones (sdk/rust/src/schema.rs,
/// a guest crate that shares no code with the host).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    // Not in the standard, but what Gemini documents for numbers.
    "int32",
    "int64",
    "float",
    "double",
    "enum",
];

/// Keywords outside the subset OpenAI's strict mode and Gemini accept.
const UNSUPPORTED: &[&str] = &[
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "$dynamicRef",
];

/// Every warning for a plugin's tools, in tool order.
/// Whether the function-calling APIs of the major model providers take
/// this tool name as it is.
pub(crate) fn is_portable_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

pub(crate) fn check(tools: &[std::sync::Arc<Tool>]) -> Vec<SchemaWarning> {
    let mut warnings = Vec::new();
    for tool in tools {
        if !is_portable_name(&tool.name) {
            warnings.push(SchemaWarning {
                tool: tool.name.clone(),
                path: None,
                construct: "its name".into(),
                why: "OpenAI, Anthropic and Gemini accept tool names matching \
                      ^[a-zA-Z0-9_-]{1,64}$ only (no dots); rename it",
            });
        }
        let mut found = Vec::new();
        if let Value::Object(root) = &tool.input_schema {
            for keyword in ["anyOf", "oneOf", "allOf", "not", "enum"] {
                if root.contains_key(keyword) {
                    found.push((
                        format!("/{keyword}"),
                        format!("`{keyword}` at the top level"),
                        "OpenAI requires the parameters to be a plain object schema",
                    ));
                }
            }
        }
        walk(&tool.input_schema, String::new(), &mut found);
        warnings.extend(
            found
                .into_iter()
                .map(|(path, construct, why)| SchemaWarning {
                    tool: tool.name.clone(),
                    path: Some(path),
                    construct,
                    why,
                }),
        );
    }
    warnings
}

type Found = Vec<(String, String, &'static str)>;

fn walk(schema: &Value, path: String, found: &mut Found) {
    let Value::Object(schema) = schema else {
        return;
    };
    keywords(schema, &path, found);
    for (keyword, value) in schema {
        let here = format!("{path}/{}", escape(keyword));
        match keyword.as_str() {
            // Maps of name -> subschema.
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(children) = value {
                    for (name, child) in children {
                        walk(child, format!("{here}/{}", escape(name)), found);
                    }
                }
            }
            // Lists of subschemas.
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(children) = value {
                    for (index, child) in children.iter().enumerate() {
                        walk(child, format!("{here}/{index}"), found);
                    }
                }
            }
            // One subschema (or, for draft-07 `items`, a list).
            "items"
            | "additionalProperties"
            | "additionalItems"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems" => match value {
                Value::Array(children) => {
                    for (index, child) in children.iter().enumerate() {
                        walk(child, format!("{here}/{index}"), found);
                    }
                }
                child => walk(child, here, found),
            },
            _ => {}
        }
    }
}

/// The constructs of one schema object (not its subschemas).
fn keywords(schema: &Map<String, Value>, path: &str, found: &mut Found) {
    let mut add = |keyword: &str, construct: String, why: &'static str| {
        found.push((format!("{path}/{}", escape(keyword)), construct, why));
    };
    if schema.contains_key("$ref") {
        add(
            "$ref",
            "`$ref`".into(),
            "Gemini does not resolve references; inline the subschema",
        );
    }
    if schema.contains_key("prefixItems") || matches!(schema.get("items"), Some(Value::Array(_))) {
        add(
            "prefixItems",
            "a tuple (`prefixItems`)".into(),
            "OpenAI and Gemini refuse tuple schemas; use an object or `items`",
        );
    }
    if !path.is_empty() && schema.contains_key("oneOf") {
        add(
            "oneOf",
            "`oneOf`".into(),
            "Gemini does not support `oneOf`; use `anyOf` or `enum`",
        );
    }
    for keyword in UNSUPPORTED {
        if schema.contains_key(*keyword) {
            add(
                keyword,
                format!("`{keyword}`"),
                "outside the JSON Schema subset OpenAI (strict mode) and Gemini accept",
            );
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && !STANDARD_FORMATS.contains(&format)
    {
        add(
            "format",
            format!("format {format:?}"),
            "Gemini refuses formats JSON Schema does not define; drop it",
        );
    }
    if let Some(Value::Array(types)) = schema.get("type")
        && types.iter().filter(|kind| *kind != "null").count() > 1
    {
        add(
            "type",
            "more than one type".into(),
            "Gemini accepts one type per schema (and null); use `anyOf`",
        );
    }
}

/// A JSON Pointer token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tools::build_tools;
    use crate::registry::tools::tests::spec;
    use serde_json::json;

    fn warnings_for(schema: Value) -> Vec<String> {
        let tools = build_tools(
            vec![spec("t", &schema.to_string())],
            &crate::registry::tools::ToolListLimits::DEFAULT,
        )
        .unwrap();
        let tools: Vec<_> = tools.into_iter().map(std::sync::Arc::new).collect();
        check(&tools)
            .iter()
            .filter_map(|w| w.path.clone())
            .collect()
    }

    #[test]
    fn names_outside_the_providers_pattern_are_warned_about() {
        let tools: Vec<_> = build_tools(
            vec![
                spec("frank.greet", r#"{"type":"object"}"#),
                spec("word-count_2", r#"{"type":"object"}"#),
            ],
            &crate::registry::tools::ToolListLimits::DEFAULT,
        )
        .unwrap()
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
        let warnings = check(&tools);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let text = warnings[0].to_string();
        assert!(
            text.starts_with(r#"tool "frank.greet": its name:"#),
            "{text}"
        );
        assert!(text.contains("^[a-zA-Z0-9_-]{1,64}$"), "{text}");
    }

    #[test]
    fn a_plain_schema_has_no_warnings() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": { "type": "integer", "minimum": 0, "format": "int64" },
                "when": { "type": "string", "format": "date-time" },
                "tags": { "type": "array", "items": { "type": "string", "enum": ["x"] } },
                "either": { "anyOf": [{ "type": "string" }, { "type": "number" }] },
                "maybe": { "type": ["string", "null"] }
            },
            "required": ["a"],
            "additionalProperties": false
        });
        assert_eq!(warnings_for(schema), Vec::<String>::new());
    }

    #[test]
    fn each_construct_is_found_with_its_path() {
        let schema = json!({
            "type": "object",
            "oneOf": [{ "required": ["a"] }, { "required": ["b"] }],
            "$defs": { "p": { "type": "object" } },
            "properties": {
                "a": { "$ref": "#/$defs/p" },
                "b": { "type": "array", "prefixItems": [{ "type": "string" }] },
                "c": { "type": "integer", "format": "uint32" },
                "d": { "type": ["string", "number"] },
                "e": { "type": "object", "properties": { "f": { "oneOf": [{ "type": "string" }] } } },
                "format": { "type": "object", "patternProperties": { "^x": { "type": "string" } } }
            }
        });
        assert_eq!(
            warnings_for(schema),
            [
                "/oneOf",
                "/properties/a/$ref",
                "/properties/b/prefixItems",
                "/properties/c/format",
                "/properties/d/type",
                "/properties/e/properties/f/oneOf",
                "/properties/format/patternProperties",
            ]
        );
    }
}
