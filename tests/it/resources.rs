//! Resources, templates, prompts and completion (contract 0.2.0) through
//! the real binary: the `conformance` plugin's fixtures over REST and MCP,
//! every refusal with its code and status, the uniqueness of URIs across
//! plugins and the namespace rule for prompts, and the official TypeScript
//! SDK client hearing `resources/updated` and both lists' `list_changed`.
//! (The conformance suite's resource and prompt scenarios run in
//! `mcp.rs`.)

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::mcp::rpc;
use crate::support::{Server, drop_in, example, fixture, plugin_dir, variant_of};
use toolhost::registry::report::PluginState;

/// A 1x1 red PNG, base64: what the conformance plugin's binary resource is.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVQI12P4z8AAAAMBAQAY3Y2wAAAAAElFTkSuQmCC";

fn post(server: &Server, path: &str, body: &str) -> (u16, Value) {
    let response = server.post(path, body);
    (response.status, response.json)
}

/// The Rust SDK exports what a plugin has: `tools` alone for a plugin of
/// tools only (the echo; every export costs each instantiation), and
/// resources, prompts, completion, views and tool details beside them for
/// one exported with `export!(tools, catalog)` (the conformance plugin).
#[test]
fn sdk_plugins_export_the_catalog_only_when_they_have_one() {
    let exports = |name: &str| -> Vec<String> {
        let bytes = std::fs::read(example(name)).unwrap();
        let wit_component::DecodedWasm::Component(resolve, world) =
            wit_component::decode(&bytes).unwrap()
        else {
            panic!("{name} is not a component");
        };
        resolve.worlds[world]
            .exports
            .keys()
            .map(|key| resolve.name_world_key(key))
            .collect()
    };
    assert_eq!(exports("echo"), ["toolhost:plugin/tools@0.1.0"]);
    assert_eq!(
        exports("conformance"),
        [
            "toolhost:plugin/views@0.2.0",
            "toolhost:plugin/tool-details@0.2.0",
            "toolhost:plugin/tools@0.1.0",
            "toolhost:plugin/resources@0.2.0",
            "toolhost:plugin/prompts@0.2.0",
            "toolhost:plugin/completion@0.2.0",
        ]
    );
}

/// A plugin with a resource exported as tools only (`export!(tools)`,
/// `catalog` forgotten) is refused, and the reason a person reads says
/// what to write: the SDK's panic, which a trap's reason alone
/// (`unreachable`) does not tell.
#[test]
fn a_catalog_exported_as_tools_only_is_refused_saying_how_to_export_it() {
    let dir = plugin_dir(&[&fixture("uncatalogued")]);
    let server = Server::start(dir.path(), &[]);
    let plugins = server.get("/plugins");
    let plugin = &plugins.json["plugins"][0];
    assert_eq!(plugin["state"], "rejected", "{}", plugins.json);
    let reason = plugin["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("list-tools failed: trapped:"),
        "{reason}"
    );
    assert!(
        reason.contains("write `toolhost_plugin::export!(tools, catalog)`"),
        "{reason}"
    );
    assert_eq!(plugin["tools"], json!([]), "{}", plugins.json);
}

#[test]
fn resources_and_prompts_over_rest_and_mcp() {
    let dir = plugin_dir(&[&example("conformance"), &example("echo")]);
    let server = Server::start(dir.path(), &[]);

    // The lists.
    let listed = server.get("/resources");
    assert_eq!(listed.status, 200, "{}", listed.json);
    let uris: Vec<&str> = listed.json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "test://static-text",
            "test://static-binary",
            "test://watched-resource"
        ]
    );
    assert_eq!(
        listed.json["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    let prompts = server.get("/prompts").json;
    let with_arguments = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "test_prompt_with_arguments")
        .unwrap()
        .clone();
    assert_eq!(
        with_arguments["arguments"],
        json!([
            {"name": "arg1", "description": "First test argument", "required": true},
            {"name": "arg2", "description": "Second test argument", "required": true},
        ])
    );

    // Reads: encoded or not, text, binary, a template's.
    let text = server.get("/resources/test%3A%2F%2Fstatic-text");
    assert_eq!(text.status, 200, "{}", text.json);
    assert_eq!(
        text.json["contents"],
        json!([{
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource."
        }])
    );
    let binary = server.get("/resources/test://static-binary").json;
    assert_eq!(binary["contents"][0]["blob"], RED_PIXEL_PNG);
    assert_eq!(binary["contents"][0]["mimeType"], "image/png");
    let data = server
        .get("/resources/test%3A%2F%2Ftemplate%2F123%2Fdata")
        .json;
    let body: Value = serde_json::from_str(data["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"})
    );
    for missing in [
        "test://nothing",
        "test://template//data",
        "test://template/1/2/data",
    ] {
        let refused = server.get(&format!("/resources/{missing}"));
        assert_eq!(refused.status, 404, "{missing}: {}", refused.json);
        assert_eq!(
            refused.json["error"]["code"], "RESOURCE_NOT_FOUND",
            "{missing}"
        );
    }

    // Prompts: arguments checked before the plugin runs.
    let (status, prompt) = post(
        &server,
        "/prompts/test_prompt_with_arguments",
        r#"{"arg1":"hello","arg2":"world"}"#,
    );
    assert_eq!(status, 200, "{prompt}");
    assert_eq!(
        prompt["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"}}])
    );
    let (_, image) = post(&server, "/prompts/test_prompt_with_image", "");
    assert_eq!(image["messages"][0]["content"]["type"], "image");
    assert_eq!(image["messages"][0]["content"]["data"], RED_PIXEL_PNG);
    // An embedded resource without a URI is the plugin's business error
    // (422 with its code), never an answer the host must refuse (500).
    for bad in ["", "not a uri"] {
        let (status, refused) = post(
            &server,
            "/prompts/test_prompt_with_embedded_resource",
            &json!({ "resourceUri": bad }).to_string(),
        );
        assert_eq!(status, 422, "{bad:?}: {refused}");
        assert_eq!(
            refused["error"]["code"], "INVALID_RESOURCE_URI",
            "{refused}"
        );
    }
    let (_, embedded) = post(
        &server,
        "/prompts/test_prompt_with_embedded_resource",
        r#"{"resourceUri":"test://example-resource"}"#,
    );
    assert_eq!(
        embedded["messages"][0]["content"]["resource"]["uri"],
        "test://example-resource"
    );
    for (body, why) in [
        (r#"{"arg1":"a"}"#, "\"arg2\" is required"),
        (r#"{"arg1":"a","arg2":2}"#, "must be a string"),
        (r#"{"arg1":"a","arg2":"b","arg3":"c"}"#, "not an argument"),
    ] {
        let (status, refused) = post(&server, "/prompts/test_prompt_with_arguments", body);
        assert_eq!(status, 422, "{body}: {refused}");
        assert_eq!(refused["error"]["code"], "INVALID_ARGUMENTS");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(why),
            "{body}: {refused}"
        );
    }
    let (status, refused) = post(&server, "/prompts/test_prompt_with_arguments", "[1]");
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (400, Some("INVALID_JSON"))
    );
    let (status, refused) = post(&server, "/prompts/nope", "{}");
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused["error"]["code"], "PROMPT_NOT_FOUND");
    // The conformance plugin's five prompts.
    assert_eq!(
        refused["error"]["details"]["available"]
            .as_array()
            .unwrap()
            .len(),
        5,
        "{refused}"
    );

    // MCP, one-shot: the same answers, failures as JSON-RPC errors.
    let ask = |method: &str, params: Value| -> Value {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, _, body) = rpc(&server, message, &[]);
        assert_eq!(status, 200, "{method}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    let read = ask("resources/read", json!({"uri": "test://static-text"}));
    assert_eq!(read["result"]["contents"], text.json["contents"]);
    let missing = ask("resources/read", json!({"uri": "test://nothing"}));
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    assert_eq!(missing["error"]["data"]["code"], "RESOURCE_NOT_FOUND");
    let unknown = ask("prompts/get", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let bad = ask(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(bad["error"]["data"]["code"], "INVALID_ARGUMENTS");
    let completed = ask(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
               "argument": {"name": "arg1", "value": "par"}}),
    );
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["paris", "park", "party"]),
        "{completed}"
    );
    let nothing = ask(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}}),
    );
    assert_eq!(nothing["result"]["completion"]["values"], json!([]));

    // Each read, get and completion is counted like a call.
    let (_, text) = crate::metrics::metrics_text(&server, None);
    for method in ["resources/read", "prompts/get", "completion/complete"] {
        assert!(
            text.contains(&format!("tool=\"{method}\"")),
            "{method} not in /metrics"
        );
    }

    // The same plugin in a namespace: its prompts are `ada__…` and its
    // URIs live under the authority `ada`, so it serves beside the top
    // level's, and each read reaches its own plugin.
    std::fs::create_dir(dir.path().join("ada")).unwrap();
    drop_in(
        &example("conformance"),
        &dir.path().join("ada"),
        "conformance.wasm",
    );
    server.wait_for("ada/conformance judged", |s| {
        s.settled_plugin("ada/conformance").is_some()
    });
    let report = server.settled_plugin("ada/conformance").unwrap();
    assert_eq!(report.state, PluginState::Loaded, "{report:?}");
    let listed = server.get("/resources").json;
    let uris: Vec<&str> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(uris.contains(&"test://static-text"), "{listed}");
    assert!(uris.contains(&"test://ada/static-text"), "{listed}");
    let templates = listed["resourceTemplates"].to_string();
    assert!(
        templates.contains("test://ada/template/{id}/data"),
        "{listed}"
    );
    let read = server
        .get("/resources/test%3A%2F%2Fada%2Ftemplate%2F9%2Fdata")
        .json;
    assert_eq!(
        read["contents"][0]["uri"], "test://ada/template/9/data",
        "{read}"
    );
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Data for ID: 9"),
        "{read}"
    );
    // Five prompts of each copy of the conformance plugin.
    assert_eq!(
        server.get("/prompts").json["prompts"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
}

#[test]
fn a_client_hears_of_updated_resources_and_changed_lists() {
    let dir = plugin_dir(&[&example("conformance")]);
    let server = Server::start(dir.path(), &[]);
    let mut command = crate::clients::ts_client();
    command
        .args([
            "watch",
            &format!("{}/mcp", server.base),
            "test://watched-resource",
        ])
        .stdout(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, "subscribed", "the client said {first:?}");
    // A new version of the plugin: its resources may read differently.
    let newer = variant_of(&example("conformance"), "v2");
    drop_in(&newer, dir.path(), "conformance.wasm");
    server.wait_for("the new version", |s| {
        s.settled_plugin("conformance")
            .is_some_and(|p| p.content_hash == Some(crate::support::file_hash(&newer)))
    });
    // Once the client has heard the update, the plugin goes.
    let heard = lines.next().unwrap().unwrap();
    assert_eq!(heard, "updated", "the client said {heard:?}");
    // Gone: both lists change.
    std::fs::remove_file(dir.path().join("conformance.wasm")).unwrap();
    let status = child.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        status.success(),
        "the client failed: {rest:?}\n{}",
        server.log()
    );
    let report: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(report["completion"], json!(["paris", "park", "party"]));
    assert_eq!(report["read"]["text"], "Watched resource content");
    assert_eq!(report["templates"], json!(["test://template/{id}/data"]));
    assert!(
        report["heard"]["updated"]
            .as_array()
            .unwrap()
            .contains(&json!("test://watched-resource")),
        "{report}"
    );
}

/// A session's subscriptions are bounded: templates make URIs endless.
#[test]
fn a_session_subscribes_to_a_thousand_resources_at_most() {
    let dir = plugin_dir(&[&example("conformance")]);
    let server = Server::start(dir.path(), &[]);
    let session = crate::protocol::initialize(&server);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(rpc(&server, initialized, &headers).0, 202);
    let subscribe = |n: usize| {
        let uri = format!("test://template/{n}/data");
        let message = json!({"jsonrpc": "2.0", "id": n, "method": "resources/subscribe", "params": {"uri": uri}});
        rpc(&server, message, &headers).2
    };
    for n in 0..1000 {
        let answer = subscribe(n);
        assert!(answer.contains(r#""result":{}"#), "{n}: {answer}");
    }
    let refused = subscribe(1000);
    assert!(
        refused.contains("-32602") && refused.contains("1000 resources at most"),
        "{refused}"
    );
    // Subscribing again to one already held is fine, and a URI no plugin
    // serves is refused as not found.
    assert!(subscribe(5).contains(r#""result":{}"#));
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "test://nothing"}});
    assert!(rpc(&server, message, &headers).2.contains("-32002"));
}
