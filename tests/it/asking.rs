//! The page as a host for what a tool asks, in Debian's chromium
//! (`tests/clients/asks_page.mjs`): try-it answers an elicitation through
//! a form made from its schema (and a decline), a sampling request with a
//! reply written by hand, and runs a task tool as a
//! task, declared in a Python source's own code: its statuses shown, its
//! question answered, its result shown, and a run cancelled while it asks.

use serde_json::json;

use crate::builds::put_source;
use crate::support::{Server, example, plugin_dir};

const ADA: &str = "ada-secret-0123456789";

const ASKING: &str = r#"from toolhost_plugin import ClientError, create_message, elicit, tool


@tool
def haiku(topic: str) -> str:
    """A haiku on a topic, from the client's model (here: a person)."""
    answer = create_message({
        "messages": [{"role": "user", "content": {"type": "text", "text": f"A haiku on {topic}"}}],
        "maxTokens": 60,
    })
    return f"{answer['content']['text']} (by {answer['model']})"


@tool
def book_table(guests: int) -> str:
    """Books a table, asking whose name it is under."""
    try:
        answer = elicit({
            "message": f"A table for {guests}: under which name?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "time": {"type": "string", "enum": ["19:00", "20:30"]},
                },
                "required": ["name"],
            },
        })
    except ClientError as error:
        return f"cannot ask: {error}"
    if answer["action"] != "accept":
        return f"not booked ({answer['action']})"
    return f"booked for {answer['content']['name']} at {answer['content'].get('time', '19:00')}"


@tool(task="optional")
def long_report(size: int) -> dict:
    """A long report, which asks for its title first."""
    answer = elicit({
        "message": "The report's title?",
        "requestedSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    })
    total = 0
    for i in range(size):
        total += i * i
    return {"title": answer.get("content", {}).get("title"), "total": total}
"#;

#[test]
fn try_answers_what_a_tool_asks_and_follows_a_task_in_chromium() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("tokens.toml");
    std::fs::write(
        &file,
        format!("[[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n"),
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--tokens", file.to_str().unwrap()]);
    let (status, report) = put_source(&server, "ada/asking", ADA, "text/x-python", ASKING);
    assert_eq!(status, 201, "{report}");

    let seen = crate::dashboard::browse_with(
        "asks_page.mjs",
        "asks",
        &server,
        &json!({
            "token": ADA,
            "ask": "ada__book_table",
            "sample": "ada__haiku",
            "task": "ada__long_report",
        }),
    );
    println!("the page asked: {seen:#}");
    assert_eq!(seen["asked"], "A table for 2: under which name?");
    assert_eq!(seen["booked"], "booked for Ada at 20:30");
    assert_eq!(seen["declined"], "not booked (decline)");
    assert_eq!(seen["sampled"], "user: A haiku on rain");
    assert_eq!(
        seen["haiku"],
        "Soft rain on the roof (by a person on the toolhost page)"
    );
    assert_eq!(seen["taskAsked"], "The report's title?");
    assert_eq!(seen["taskEnded"], "completed");
    let statuses = seen["taskStatuses"].as_array().unwrap();
    assert!(
        statuses.contains(&json!("input_required")),
        "the page showed the task waiting: {seen}"
    );
    let total: u64 = (0..200_000u64).map(|i| i * i).sum();
    assert_eq!(
        seen["taskResult"],
        json!({ "title": "Squares", "total": total })
    );
    assert_eq!(seen["cancelled"], "cancelled");
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
}
