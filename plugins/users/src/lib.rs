//! `users`: a small user directory kept in a JSON file, in the one folder
//! its policy grants (`/data` inside the sandbox). It answers in the
//! markdown code-block form language models read well: `Key: Value` lines
//! in a fenced block per user.
//!
//! Writes are atomic: the new file is written beside the old one and renamed
//! over it, so a trap or a timeout mid-write leaves the old file whole.
//! Run it with `max_concurrent = 1` (see users.toml.example) so that two
//! calls never read-modify-write at once.

use toolhost_plugin::{prelude::*, serde_json};

const STORE: &str = "/data/users.json";
const STORE_TEMP: &str = "/data/.users.json.tmp";

/// One user, as the store keeps it.
#[derive(Serialize, Deserialize, Clone)]
struct User {
    id: u64,
    #[serde(flatten)]
    fields: NewUser,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
struct NewUser {
    #[schemars(length(min = 1))]
    name: String,
    #[schemars(length(min = 1))]
    surname: String,
    #[schemars(length(min = 3))]
    email: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    company: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct Query {
    /// Part of a name, surname or email
    query: String,
}

#[derive(Deserialize, JsonSchema)]
struct Id {
    #[schemars(range(min = 1))]
    id: u64,
}

fn search_users(Query { query }: Query) -> Result<String, ToolError> {
    let query = query.to_lowercase();
    let users = load()?;
    let found: Vec<String> = users
        .iter()
        .filter(|user| {
            let f = &user.fields;
            [&f.name, &f.surname, &f.email]
                .iter()
                .any(|field| field.to_lowercase().contains(&query))
        })
        .map(user_block)
        .collect();
    if found.is_empty() {
        return Ok("No users found matching your criteria.".into());
    }
    Ok(format!(
        "Found {} users:\n\n{}",
        found.len(),
        found.join("\n\n")
    ))
}

fn get_user(Id { id }: Id) -> Result<String, ToolError> {
    let users = load()?;
    let user = users
        .iter()
        .find(|user| user.id == id)
        .ok_or_else(|| not_found(id))?;
    Ok(user_block(user))
}

fn create_user(fields: NewUser) -> Result<String, ToolError> {
    let mut users = load()?;
    let id = users.iter().map(|user| user.id).max().unwrap_or(0) + 1;
    let user = User { id, fields };
    users.push(user.clone());
    save(&users)?;
    Ok(format!(
        "User successfully created:\n\n{}",
        user_block(&user)
    ))
}

fn delete_user(Id { id }: Id) -> Result<String, ToolError> {
    let mut users = load()?;
    let before = users.len();
    users.retain(|user| user.id != id);
    if users.len() == before {
        return Err(not_found(id));
    }
    save(&users)?;
    Ok("User successfully deleted".into())
}

fn tools() -> Tools {
    let hints = |tool: Tool, read_only: bool, destructive: bool| {
        tool.read_only(read_only)
            .destructive(destructive)
            .idempotent(read_only)
            .open_world(false)
    };
    Tools::new()
        .tool(hints(
            Tool::new(
                "search_users",
                "Find users whose name, surname or email contains the query (case-insensitive).",
                search_users,
            ),
            true,
            false,
        ))
        .tool(hints(
            Tool::new("get_user", "One user by id.", get_user),
            true,
            false,
        ))
        .tool(hints(
            Tool::new(
                "create_user",
                "Add a user; answers with the stored user and its new id.",
                create_user,
            ),
            false,
            false,
        ))
        .tool(hints(
            Tool::new("delete_user", "Remove a user by id.", delete_user),
            false,
            true,
        ))
}

toolhost_plugin::export!(tools);

fn not_found(id: u64) -> ToolError {
    ToolError::new("USER_NOT_FOUND", format!("User with ID {id} not found"))
}

/// All users; a missing file is an empty directory, a missing `/data` a
/// missing grant.
fn load() -> Result<Vec<User>, ToolError> {
    if !std::path::Path::new("/data").is_dir() {
        return Err(ToolError::new(
            "STORE_UNAVAILABLE",
            "no /data directory: the plugin's policy must grant one (see users.toml.example)",
        ));
    }
    match std::fs::read_to_string(STORE) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            ToolError::new(
                "STORE_CORRUPT",
                format!("{STORE} is not a JSON list of users: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ToolError::new(
            "STORE_UNAVAILABLE",
            format!("cannot read {STORE}: {e} (is /data granted?)"),
        )),
    }
}

/// Write beside, then rename over: never a half-written store.
fn save(users: &[User]) -> Result<(), ToolError> {
    let text = serde_json::to_string_pretty(users).unwrap_or_default();
    std::fs::write(STORE_TEMP, text)
        .and_then(|()| std::fs::rename(STORE_TEMP, STORE))
        .map_err(|e| {
            ToolError::new(
                "STORE_UNAVAILABLE",
                format!("cannot write {STORE}: {e} (is /data granted read-write?)"),
            )
        })
}

/// A user as a fenced block of `Key: Value` lines. The fence grows past any
/// backticks in the data, so a value cannot close the block early.
fn user_block(user: &User) -> String {
    let f = &user.fields;
    let or_na = |value: &Option<String>| value.clone().unwrap_or_else(|| "N/A".into());
    let body = [
        format!("User ID: {}", user.id),
        format!("Name: {}", f.name),
        format!("Surname: {}", f.surname),
        format!("Email: {}", f.email),
        format!("Phone: {}", or_na(&f.phone)),
        format!("Company: {}", or_na(&f.company)),
    ]
    .join("\n");
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{body}\n{fence}")
}
