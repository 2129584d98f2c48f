//! A tool's arguments from a query string, for `GET /tools/{name}` on a
//! read-only tool (seed 002's `GET /status`). Each key's text is coerced
//! by the type the tool's input schema gives that property:
//!
//! - `integer`, `number`: the decimal number (`?a=2&b=40.5`);
//! - `boolean`: `true` or `false`;
//! - `array`: every value of a repeated key, in order, each coerced by
//!   `items` (`?numbers=1&numbers=2`);
//! - `object` (or an array given once as JSON): the value as JSON text;
//! - `null`: `null` or nothing;
//! - `string`, no type, or a key the schema does not name: the text as it
//!   is (the input schema's own check then says what it thinks of it).
//!
//! And the one value of a key that the routes with a flag in their query
//! read ([`query_value`]: `?hash=`, `?limit=`, `?build=`).
//!
//! A union (`["integer", "null"]`) takes the first type the text fits.
//! Text no type fits is refused with its JSON Pointer path, the text and
//! what was expected; the caller turns that into INVALID_ARGUMENTS.

use serde_json::{Map, Value};

/// Why a query value could not become an argument.
#[derive(Debug, PartialEq)]
pub(crate) struct Uncoercible {
    /// JSON Pointer to the argument (`/a`, `/numbers/1`).
    pub(crate) path: String,
    pub(crate) value: String,
    pub(crate) expected: String,
}

/// The arguments object the query's `pairs` stand for under `schema`.
pub(crate) fn arguments(
    pairs: Vec<(String, String)>,
    schema: &Value,
) -> Result<Map<String, Value>, Uncoercible> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for (key, value) in pairs {
        match grouped.iter_mut().find(|(known, _)| *known == key) {
            Some((_, values)) => values.push(value),
            None => grouped.push((key, vec![value])),
        }
    }
    let mut arguments = Map::new();
    for (key, values) in grouped {
        let property = properties.and_then(|properties| properties.get(&key));
        let path = format!("/{}", pointer_token(&key));
        let value = property_value(&path, values, property)?;
        arguments.insert(key, value);
    }
    Ok(arguments)
}

/// The types a schema names: `"type": "x"` or `"type": ["x", "y"]`.
fn types(schema: Option<&Value>) -> Vec<&str> {
    match schema.and_then(|schema| schema.get("type")) {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn property_value(
    path: &str,
    values: Vec<String>,
    schema: Option<&Value>,
) -> Result<Value, Uncoercible> {
    let types = types(schema);
    let as_json_array = || {
        values.len() == 1
            && serde_json::from_str::<Value>(&values[0]).is_ok_and(|value| value.is_array())
    };
    if types.contains(&"array") && !as_json_array() {
        let items = schema.and_then(|schema| schema.get("items"));
        return values
            .into_iter()
            .enumerate()
            .map(|(index, text)| one_value(&format!("{path}/{index}"), text, items))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    let mut values = values.into_iter();
    let (Some(text), None) = (values.next(), values.next()) else {
        return Err(Uncoercible {
            path: path.to_string(),
            value: String::new(),
            expected: "one value (only an array argument repeats its key)".into(),
        });
    };
    one_value(path, text, schema)
}

fn one_value(path: &str, text: String, schema: Option<&Value>) -> Result<Value, Uncoercible> {
    let types = types(schema);
    if types.is_empty() {
        return Ok(Value::String(text));
    }
    for kind in &types {
        let fitted = match *kind {
            "string" => Some(Value::String(text.clone())),
            "integer" => text
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| text.parse::<u64>().map(Value::from))
                .ok(),
            "number" => number(&text),
            "boolean" => match text.as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (text.is_empty() || text == "null").then_some(Value::Null),
            "object" => serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_object),
            "array" => serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_array),
            _ => None,
        };
        if let Some(value) = fitted {
            return Ok(value);
        }
    }
    Err(Uncoercible {
        path: path.to_string(),
        value: text,
        expected: types.join(" or "),
    })
}

/// A finite decimal number, kept an integer when it is one.
fn number(text: &str) -> Option<Value> {
    if let Ok(integer) = text.parse::<i64>() {
        return Some(Value::from(integer));
    }
    let float = text.parse::<f64>().ok().filter(|float| float.is_finite())?;
    serde_json::Number::from_f64(float).map(Value::Number)
}

/// A key as one JSON Pointer token (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The value of `key` in a query string (`a=1&hash=…`), if present.
pub(crate) fn query_value<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "a": { "type": "number" },
                "n": { "type": "integer" },
                "loud": { "type": "boolean" },
                "numbers": { "type": "array", "items": { "type": "number" } },
                "tags": { "type": "array", "items": { "type": "string" } },
                "maybe": { "type": ["integer", "null"] },
                "where": { "type": "object" },
                "text": { "type": "string" },
                "anything": {}
            }
        })
    }

    #[test]
    fn values_take_the_types_the_schema_gives() {
        let query = pairs(&[
            ("a", "2.5"),
            ("n", "40"),
            ("loud", "true"),
            ("numbers", "1"),
            ("numbers", "2.5"),
            ("tags", "x"),
            ("maybe", "null"),
            ("where", r#"{"city":"Oslo"}"#),
            ("text", "42"),
            ("anything", "7"),
            ("unknown", "yes"),
        ]);
        assert_eq!(
            Value::Object(arguments(query, &schema()).unwrap()),
            json!({
                "a": 2.5, "n": 40, "loud": true, "numbers": [1, 2.5], "tags": ["x"],
                "maybe": null, "where": {"city": "Oslo"}, "text": "42", "anything": "7",
                "unknown": "yes"
            })
        );
        let as_json = arguments(pairs(&[("numbers", "[1,2]")]), &schema()).unwrap();
        assert_eq!(as_json["numbers"], json!([1, 2]));
    }

    #[test]
    fn what_no_type_fits_is_refused_with_its_path() {
        let refused = |list: &[(&str, &str)]| arguments(pairs(list), &schema()).unwrap_err();
        assert_eq!(
            refused(&[("a", "two")]),
            Uncoercible {
                path: "/a".into(),
                value: "two".into(),
                expected: "number".into()
            }
        );
        assert_eq!(
            refused(&[("numbers", "1"), ("numbers", "x")]).path,
            "/numbers/1"
        );
        assert_eq!(refused(&[("n", "2.5")]).expected, "integer");
        assert_eq!(refused(&[("loud", "yes")]).path, "/loud");
        assert_eq!(refused(&[("maybe", "x")]).expected, "integer or null");
        assert_eq!(refused(&[("a", "NaN")]).path, "/a");
        assert!(
            refused(&[("a", "1"), ("a", "2")])
                .expected
                .contains("one value")
        );
        let odd = json!({"properties": {"a/b~": {"type": "integer"}}});
        assert_eq!(
            arguments(pairs(&[("a/b~", "x")]), &odd).unwrap_err().path,
            "/a~1b~0"
        );
    }
}
