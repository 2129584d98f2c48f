//! `GET /openapi.json`: an OpenAPI 3.1 document generated from the live
//! registry, so REST clients and code generators see the same tools, with
//! the same schemas, as MCP clients.
//!
//! Each tool's schemas go into `components.schemas` under their own `$id`
//! and are referenced from the operation. That keeps `$ref`s inside a
//! plugin's schema (`#/$defs/...`) resolving against the plugin's schema
//! rather than against this document's root.

use serde_json::{Map, Value, json};

use crate::call::errors::ErrorCode;
use crate::registry::Snapshot;

pub(crate) fn document(snapshot: &Snapshot) -> Value {
    let mut paths = Map::new();
    let mut schemas = shared_schemas();
    for entry in snapshot.tools() {
        let tool = &entry.tool;
        let input_key = format!("{}.input", tool.name);
        schemas.insert(input_key.clone(), with_id(&tool.input_schema, &input_key));
        let mut result_schema = json!({ "$ref": "#/components/schemas/Envelope" });
        if let Some(output_schema) = &tool.output_schema {
            let output_key = format!("{}.output", tool.name);
            schemas.insert(output_key.clone(), with_id(output_schema, &output_key));
            result_schema = json!({
                "allOf": [
                    { "$ref": "#/components/schemas/Envelope" },
                    { "properties": { "structuredContent": { "$ref": schema_ref(&output_key) } } }
                ]
            });
        }
        let mut operation = json!({
            "operationId": tool.name,
            "summary": tool.title.clone().unwrap_or_else(|| tool.name.clone()),
            "description": tool.description,
            "tags": ["tools"],
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": schema_ref(&input_key) } } }
            },
            "responses": error_responses(),
        });
        operation["responses"]["200"] = json!({
            "description": "The tool ran; the envelope carries its result.",
            "content": { "application/json": { "schema": result_schema } }
        });
        let mut item = json!({ "post": operation });
        if tool.is_read_only() {
            item["get"] =
                read_only_operation(&operation, &tool.name, &tool.input_schema, &input_key);
        }
        paths.insert(format!("/tools/{}", tool.name), item);
    }
    for (path, summary, schema) in [
        (
            "/tools",
            "The tools manifest",
            json!({ "type": "array", "items": { "type": "object" } }),
        ),
        (
            "/plugins",
            "Every plugin file and its state",
            json!({ "type": "object" }),
        ),
        (
            "/health",
            "Liveness and counts",
            json!({ "type": "object" }),
        ),
        (
            "/ready",
            "Readiness: 200 once every plugin has loaded or failed, 503 before",
            json!({ "type": "object" }),
        ),
        (
            "/openapi.json",
            "This document",
            json!({ "type": "object" }),
        ),
    ] {
        paths.insert(
            path.into(),
            json!({ "get": {
                "operationId": format!("get{}", path.replace(['/', '.'], "_")),
                "summary": summary,
                "tags": ["discovery"],
                "responses": { "200": {
                    "description": summary,
                    "content": { "application/json": { "schema": schema } }
                } }
            } }),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "toolhost",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "WebAssembly tool plugins served over REST. Each tool answers with \
                            the MCP tool result envelope: content, structuredContent, isError."
        },
        "paths": paths,
        "components": { "schemas": schemas },
    })
}

/// `GET /tools/{name}` for a read-only tool: the POST operation with each
/// input property as a query parameter (arrays as repeated keys), its
/// schema referenced inside the tool's input schema so its own `$ref`s
/// still resolve there.
fn read_only_operation(post: &Value, name: &str, input: &Value, input_key: &str) -> Value {
    let required: Vec<&str> = input["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parameters: Vec<Value> = input["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(property, schema)| {
                    let token = property.replace('~', "~0").replace('/', "~1");
                    let mut parameter = json!({
                        "name": property,
                        "in": "query",
                        "required": required.contains(&property.as_str()),
                        "schema": { "$ref": format!("{}/properties/{token}", schema_ref(input_key)) },
                    });
                    if schema["type"] == "array" {
                        parameter["style"] = json!("form");
                        parameter["explode"] = json!(true);
                    }
                    if let Some(description) = schema.get("description") {
                        parameter["description"] = description.clone();
                    }
                    parameter
                })
                .collect()
        })
        .unwrap_or_default();
    let mut get = post.clone();
    if let Some(operation) = get.as_object_mut() {
        operation.remove("requestBody");
        operation.insert("operationId".into(), json!(format!("{name}.get")));
        operation.insert("parameters".into(), Value::Array(parameters));
    }
    get
}

fn schema_ref(key: &str) -> String {
    format!("#/components/schemas/{key}")
}

/// A copy of a plugin schema that is its own schema resource, unless the
/// plugin already gave it an `$id`.
fn with_id(schema: &Value, key: &str) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object
            .entry("$id")
            .or_insert_with(|| json!(format!("urn:toolhost:schema:{key}")));
    }
    schema
}

/// Every error status a tool call can answer with, each described by the
/// codes that produce it.
fn error_responses() -> Value {
    let mut responses = Map::new();
    let mut statuses: Vec<u16> = ErrorCode::ALL
        .iter()
        .map(|code| code.http_status())
        .collect();
    statuses.push(crate::call::errors::TOOL_ERROR_HTTP_STATUS);
    statuses.sort();
    statuses.dedup();
    for status in statuses {
        let mut codes: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|code| code.http_status() == status)
            .map(|code| code.as_str())
            .collect();
        if status == crate::call::errors::TOOL_ERROR_HTTP_STATUS {
            codes.push("the plugin's own error codes");
        }
        responses.insert(
            status.to_string(),
            json!({
                "description": codes.join(", "),
                "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/ErrorEnvelope" }
                } }
            }),
        );
    }
    Value::Object(responses)
}

fn shared_schemas() -> Map<String, Value> {
    let content_block = json!({
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": { "enum": ["text", "image", "audio", "resource_link", "resource"] },
            "text": { "type": "string" },
            "data": { "type": "string", "contentEncoding": "base64" },
            "mimeType": { "type": "string" },
            "uri": { "type": "string" },
            "name": { "type": "string" },
            "resource": { "type": "object" }
        }
    });
    let envelope = json!({
        "type": "object",
        "required": ["content", "isError", "success", "timestamp"],
        "properties": {
            "content": { "type": "array", "minItems": 1,
                         "items": { "$ref": "#/components/schemas/ContentBlock" } },
            "structuredContent": { "type": "object" },
            "isError": { "type": "boolean" },
            "success": { "type": "boolean",
                         "description": "The opposite of isError (REST and CGI only)." },
            "timestamp": { "type": "string", "format": "date-time",
                           "description": "When the answer was made: RFC 3339, UTC, milliseconds (REST and CGI only)." },
            "meta": { "$ref": "#/components/schemas/CallMeta" }
        }
    });
    // `call/accounting.rs`: what the call cost (MCP carries the same object
    // in `_meta["toolhost/call"]`).
    let call_meta = json!({
        "type": "object",
        "description": "What the call cost. cpuMs, fuel, peakMemoryBytes and code are present when plugin code ran.",
        "required": ["durationMs", "warm"],
        "properties": {
            "durationMs": { "type": "number", "minimum": 0,
                            "description": "Wall time of the call in the host, in milliseconds." },
            "cpuMs": { "type": "number", "minimum": 0,
                       "description": "CPU time of the guest thread, in milliseconds." },
            "fuel": { "type": "integer", "minimum": 0,
                      "description": "Fuel (WebAssembly work units) the guest burned." },
            "peakMemoryBytes": { "type": "integer", "minimum": 0,
                                 "description": "Largest total of the instance's memories and tables." },
            "code": { "enum": ["baseline", "optimised"],
                      "description": "Which compiler's code ran." },
            "warm": { "type": "boolean",
                      "description": "Whether the instance came ready-made from a pool (false: a fresh instance per call)." }
        }
    });
    let error_envelope = json!({
        "allOf": [ { "$ref": "#/components/schemas/Envelope" } ],
        "required": ["error"],
        "properties": {
            "isError": { "const": true },
            "success": { "const": false },
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": { "type": "string" },
                    "message": { "type": "string" },
                    "details": {}
                }
            }
        }
    });
    [
        ("ContentBlock".to_string(), content_block),
        ("Envelope".to_string(), envelope),
        ("ErrorEnvelope".to_string(), error_envelope),
        ("CallMeta".to_string(), call_meta),
    ]
    .into_iter()
    .collect()
}
