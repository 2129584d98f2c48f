//! Deriving a tool's schemas from its Rust types, shaped for the LLM APIs
//! that will read them.
//!
//! `schemars` derives a draft 2020-12 schema; the settings and a last pass
//! here keep it inside what OpenAI, Anthropic and Gemini accept for tool
//! parameters:
//! - every subschema is inlined (no `$ref`/`$defs`, which Gemini does not
//!   resolve); a recursive type still needs `$ref` and `toolhost check`
//!   says so;
//! - an `Option` field is optional (left out of `required`), not "required
//!   and nullable": its `null` type is dropped;
//! - `format` values outside the JSON Schema standard (`uint32`, `double`,
//!   ... that schemars adds for Rust number types) are dropped: Gemini
//!   refuses unknown formats; `minimum` still says "not negative";
//! - a `oneOf` whose branches are all constants (an enum whose variants
//!   have doc comments) becomes `enum`, and any other `oneOf` becomes
//!   `anyOf` (serde's variants never overlap, and Gemini has no `oneOf`);
//! - no `$schema` keyword (the host reads a schema without one as 2020-12).

pub use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The formats JSON Schema 2020-12 defines; any other is dropped.
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
];

/// The schema of what a tool accepts: how `T` deserialises.
pub fn input_schema<T: JsonSchema>() -> Value {
    derive::<T>(SchemaSettings::draft2020_12().for_deserialize())
}

/// The schema of what a tool returns: how `T` serialises.
pub fn output_schema<T: JsonSchema>() -> Value {
    derive::<T>(SchemaSettings::draft2020_12().for_serialize())
}

/// The input schema exactly as schemars derives it for draft 2020-12 (with
/// `$schema`, `$defs` and `$ref`), for `Tool::standard_schema` (`tool.rs`).
pub fn standard_input_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(object) = &mut schema {
        object.remove("title");
    }
    schema
}

fn derive<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let generator = settings
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(object) = &mut schema {
        // The type's Rust name says nothing to a model.
        object.remove("title");
    }
    tidy(&mut schema);
    schema
}

/// Keywords whose values are data, not subschemas: never rewritten.
const DATA_KEYWORDS: &[&str] = &["default", "examples", "const", "enum"];

/// The last pass over every subschema (see the module comment).
fn tidy(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|format| !STANDARD_FORMATS.contains(&format))
            {
                object.remove("format");
            }
            constants_become_enum(object);
            optional_is_not_nullable(object);
            for (keyword, value) in object.iter_mut() {
                if !DATA_KEYWORDS.contains(&keyword.as_str()) {
                    tidy(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// `"oneOf": [{"const": "a", ...}, {"const": "b", ...}]` becomes
/// `"enum": ["a", "b"]` (with the branches' shared `type`); any other
/// `oneOf` becomes `anyOf`.
fn constants_become_enum(object: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = object.remove("oneOf") else {
        return;
    };
    let constants: Option<Vec<Value>> = branches
        .iter()
        .map(|branch| branch.get("const").cloned())
        .collect();
    match constants {
        Some(values) if !values.is_empty() => {
            let types: Vec<&Value> = branches.iter().filter_map(|b| b.get("type")).collect();
            if types.len() == branches.len() && types.windows(2).all(|pair| pair[0] == pair[1]) {
                object.entry("type").or_insert_with(|| types[0].clone());
            }
            object.insert("enum".into(), Value::Array(values));
        }
        _ => {
            object.insert("anyOf".into(), Value::Array(branches));
        }
    }
}

/// For each property not in `required`: `"type": ["T", "null"]` becomes
/// `"type": "T"`, and `"anyOf": [S, {"type": "null"}]` becomes `S`.
fn optional_is_not_nullable(object: &mut Map<String, Value>) {
    let required: Vec<String> = match object.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|name| name.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.contains(name) {
            continue;
        }
        let Value::Object(property) = property else {
            continue;
        };
        if let Some(Value::Array(types)) = property.get_mut("type") {
            types.retain(|kind| kind != "null");
            if types.len() == 1 {
                let only = types.remove(0);
                property.insert("type".into(), only);
            }
        }
        // `None` is "left out", so neither a null constant nor a null
        // default describes it.
        if let Some(Value::Array(values)) = property.get_mut("enum") {
            values.retain(|value| !value.is_null());
        }
        if property.get("default") == Some(&Value::Null) {
            property.remove("default");
        }
        let is_null = |schema: &Value| schema.get("type").is_some_and(|kind| kind == "null");
        if let Some(Value::Array(branches)) = property.get("anyOf")
            && branches.len() == 2
            && let Some(other) = branches.iter().find(|branch| !is_null(branch))
            && branches.iter().any(is_null)
            && let Value::Object(other) = other.clone()
        {
            property.remove("anyOf");
            for (key, value) in other {
                property.entry(key).or_insert(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Place {
        /// The city
        city: String,
        country: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    enum Unit {
        /// Degrees Celsius
        Celsius,
        /// Degrees Fahrenheit
        Fahrenheit,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    enum Plain {
        A,
        B,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Args {
        /// How many
        count: u32,
        place: Option<Place>,
        tags: Vec<String>,
        unit: Option<Unit>,
        #[serde(default)]
        plain: Option<Plain>,
    }

    #[test]
    fn derived_input_schema_has_no_refs_formats_or_nullable_optionals() {
        let schema = input_schema::<Args>();
        let text = schema.to_string();
        for banned in [
            "$ref", "$defs", "$schema", "format", "null", "anyOf", "title",
        ] {
            assert!(!text.contains(banned), "{banned} in {schema:#}");
        }
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["count", "tags"]));
        assert_eq!(schema["properties"]["count"]["minimum"], 0);
        assert_eq!(schema["properties"]["count"]["description"], "How many");
        assert_eq!(
            schema["properties"]["unit"]["enum"],
            json!(["Celsius", "Fahrenheit"])
        );
        assert_eq!(schema["properties"]["unit"]["type"], "string");
        assert_eq!(schema["properties"]["plain"]["enum"], json!(["A", "B"]));
        assert!(schema["properties"]["plain"].get("default").is_none());
        let place = &schema["properties"]["place"];
        assert_eq!(place["type"], "object");
        assert_eq!(place["properties"]["country"]["type"], "string");
        assert_eq!(place["properties"]["city"]["description"], "The city");
    }
}
