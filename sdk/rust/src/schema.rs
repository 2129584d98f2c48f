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
/// `$schema`, `$defs` and `$ref`), for [`Tool::standard_schema`].
///
/// [`Tool::standard_schema`]: crate::Tool::standard_schema
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
            optional_is_not_nullable(object);
            object.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
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
    struct Args {
        /// How many
        count: u32,
        place: Option<Place>,
        tags: Vec<String>,
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
        let place = &schema["properties"]["place"];
        assert_eq!(place["type"], "object");
        assert_eq!(place["properties"]["country"]["type"], "string");
        assert_eq!(place["properties"]["city"]["description"], "The city");
    }
}
