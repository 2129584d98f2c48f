//! `conformance`: the fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios): its tools,
//! resources, resource template, prompts and completion, served by toolhost
//! like any other plugin. It doubles as the example of every content kind,
//! of the `client` import (logging, progress, sampling and elicitation from
//! inside a tool) and of contract 0.2.0's resources and prompts.

use std::time::Duration;

use toolhost_plugin::client::Request;
use toolhost_plugin::prelude::*;

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file: 8 kHz, 8-bit mono, four samples of silence.
fn silent_wav() -> Vec<u8> {
    let samples = [0x80u8; 4];
    let mut wav = Vec::new();
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

#[derive(Deserialize, JsonSchema)]
struct SamplingPrompt {
    /// The prompt to send to the LLM
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct Message {
    /// The message to show the user
    message: String,
}

type Answer = Result<Content, ToolError>;

fn text(text: impl Into<String>) -> Answer {
    Ok(Content::new().text(text))
}

fn pause() {
    std::thread::sleep(Duration::from_millis(50));
}

fn multiple(_: NoArguments) -> Answer {
    Ok(Content::new()
        .text("Multiple content types test:")
        .image(RED_PIXEL_PNG.to_vec(), "image/png")
        .embedded_text(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        ))
}

fn logging(_: NoArguments) -> Answer {
    client::log(LogLevel::Info, "Tool execution started");
    pause();
    client::log(LogLevel::Info, "Tool processing data");
    pause();
    client::log(LogLevel::Info, "Tool execution completed");
    text("Logging test completed")
}

fn progress(_: NoArguments) -> Answer {
    for step in [0.0, 50.0, 100.0] {
        if step > 0.0 {
            pause();
        }
        client::progress(step, Some(100.0), None);
    }
    text("Progress test completed")
}

fn sampling(SamplingPrompt { prompt }: SamplingPrompt) -> Answer {
    let params = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100
    });
    let answer = client::create_message(&params)
        .map_err(|reason| ToolError::new("SAMPLING_UNAVAILABLE", reason))?;
    let reply = answer["content"]["text"].as_str().unwrap_or_default();
    text(format!("LLM response: {reply}"))
}

fn elicit(message: &str, requested_schema: Value) -> Result<Value, ToolError> {
    let params = json!({ "message": message, "requestedSchema": requested_schema });
    client::elicit(&params).map_err(|reason| ToolError::new("ELICITATION_UNAVAILABLE", reason))
}

fn completed(answer: &Value) -> Answer {
    text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"], answer["content"]
    ))
}

fn elicitation(Message { message }: Message) -> Answer {
    // What the suite asks the user for: the elicitation's own schema, not a
    // tool schema, so it is data here.
    let schema = json!({
        "type": "object",
        "properties": {
            "username": { "type": "string", "description": "User's response" },
            "email": { "type": "string", "description": "User's email address" }
        },
        "required": ["username", "email"]
    });
    let answer = elicit(&message, schema)?;
    text(format!(
        "User response: action={}, content={}",
        answer["action"], answer["content"]
    ))
}

fn elicitation_defaults(_: NoArguments) -> Answer {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "score": { "type": "number", "default": 95.5 },
            "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
            "verified": { "type": "boolean", "default": true }
        }
    });
    completed(&elicit("Please review your details", schema)?)
}

fn elicitation_enums(_: NoArguments) -> Answer {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
            "titledSingle": { "type": "string", "oneOf": [
                { "const": "value1", "title": "First Option" },
                { "const": "value2", "title": "Second Option" },
                { "const": "value3", "title": "Third Option" }
            ] },
            "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"] },
            "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
            "titledMulti": { "type": "array", "items": { "anyOf": [
                { "const": "value1", "title": "First Choice" },
                { "const": "value2", "title": "Second Choice" },
                { "const": "value3", "title": "Third Choice" }
            ] } }
        }
    });
    completed(&elicit("Please pick your options", schema)?)
}

fn tools() -> Tools {
    Tools::new()
        // First in the list (tools are listed by name): the suite's header
        // checks call the first tool with no arguments.
        .tool(Tool::new(
            "about",
            "Says what this plugin is",
            |_: NoArguments| text("The fixtures of the official MCP conformance suite, served by toolhost."),
        ))
        .tool(Tool::new(
            "test_simple_text",
            "Returns simple text",
            |_: NoArguments| text("This is a simple text response for testing."),
        ))
        .tool(Tool::new(
            "test_image_content",
            "Returns an image",
            |_: NoArguments| Ok(Content::new().image(RED_PIXEL_PNG.to_vec(), "image/png")),
        ))
        .tool(Tool::new(
            "test_audio_content",
            "Returns audio",
            |_: NoArguments| Ok(Content::new().audio(silent_wav(), "audio/wav")),
        ))
        .tool(Tool::new(
            "test_embedded_resource",
            "Returns an embedded resource",
            |_: NoArguments| {
                Ok(Content::new().embedded_text(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ))
            },
        ))
        .tool(Tool::new(
            "test_multiple_content_types",
            "Returns text, an image and a resource",
            multiple,
        ))
        .tool(Tool::new(
            "test_tool_with_logging",
            "Logs three messages while it runs",
            logging,
        ))
        .tool(Tool::new(
            "test_tool_with_progress",
            "Reports progress while it runs",
            progress,
        ))
        .tool(Tool::new(
            "test_error_handling",
            "Always fails",
            |_: NoArguments| -> Answer {
                Err(ToolError::new(
                    "TEST_ERROR",
                    "This tool intentionally returns an error for testing",
                ))
            },
        ))
        .tool(Tool::new(
            "test_sampling",
            "Asks the client's LLM",
            sampling,
        ))
        .tool(Tool::new("test_elicitation", "Asks the user", elicitation))
        .tool(Tool::new(
            "test_elicitation_sep1034_defaults",
            "Asks the user, with defaults",
            elicitation_defaults,
        ))
        .tool(Tool::new(
            "test_elicitation_sep1330_enums",
            "Asks the user to pick from enums",
            elicitation_enums,
        ))
        .tool(Tool::new(
            "test_reconnection",
            "Takes a moment, for SSE reconnection tests",
            |_: NoArguments| {
                std::thread::sleep(Duration::from_millis(100));
                text("Reconnection test completed")
            },
        ))
        .tool(
            Tool::new(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features",
                |arguments: Value| text(format!("Received: {arguments}")),
            )
            .input_schema_as_written(json_schema_2020_12()),
        )
        .tool(
            Tool::new(
                "test_custom_header",
                "Mirrors region into the Mcp-Param-Region header (SEP-2243)",
                |Region { region }: Region| text(format!("region={region}")),
            )
            .input_schema_as_written(json!({
                "type": "object",
                "properties": {
                    "region": {
                        "type": "string",
                        "description": "Mirrored into Mcp-Param-Region",
                        "x-mcp-header": "Region"
                    }
                },
                "required": ["region"]
            })),
        )
        .tool(Tool::new(
            "greet",
            "Greets someone",
            |Name { name }: Name| text(format!("Hello, {name}!")),
        ))
        .tool(Tool::new(
            "test_missing_capability",
            "Needs sampling: fails without it",
            |_: NoArguments| {
                let params = json!({
                    "messages": [{ "role": "user", "content": { "type": "text", "text": "Hi" } }],
                    "maxTokens": 10
                });
                client::create_message(&params)
                    .map_err(|reason| ToolError::new("SAMPLING_UNAVAILABLE", reason))?;
                text("Success")
            },
        ))
        .tool(Tool::new(
            "test_streaming_elicitation",
            "Reports progress, then asks the user",
            |_: NoArguments| {
                client::progress(50.0, Some(100.0), None);
                let answer = elicit(
                    "Continue?",
                    json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
                )?;
                text(format!("Streaming complete: {}", answer["action"]))
            },
        ))
        .tool(Tool::new(
            "test_logging_tool",
            "Logs one message",
            |_: NoArguments| {
                client::log(LogLevel::Info, "Diagnostic trace logging activated");
                text("Logging evaluated")
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_elicitation",
            "Asks the user's name",
            |_: NoArguments| {
                let answer = one(Request::elicit("user_name", name_question("What is your name?")))?;
                text(format!("Hello, {}!", answer["content"]["name"].as_str().unwrap_or("unknown")))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_sampling",
            "Asks the client's LLM",
            |_: NoArguments| {
                let answer = one(Request::create_message(
                    "capital_question",
                    sampling_question("What is the capital of France?", 100),
                ))?;
                text(format!("Sampling result: {}", answer["content"]["text"].as_str().unwrap_or("")))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_list_roots",
            "Asks for the client's roots",
            |_: NoArguments| {
                let roots = client::list_roots()
                    .map_err(|reason| ToolError::new("ROOTS_UNAVAILABLE", reason))?;
                let count = roots["roots"].as_array().map_or(0, Vec::len);
                text(format!("Found {count} root(s)"))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_request_state",
            "Asks for a confirmation",
            |_: NoArguments| {
                let answer = one(Request::elicit("confirm", confirm_question()))?;
                text(format!("state-ok: confirmed={}", answer["content"]["ok"]))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_multiple_inputs",
            "Asks for a name, a greeting and the roots at once",
            |_: NoArguments| {
                let [name, greeting, roots] = every([
                    Request::elicit("user_name", name_question("What is your name?")),
                    Request::create_message("greeting", sampling_question("Generate a greeting", 50)),
                    Request::roots("client_roots"),
                ])?;
                text(format!(
                    "Name: {}; Greeting: {}; Roots: {}",
                    name["content"]["name"].as_str().unwrap_or(""),
                    greeting["content"]["text"].as_str().unwrap_or(""),
                    roots["roots"].as_array().map_or(0, Vec::len)
                ))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_multi_round",
            "Asks two questions, one after the other",
            |_: NoArguments| {
                let name = one(Request::elicit("step1", name_question("Step 1: What is your name?")))?;
                let color = one(Request::elicit(
                    "step2",
                    json!({
                        "message": "Step 2: What is your favorite color?",
                        "requestedSchema": { "type": "object", "properties": { "color": { "type": "string" } }, "required": ["color"] }
                    }),
                ))?;
                text(format!(
                    "Multi-round complete for {} who likes {}",
                    name["content"]["name"].as_str().unwrap_or(""),
                    color["content"]["color"].as_str().unwrap_or("")
                ))
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation (its state is signed by the host)",
            |_: NoArguments| {
                one(Request::elicit("confirm", confirm_question()))?;
                text("integrity-ok: state verified")
            },
        ))
        .tool(Tool::new(
            "test_input_required_result_capabilities",
            "Asks for what the client declared: elicitation, sampling or both",
            |_: NoArguments| {
                let answers = client::ask(&[
                    Request::elicit(
                        "elicit_input",
                        json!({
                            "message": "A value?",
                            "requestedSchema": { "type": "object", "properties": { "value": { "type": "string" } } }
                        }),
                    ),
                    Request::create_message("sample_input", sampling_question("Sample request", 50)),
                ]);
                let received: Vec<&str> = ["elicit_input", "sample_input"]
                    .into_iter()
                    .zip(&answers)
                    .filter(|(_, answer)| answer.is_ok())
                    .map(|(key, _)| key)
                    .collect();
                if received.is_empty() {
                    return text("No supported capabilities declared");
                }
                text(format!("capabilities-ok: received {}", received.join(", ")))
            },
        ))
}

/// The hooks the suite calls to change the tool or prompt list while a
/// client listens for changes: each call adds, or takes away, a
/// JavaScript tool or prompt in `/hooks`, when the policy grants that
/// folder (read-write) and it is a folder of the plugin folder (the test's
/// policy does); the server then sees a real change of its lists.
fn hooks(tools: Tools) -> Tools {
    tools
        .tool(Tool::new(
            "test_trigger_tool_change",
            "Adds or takes away a tool (a JavaScript file in /hooks)",
            |_: NoArguments| toggle("tool", HOOKED_TOOL),
        ))
        .tool(Tool::new(
            "test_trigger_prompt_change",
            "Adds or takes away a prompt (a JavaScript file in /hooks)",
            |_: NoArguments| toggle("prompt", HOOKED_PROMPT),
        ))
}

const HOOKED_TOOL: &str = r#"import { tool, exportPlugin } from "./toolhost.js";
const hooked = tool({
  name: "hooked",
  description: "Added by test_trigger_tool_change.",
  input: { type: "object", properties: {} },
  run: () => "hooked",
});
export const { tools, resources, prompts, completion } = exportPlugin({ tools: [hooked] });
"#;

const HOOKED_PROMPT: &str = r#"import { tool, exportPlugin } from "./toolhost.js";
const quiet = tool({
  name: "quiet",
  description: "Serves the prompt beside it.",
  input: { type: "object", properties: {} },
  run: () => "quiet",
});
export const { tools, resources, prompts, completion } = exportPlugin({
  tools: [quiet],
  prompts: [{ name: "hooked_prompt", description: "Added by test_trigger_prompt_change.", get: () => "hooked" }],
});
"#;

fn toggle(name: &str, source: &str) -> Answer {
    let unavailable = |error: std::io::Error| {
        ToolError::new(
            "HOOKS_UNAVAILABLE",
            format!("the policy grants no writable /hooks folder: {error}"),
        )
    };
    let path = format!("/hooks/{name}.js");
    if std::fs::metadata(&path).is_ok() {
        std::fs::remove_file(&path).map_err(unavailable)?;
        return text("Mutation triggered (taken away)");
    }
    // Whole or not at all: a temporary name, then a rename.
    let temporary = format!("/hooks/.{name}.js.tmp");
    std::fs::write(&temporary, source).map_err(unavailable)?;
    std::fs::rename(&temporary, &path).map_err(unavailable)?;
    text("Mutation triggered (added)")
}

/// The tools the suite runs as tasks (`conformance.toml` says which).
fn task_tools(tools: Tools) -> Tools {
    tools
        .tool(Tool::new(
            "slow_compute",
            "Computes for a given number of seconds (a task, if the client takes one)",
            |Compute { seconds, label }: Compute| {
                // In steps, so that a cancelled task stops within one.
                let steps = seconds * 10;
                for step in 0..steps {
                    client::progress(f64::from(step), Some(f64::from(steps)), None);
                    std::thread::sleep(Duration::from_millis(100));
                }
                text(format!("Computation {label:?} completed after {seconds} seconds. Result: 42."))
            },
        ))
        .tool(Tool::new(
            "failing_job",
            "Works for a second, then fails as a business error (always a task)",
            |_: NoArguments| -> Answer {
                std::thread::sleep(Duration::from_secs(1));
                Err(ToolError::new("JOB_FAILED", "the job failed, as it always does"))
            },
        ))
        .tool(Tool::new(
            "protocol_error_job",
            "Works for half a second, then crashes (always a task)",
            |_: NoArguments| -> Answer {
                std::thread::sleep(Duration::from_millis(500));
                panic!("the job crashed, as it always does")
            },
        ))
        .tool(Tool::new(
            "confirm_delete",
            "Asks before it deletes a file (always a task)",
            |File { filename }: File| {
                let answer = elicit(
                    &format!("Delete '{filename}'?"),
                    json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } }, "required": ["confirm"] }),
                )?;
                let confirmed = answer["action"] == "accept" && answer["content"]["confirm"] == true;
                text(if confirmed { format!("deleted '{filename}'") } else { format!("kept '{filename}'") })
            },
        ))
        .tool(Tool::new(
            "multi_input",
            "Asks for a name and a confirmation at once (always a task)",
            |_: NoArguments| {
                let [name, confirm] = every([
                    Request::elicit("name", name_question("Enter your name:")),
                    Request::elicit("confirm", confirm_question()),
                ])?;
                text(format!(
                    "name={} confirmed={}",
                    name["content"]["name"], confirm["content"]["confirm"]
                ))
            },
        ))
        .tool(Tool::new(
            "test_tool_with_task",
            "Asks the user's name, then greets them (always a task)",
            |_: NoArguments| {
                let answer = one(Request::elicit("user_name", name_question("What is your name?")))?;
                text(format!(
                    "Hello, {}! (computed in task)",
                    answer["content"]["name"].as_str().unwrap_or("unknown")
                ))
            },
        ))
}

#[derive(Deserialize, JsonSchema)]
struct Compute {
    /// How long to compute
    #[serde(default = "three")]
    seconds: u32,
    /// A name for the computation
    #[serde(default)]
    label: String,
}

fn three() -> u32 {
    3
}

#[derive(Deserialize, JsonSchema)]
struct File {
    /// The file to delete
    #[serde(default = "important")]
    filename: String,
}

fn important() -> String {
    "important.txt".into()
}

/// The input schema the suite expects kept exactly (SEP-2106).
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

#[derive(Deserialize, JsonSchema)]
struct Region {
    region: String,
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    /// Who to greet
    name: String,
}

/// One request's answer, or why there is none as a business error.
fn one(request: Request) -> Result<Value, ToolError> {
    let [answer] = every([request])?;
    Ok(answer)
}

/// Every request's answer, asked at once, or why one has none.
fn every<const N: usize>(requests: [Request; N]) -> Result<[Value; N], ToolError> {
    let answers = client::ask(&requests)
        .into_iter()
        .map(|answer| answer.map_err(|reason| ToolError::new("INPUT_UNAVAILABLE", reason)))
        .collect::<Result<Vec<Value>, ToolError>>()?;
    answers
        .try_into()
        .map_err(|_| ToolError::new("INPUT_UNAVAILABLE", "the client gave no answer"))
}

fn name_question(message: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] }
    })
}

fn confirm_question() -> Value {
    json!({
        "message": "Please confirm",
        "requestedSchema": { "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }
    })
}

fn sampling_question(question: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": question } }],
        "maxTokens": max_tokens
    })
}

#[derive(Deserialize, JsonSchema)]
struct TemplateId {
    id: String,
}

#[derive(Deserialize, JsonSchema)]
struct TwoArguments {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EmbeddedResource {
    /// URI of the resource to embed
    resource_uri: String,
}

/// The suite's resources, template and prompts (contract 0.2.0).
fn with_resources_and_prompts(tools: Tools) -> Tools {
    tools
        .resource(
            Resource::new(
                "test://static-text",
                "static-text",
                "A static text resource",
                || Ok("This is the content of the static text resource."),
            )
            .mime_type("text/plain"),
        )
        .resource(
            Resource::new(
                "test://static-binary",
                "static-binary",
                "A static binary resource (a PNG)",
                || Ok(RED_PIXEL_PNG.to_vec()),
            )
            .mime_type("image/png"),
        )
        .resource(
            Resource::new(
                "test://watched-resource",
                "watched-resource",
                "A resource to subscribe to",
                || Ok("Watched resource content"),
            )
            .mime_type("text/plain"),
        )
        .template(
            Template::new(
                "test://template/{id}/data",
                "template-data",
                "Data for an id",
                |t: TemplateId| {
                    Ok(json!({
                        "id": t.id,
                        "templateTest": true,
                        "data": format!("Data for ID: {}", t.id),
                    })
                    .to_string())
                },
            )
            .mime_type("application/json"),
        )
        .prompt(Prompt::new(
            "test_input_required_result_prompt",
            "A prompt that asks the user for context first",
            |_: NoArguments| {
                let answer = one(Request::elicit(
                    "user_context",
                    json!({
                        "message": "What context should the prompt use?",
                        "requestedSchema": { "type": "object", "properties": { "context": { "type": "string" } }, "required": ["context"] }
                    }),
                ))?;
                Ok(format!(
                    "Prompt with context: {}",
                    answer["content"]["context"].as_str().unwrap_or("")
                ))
            },
        ))
        .prompt(Prompt::new(
            "test_simple_prompt",
            "A simple prompt without arguments",
            |_: NoArguments| Ok("This is a simple prompt for testing."),
        ))
        .prompt(
            Prompt::new(
                "test_prompt_with_arguments",
                "A prompt with two required arguments",
                |a: TwoArguments| {
                    Ok(format!(
                        "Prompt with arguments: arg1='{}', arg2='{}'",
                        a.arg1, a.arg2
                    ))
                },
            )
            .complete("arg1", |typed| {
                ["paris", "park", "party"]
                    .into_iter()
                    .filter(|value| value.starts_with(typed))
                    .map(String::from)
                    .collect()
            }),
        )
        .prompt(Prompt::new(
            "test_prompt_with_embedded_resource",
            "A prompt with an embedded resource",
            |e: EmbeddedResource| {
                // An embedded resource needs a URI: say so as a business
                // error, not with an answer the host must refuse.
                if !is_absolute_uri(&e.resource_uri) {
                    return Err(ToolError::new(
                        "INVALID_RESOURCE_URI",
                        format!(
                            "resourceUri must be an absolute URI such as test://example, not {:?}",
                            e.resource_uri
                        ),
                    ));
                }
                Ok(Content::new()
                    .embedded_text(
                        &e.resource_uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    )
                    .text("Please process the embedded resource above."))
            },
        ))
        .prompt(Prompt::new(
            "test_prompt_with_image",
            "A prompt with an image",
            |_: NoArguments| {
                Ok(Content::new()
                    .image(RED_PIXEL_PNG.to_vec(), "image/png")
                    .text("Please analyze the image above."))
            },
        ))
}

/// `scheme:rest`, the scheme a letter then letters, digits, `+`, `-` or `.`.
fn is_absolute_uri(uri: &str) -> bool {
    uri.split_once(':').is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    })
}

fn plugin() -> Tools {
    with_resources_and_prompts(hooks(task_tools(tools())))
}

toolhost_plugin::export!(plugin, catalog);
