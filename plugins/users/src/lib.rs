//! `users`: a small user directory kept in a JSON file, in the one folder
//! its policy grants (`/data` inside the sandbox). It answers in the
//! markdown code-block form language models read well: `Key: Value` lines
//! in a fenced block per user.
//!
//! Writes are atomic: the new file is written beside the old one and renamed
//! over it, so a trap or a timeout mid-write leaves the old file whole.
//! Run it with `max_concurrent = 1` (see users.toml.example) so that two
//! calls never read-modify-write at once.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use exports::toolhost::plugin::tools::{Annotations, ContentBlock, Guest, Output, Tool, ToolError};
use serde_json::{Map, Value, json};

const STORE: &str = "/data/users.json";
const STORE_TEMP: &str = "/data/.users.json.tmp";

fn error(code: &str, message: impl Into<String>) -> ToolError {
    ToolError {
        code: code.into(),
        message: message.into(),
        details: None,
    }
}

fn text(text: String) -> Output {
    Output {
        content: vec![ContentBlock::Text(text)],
        structured: None,
    }
}

fn hints(read_only: bool, destructive: bool) -> Option<Annotations> {
    Some(Annotations {
        read_only: Some(read_only),
        destructive: Some(destructive),
        idempotent: Some(read_only),
        open_world: Some(false),
    })
}

fn tool(name: &str, description: &str, schema: Value, annotations: Option<Annotations>) -> Tool {
    Tool {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: schema.to_string(),
        output_schema: None,
        annotations,
    }
}

struct Users;

impl Guest for Users {
    fn list_tools() -> Vec<Tool> {
        let id = json!({ "type": "object", "properties": { "id": { "type": "integer", "minimum": 1 } }, "required": ["id"] });
        vec![
            tool(
                "search_users",
                "Find users whose name, surname or email contains the query (case-insensitive).",
                json!({ "type": "object", "properties": { "query": { "type": "string" } }, "required": ["query"] }),
                hints(true, false),
            ),
            tool(
                "get_user",
                "One user by id.",
                id.clone(),
                hints(true, false),
            ),
            tool(
                "create_user",
                "Add a user; answers with the stored user and its new id.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "minLength": 1 },
                        "surname": { "type": "string", "minLength": 1 },
                        "email": { "type": "string", "minLength": 3 },
                        "phone": { "type": "string" },
                        "company": { "type": "string" }
                    },
                    "required": ["name", "surname", "email"],
                    "additionalProperties": false
                }),
                hints(false, false),
            ),
            tool(
                "delete_user",
                "Remove a user by id.",
                id,
                hints(false, true),
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<Output, ToolError> {
        // Strict: a missing or mistyped argument is INVALID_ARGUMENTS.
        let args: Value = serde_json::from_str(&arguments).map_err(|e| {
            error(
                "INVALID_ARGUMENTS",
                format!("the arguments are not JSON: {e}"),
            )
        })?;
        let mut users = load()?;
        match name.as_str() {
            "search_users" => {
                let query = required(&args, "query", Value::as_str)?.to_lowercase();
                let found: Vec<&Value> = users
                    .iter()
                    .filter(|user| {
                        ["name", "surname", "email"].iter().any(|field| {
                            user[field]
                                .as_str()
                                .unwrap_or_default()
                                .to_lowercase()
                                .contains(&query)
                        })
                    })
                    .collect();
                if found.is_empty() {
                    return Ok(text("No users found matching your criteria.".into()));
                }
                let blocks: Vec<String> = found.iter().map(|user| user_block(user)).collect();
                Ok(text(format!(
                    "Found {} users:\n\n{}",
                    found.len(),
                    blocks.join("\n\n")
                )))
            }
            "get_user" => {
                let id = required(&args, "id", Value::as_u64)?;
                let user = users
                    .iter()
                    .find(|user| user["id"] == id)
                    .ok_or_else(|| not_found(id))?;
                Ok(text(user_block(user)))
            }
            "create_user" => {
                let id = users
                    .iter()
                    .filter_map(|user| user["id"].as_u64())
                    .max()
                    .unwrap_or(0)
                    + 1;
                let mut user = Map::new();
                user.insert("id".into(), json!(id));
                if let Value::Object(fields) = args {
                    user.extend(fields);
                }
                let user = Value::Object(user);
                users.push(user.clone());
                save(&users)?;
                Ok(text(format!(
                    "User successfully created:\n\n{}",
                    user_block(&user)
                )))
            }
            "delete_user" => {
                let id = required(&args, "id", Value::as_u64)?;
                let before = users.len();
                users.retain(|user| user["id"] != id);
                if users.len() == before {
                    return Err(not_found(id));
                }
                save(&users)?;
                Ok(text("User successfully deleted".into()))
            }
            other => Err(error(
                "UNKNOWN_TOOL",
                format!("this plugin has no tool named {other}"),
            )),
        }
    }
}

fn not_found(id: u64) -> ToolError {
    error("USER_NOT_FOUND", format!("User with ID {id} not found"))
}

/// All users; a missing file is an empty directory, a missing `/data` a
/// missing grant.
fn load() -> Result<Vec<Value>, ToolError> {
    if !std::path::Path::new("/data").is_dir() {
        return Err(error(
            "STORE_UNAVAILABLE",
            "no /data directory: the plugin's policy must grant one (see users.toml.example)",
        ));
    }
    match std::fs::read_to_string(STORE) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            error(
                "STORE_CORRUPT",
                format!("{STORE} is not a JSON list of users: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(error(
            "STORE_UNAVAILABLE",
            format!("cannot read {STORE}: {e} (is /data granted?)"),
        )),
    }
}

/// Write beside, then rename over: never a half-written store.
fn save(users: &[Value]) -> Result<(), ToolError> {
    let text = serde_json::to_string_pretty(users).unwrap_or_default();
    std::fs::write(STORE_TEMP, text)
        .and_then(|()| std::fs::rename(STORE_TEMP, STORE))
        .map_err(|e| {
            error(
                "STORE_UNAVAILABLE",
                format!("cannot write {STORE}: {e} (is /data granted read-write?)"),
            )
        })
}

/// A user as a fenced block of `Key: Value` lines. The fence grows past any
/// backticks in the data, so a value cannot close the block early.
fn user_block(user: &Value) -> String {
    let line = |label: &str, key: &str| {
        let value = user[key]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| match &user[key] {
                Value::Null => "N/A".into(),
                other => other.to_string(),
            });
        format!("{label}: {value}")
    };
    let body = [
        line("User ID", "id"),
        line("Name", "name"),
        line("Surname", "surname"),
        line("Email", "email"),
        line("Phone", "phone"),
        line("Company", "company"),
    ]
    .join("\n");
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{body}\n{fence}")
}

/// The argument `key`, read by `as_type`, or INVALID_ARGUMENTS naming it.
fn required<'a, T>(
    args: &'a Value,
    key: &str,
    as_type: impl Fn(&'a Value) -> Option<T>,
) -> Result<T, ToolError> {
    args.get(key).and_then(as_type).ok_or_else(|| {
        error(
            "INVALID_ARGUMENTS",
            format!("{key:?} is missing or has the wrong type"),
        )
    })
}

export!(Users);
