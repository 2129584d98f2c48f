//! `GET /openapi.json`: an OpenAPI 3.1 document generated from the live
//! registry, so REST clients and code generators see the same tools, with
//! the same schemas, as MCP clients.
//!
//! Each tool's schemas go into `components.schemas` and are referenced
//! from the operation; `$ref`s inside a plugin's schema (`#/$defs/...`)
//! are rewritten to point into its place there, so they resolve for
//! readers that honour `$id` and for those that do not.

use serde_json::{Map, Value, json};

use crate::call::errors::ErrorCode;
use crate::registry::Snapshot;
use crate::registry::view::View;

/// The document as a caller with `view` sees it: only their tools, and
/// the resource and prompt routes only when they see a plugin with some.
pub(crate) fn document(snapshot: &Snapshot, view: &View) -> Value {
    let mut paths = Map::new();
    let mut schemas = shared_schemas();
    schemas.extend(super::openapi_rounds::schemas());
    let mut any_task = false;
    for entry in snapshot.tools().filter(|entry| view.sees(&entry.plugin.id)) {
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
        any_task |= tool.task_support.is_some();
        let plain = operation.clone();
        super::openapi_rounds::extend_operation(&mut operation, tool, &input_key);
        let mut item = json!({ "post": operation });
        if tool.is_read_only() {
            item["get"] = read_only_operation(&plain, &tool.name, &tool.input_schema, &input_key);
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
    catalog_paths(snapshot, view, &mut paths);
    if any_task {
        super::openapi_rounds::task_paths(&mut paths);
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

/// Resources and prompts (contract 0.2.0), when some plugin has them:
/// `GET /resources`, `GET /resources/{uri}`, `GET /prompts`, and one
/// `POST /prompts/{name}` per prompt with its arguments as the body's
/// string properties.
fn catalog_paths(snapshot: &Snapshot, view: &View, paths: &mut Map<String, Value>) {
    let catalogs = || {
        snapshot
            .serving()
            .filter(|plugin| view.sees(&plugin.id))
            .map(|plugin| &plugin.catalog)
    };
    let answer = |description: &str, schema: Value| {
        let mut responses = error_responses();
        responses["200"] = json!({
            "description": description,
            "content": { "application/json": { "schema": schema } }
        });
        responses
    };
    if catalogs().any(|catalog| catalog.serves_resources()) {
        paths.insert(
            "/resources".into(),
            json!({ "get": {
                "operationId": "listResources",
                "summary": "The resources and resource templates",
                "tags": ["resources"],
                "responses": answer("The lists", json!({ "type": "object", "properties": {
                    "resources": { "type": "array", "items": { "type": "object" } },
                    "resourceTemplates": { "type": "array", "items": { "type": "object" } }
                } }))
            } }),
        );
        paths.insert(
            "/resources/{uri}".into(),
            json!({ "get": {
                "operationId": "readResource",
                "summary": "Reads a resource by its URI (percent-encoded)",
                "tags": ["resources"],
                "parameters": [{
                    "name": "uri", "in": "path", "required": true,
                    "schema": { "type": "string" },
                    "description": "A URI from /resources, or one a template matches"
                }],
                "responses": answer("The contents", json!({ "type": "object", "properties": {
                    "contents": { "type": "array", "items": { "type": "object", "properties": {
                        "uri": { "type": "string" },
                        "mimeType": { "type": "string" },
                        "text": { "type": "string" },
                        "blob": { "type": "string", "contentEncoding": "base64" }
                    }, "required": ["uri"] } }
                }, "required": ["contents"] }))
            } }),
        );
    }
    let prompts: Vec<_> = catalogs().flat_map(|catalog| &catalog.prompts).collect();
    if prompts.is_empty() {
        return;
    }
    paths.insert(
        "/prompts".into(),
        json!({ "get": {
            "operationId": "listPrompts",
            "summary": "The prompts",
            "tags": ["prompts"],
            "responses": answer("The prompts", json!({ "type": "object", "properties": {
                "prompts": { "type": "array", "items": { "type": "object" } }
            } }))
        } }),
    );
    for prompt in prompts {
        let mut properties = Map::new();
        for argument in prompt.listing["arguments"].as_array().into_iter().flatten() {
            let mut property = json!({ "type": "string" });
            if let Some(description) = argument.get("description") {
                property["description"] = description.clone();
            }
            if let Some(name) = argument["name"].as_str() {
                properties.insert(name.into(), property);
            }
        }
        let required: Vec<&str> = prompt
            .arguments
            .iter()
            .filter(|(_, required)| *required)
            .map(|(name, _)| name.as_str())
            .collect();
        let description = prompt
            .listing
            .get("description")
            .cloned()
            .unwrap_or(json!(""));
        paths.insert(
            format!("/prompts/{}", prompt.name),
            json!({ "post": {
                "operationId": format!("prompt.{}", prompt.name),
                "summary": prompt.listing.get("title").cloned().unwrap_or(json!(prompt.name)),
                "description": description,
                "tags": ["prompts"],
                "requestBody": { "required": false, "content": { "application/json": { "schema": {
                    "type": "object", "properties": properties, "required": required,
                    "additionalProperties": false
                } } } },
                "responses": answer("The prompt's messages", json!({ "type": "object", "properties": {
                    "description": { "type": "string" },
                    "messages": { "type": "array", "items": { "type": "object", "properties": {
                        "role": { "enum": ["user", "assistant"] },
                        "content": { "type": "object" }
                    }, "required": ["role", "content"] } }
                }, "required": ["messages"] }))
            } }),
        );
    }
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

/// A copy of a plugin schema placed at `#/components/schemas/{key}`: its
/// local `$ref`s (`#/$defs/address`, `#`) are rewritten to point there,
/// so they resolve against this document for every reader, whether it
/// honours `$id` or not. A schema with its own `$id` is left as it is (its
/// refs resolve against that).
fn with_id(schema: &Value, key: &str) -> Value {
    let mut schema = schema.clone();
    if schema.get("$id").is_none() {
        rebase_refs(&mut schema, &schema_ref(key));
    }
    schema
}

fn rebase_refs(value: &mut Value, base: &str) {
    match value {
        Value::Object(object) => {
            for (name, value) in object.iter_mut() {
                match value {
                    Value::String(target) if name == "$ref" => {
                        if let Some(pointer) = target.strip_prefix('#')
                            && (pointer.is_empty() || pointer.starts_with('/'))
                        {
                            *target = format!("{base}{pointer}");
                        }
                    }
                    other => rebase_refs(other, base),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase_refs(item, base)),
        _ => {}
    }
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
                      "description": "Whether the instance was made ahead of the call: a large plugin's spare (no call has used it) or one a policy's reuse_instance kept. false: instantiated for this call." }
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
