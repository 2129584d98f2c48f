//! The OpenAPI document's share of REST's longer calls
//! (`rest_rounds.rs`): the headers a tool's `POST` takes for input
//! (`Toolhost-Input`, `Toolhost-Request-State`) and tasks (`Prefer`), the
//! input-required and task answers, and `/tasks/{id}`.

use serde_json::{Map, Value, json};

use crate::registry::tools::{TaskSupport, Tool};

/// Adds to a tool's `POST` operation what it takes and answers beyond a
/// plain call. `input_key`: its input schema's component.
pub(super) fn extend_operation(operation: &mut Value, tool: &Tool, input_key: &str) {
    let mut parameters = vec![
        json!({
            "name": "Toolhost-Input",
            "in": "header",
            "required": false,
            "description": "What the client can answer when the tool asks for input, from \
                            elicitation, sampling and roots, separated by commas. The tool's \
                            requests then come back as an input-required answer (200, \
                            resultType input_required) instead of failing the call.",
            "schema": { "type": "string", "example": "elicitation, sampling" }
        }),
        json!({
            "name": "Toolhost-Request-State",
            "in": "header",
            "required": false,
            "description": "The requestState of the input-required answer being answered. \
                            With it, the body is {\"arguments\": ..., \"inputResponses\": ...} \
                            (AnsweredCall), and the call runs again with the answers; \
                            Toolhost-Input need not be sent again.",
            "schema": { "type": "string" }
        }),
    ];
    if let Some(support) = tool.task_support {
        parameters.push(json!({
            "name": "Prefer",
            "in": "header",
            "required": support == TaskSupport::Required,
            "description": "respond-async: run the call as a task, answered 202 with its \
                            Location. Required when the tool runs only as a task.",
            "schema": { "type": "string", "enum": ["respond-async"] }
        }));
        operation["responses"]["202"] = json!({
            "description": "A task was made (stored before this answer); read it at Location.",
            "headers": {
                "Location": { "schema": { "type": "string" }, "description": "/tasks/{id}" },
                "Preference-Applied": { "schema": { "type": "string" } }
            },
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Task" } } }
        });
    }
    operation["parameters"] = Value::Array(parameters);
    operation["requestBody"]["content"]["application/json"]["schema"] = json!({
        "anyOf": [
            { "$ref": format!("#/components/schemas/{input_key}") },
            { "$ref": "#/components/schemas/AnsweredCall" }
        ]
    });
    let ran = operation["responses"]["200"]["content"]["application/json"]["schema"].take();
    operation["responses"]["200"]["content"]["application/json"]["schema"] = json!({
        "anyOf": [ran, { "$ref": "#/components/schemas/InputRequired" }]
    });
}

/// `/tasks/{id}`, when a tool the caller sees runs as a task.
pub(super) fn task_paths(paths: &mut Map<String, Value>) {
    let id = json!([{
        "name": "id", "in": "path", "required": true,
        "schema": { "type": "string", "pattern": "^[0-9a-f]{32}$" }
    }]);
    let task = |description: &str| {
        json!({
            "200": {
                "description": description,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Task" } } }
            },
            "404": {
                "description": "No such task for this caller (or it expired).",
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorEnvelope" } } }
            }
        })
    };
    paths.insert(
        "/tasks/{id}".into(),
        json!({
            "get": {
                "operationId": "getTask", "tags": ["tasks"], "summary": "A task, with its result, error or what it waits for",
                "parameters": id, "responses": task("The task")
            },
            "post": {
                "operationId": "answerTask", "tags": ["tasks"],
                "summary": "Answers what the task waits for; once nothing is missing it runs again",
                "parameters": id,
                "requestBody": { "required": true, "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/TaskAnswers" } } } },
                "responses": task("The task, answered")
            },
            "delete": {
                "operationId": "cancelTask", "tags": ["tasks"],
                "summary": "Cancels the task (one already ended stays as it ended)",
                "parameters": id, "responses": task("The task, cancelled")
            }
        }),
    );
}

/// The shared schemas of input and tasks.
pub(super) fn schemas() -> Map<String, Value> {
    let requests = json!({
        "type": "object",
        "description": "What the tool asks, by key: MCP requests (method and params).",
        "additionalProperties": {
            "type": "object", "required": ["method"],
            "properties": {
                "method": { "enum": ["elicitation/create", "sampling/createMessage", "roots/list"] },
                "params": { "type": "object" }
            }
        }
    });
    [
        (
            "InputRequired",
            json!({
                "type": "object",
                "required": ["resultType", "inputRequests", "requestState"],
                "properties": {
                    "resultType": { "const": "input_required" },
                    "inputRequests": requests,
                    "requestState": { "type": "string",
                                      "description": "Send it back in Toolhost-Request-State; signed, it expires in 15 minutes." }
                }
            }),
        ),
        (
            "AnsweredCall",
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "arguments": { "type": "object" },
                    "inputResponses": { "type": "object",
                                        "description": "The client's result for each key it answers." }
                }
            }),
        ),
        (
            "TaskAnswers",
            json!({
                "type": "object",
                "required": ["inputResponses"],
                "additionalProperties": false,
                "properties": { "inputResponses": { "type": "object" } }
            }),
        ),
        (
            "Task",
            json!({
                "type": "object",
                "required": ["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"],
                "properties": {
                    "taskId": { "type": "string" },
                    "status": { "enum": ["working", "input_required", "completed", "failed", "cancelled"] },
                    "statusMessage": { "type": "string" },
                    "createdAt": { "type": "string", "format": "date-time" },
                    "lastUpdatedAt": { "type": "string", "format": "date-time" },
                    "ttlMs": { "type": "integer", "minimum": 0 },
                    "pollIntervalMs": { "type": "integer", "minimum": 1 },
                    "resultType": { "const": "task" },
                    "inputRequests": requests,
                    "result": { "type": "object", "description": "The tool's result (completed): the MCP tool result." },
                    "error": { "type": "object", "description": "Why it failed (failed): code and message." }
                }
            }),
        ),
    ]
    .into_iter()
    .map(|(name, schema)| (name.to_string(), schema))
    .collect()
}
