//! `toolhost approve ID [--refuse]`: an admin's decision on a version held
//! for approval (`serve --require-approval`), over the server's own route
//! (`POST /plugins/{id}/approve` or `/refuse`). Without an id it lists
//! what waits, with each one's changes. Exit status: 0 decided (or
//! listed), 1 nothing waited, 2 the request could not be made.

use std::time::Duration;

use anyhow::bail;
use clap::Args;
use serde_json::Value;

use super::remote::{ServerOptions, request};

#[derive(Args)]
pub(super) struct ApproveOptions {
    /// The plugin: `namespace/name`, or `name` at the top level. Without
    /// it, the versions that wait are listed.
    id: Option<String>,
    /// Refuse it instead: the approved version (if any) serves on.
    #[arg(long)]
    refuse: bool,
    #[command(flatten)]
    server: ServerOptions,
}

impl ApproveOptions {
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        let Some(url) = &self.server.url else {
            bail!("name the server with --server URL (or TOOLHOST_SERVER)");
        };
        let base = url.trim_end_matches('/');
        let token = self.server.token.as_deref();
        let timeout = Duration::from_secs(120);
        let Some(id) = &self.id else {
            let (status, report) = request(base, token, ("GET", "/plugins"), None, timeout).await?;
            if status != 200 {
                bail!("{base} answered {status}: {}", message(&report));
            }
            let waiting: Vec<&Value> = report["plugins"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|plugin| plugin["state"] == "pending")
                .collect();
            if waiting.is_empty() {
                println!("nothing waits for approval");
            }
            for plugin in waiting {
                print_held(plugin);
            }
            return Ok(0);
        };
        // What is decided on is what is printed: the held version's hash
        // goes with the decision, and one held since is not decided on.
        let (status, held) = request(
            base,
            token,
            ("GET", &format!("/plugins/{id}")),
            None,
            timeout,
        )
        .await?;
        if status != 200 {
            bail!("{base} answered {status}: {}", message(&held));
        }
        if held["state"] == "pending" {
            print_held(&held);
        }
        let hash = held["contentHash"].as_str().unwrap_or_default();
        let action = if self.refuse { "refuse" } else { "approve" };
        let path = format!("/plugins/{id}/{action}?hash={hash}");
        let (status, answer) = request(base, token, ("POST", &path), None, timeout).await?;
        match (status, answer["error"]["code"].as_str()) {
            (200, _) if answer["removed"].is_string() => {
                println!("refused: {id} was new, and is gone");
                Ok(0)
            }
            (200, _) => {
                let tools: Vec<&str> = answer["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let what = if self.refuse { "refused" } else { "approved" };
                println!("{what}: {id} serves {}", tools.join(", "));
                Ok(0)
            }
            (409, Some("NOTHING_PENDING")) => {
                println!("{}", message(&answer));
                Ok(1)
            }
            (status, _) => bail!("{base} answered {status}: {}", message(&answer)),
        }
    }
}

/// One held version: its id, why it waits, and each change.
fn print_held(plugin: &Value) {
    println!(
        "{}: {}",
        plugin["id"].as_str().unwrap_or("?"),
        plugin["pending"]["summary"].as_str().unwrap_or("held")
    );
    for change in plugin["pending"]["changes"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!(
            "  {} {} {}",
            change["change"].as_str().unwrap_or("?"),
            change["kind"].as_str().unwrap_or("?"),
            change["name"].as_str().unwrap_or("?")
        );
        if let Some(description) = change["pending"]["description"].as_str() {
            println!("    description: {description:?}");
        }
        for (field, values) in change["fields"].as_object().into_iter().flatten() {
            println!(
                "    {field}: {} -> {}",
                values["approved"], values["pending"]
            );
        }
    }
}

fn message(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .map_or_else(|| answer.to_string(), str::to_string)
}
