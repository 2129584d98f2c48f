//! A toolhost server seen from outside, over its own HTTP API: who a token
//! is (`GET /me`), publishing and removing one's plugins (`PUT`/`DELETE
//! /plugins/...`), reading `/plugins`, and the curl line that calls a
//! tool. `toolhost push` and `toolhost dev --server` publish with it;
//! `dev` also reads another server's `/plugins` with [`request`].

use std::time::Duration;

use anyhow::bail;
use clap::Args;
use serde_json::Value;

use crate::registry::report::PluginReport;

/// Which server to publish onto, and as whom.
#[derive(Args, Clone)]
pub(super) struct ServerOptions {
    /// The toolhost server, e.g. http://workshop.local:8000.
    #[arg(long = "server", env = "TOOLHOST_SERVER")]
    pub(super) url: Option<String>,
    /// Your token (from whoever runs the server).
    #[arg(long, env = "TOOLHOST_TOKEN", hide_env_values = true)]
    pub(super) token: Option<String>,
}

/// What became of a publish.
pub(super) enum Outcome {
    Live(Box<PluginReport>),
    Refused(String),
}

/// A server one publishes onto, as one person.
pub(super) struct Publisher {
    base: String,
    token: Option<String>,
    /// Where this person's plugins go: their namespace, or the top level
    /// on an open server.
    namespace: Option<String>,
}

impl Publisher {
    /// Asks the server whose token this is; a clear error for an
    /// unreachable server or an unknown token.
    pub(super) async fn connect(options: &ServerOptions) -> anyhow::Result<Publisher> {
        let Some(url) = &options.url else {
            bail!("name the server to publish onto with --server URL (or TOOLHOST_SERVER)");
        };
        let base = url.trim_end_matches('/').to_string();
        let mut publisher = Publisher {
            base,
            token: options.token.clone().filter(|token| !token.is_empty()),
            namespace: None,
        };
        let (status, me) = publisher.request("GET", "/me", None).await?;
        match status {
            200 => {}
            401 if publisher.token.is_none() => bail!(
                "{} needs a token: pass --token or set TOOLHOST_TOKEN to the one you were given",
                publisher.base
            ),
            401 => bail!(
                "{} does not know this token: pass --token or set TOOLHOST_TOKEN to the one you were given",
                publisher.base
            ),
            404 => bail!(
                "{} is not a toolhost server that takes publishing",
                publisher.base
            ),
            status => bail!("{} answered {status}: {}", publisher.base, message(&me)),
        }
        if me["role"] == "caller" {
            bail!(
                "{}'s token may list and call tools, not publish: ask whoever runs {} for a publisher's token",
                me["name"].as_str().unwrap_or("this"),
                publisher.base
            );
        }
        publisher.namespace = me["namespace"].as_str().map(str::to_string);
        Ok(publisher)
    }

    /// The plugin id `name` gets on the server.
    pub(super) fn plugin_id(&self, name: &str) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_string(),
        }
    }

    /// Publishes `wasm` as `name` and returns what the server made of it.
    pub(super) async fn publish(&self, name: &str, wasm: Vec<u8>) -> anyhow::Result<Outcome> {
        let path = format!("/plugins/{}", self.plugin_id(name));
        let (status, body) = self.request("PUT", &path, Some(wasm)).await?;
        match status {
            200 | 201 => Ok(Outcome::Live(Box::new(serde_json::from_value(body)?))),
            422 => Ok(Outcome::Refused(
                body["error"]["details"]["reason"]
                    .as_str()
                    .map_or_else(|| message(&body), str::to_string),
            )),
            401 => bail!("the server no longer knows this token"),
            status => bail!(
                "the server refused the upload ({status}): {}",
                message(&body)
            ),
        }
    }

    /// Removes one's plugin `name`.
    pub(super) async fn remove(&self, name: &str) -> anyhow::Result<()> {
        let path = format!("/plugins/{}", self.plugin_id(name));
        let (status, body) = self.request("DELETE", &path, None).await?;
        if status != 200 {
            bail!(
                "the server did not remove it ({status}): {}",
                message(&body)
            );
        }
        Ok(())
    }

    /// How to call the first tool, with the token header and arguments
    /// made from its input schema.
    pub(super) async fn print_usage(&self, report: &PluginReport) {
        let Some(tool) = report.tools.first() else {
            return;
        };
        let arguments = match self.request("GET", "/tools", None).await {
            Ok((200, Value::Array(tools))) => tools
                .iter()
                .find(|listed| listed["name"] == tool.as_str())
                .map(|listed| example_arguments(&listed["inputSchema"]))
                .unwrap_or_else(|| serde_json::json!({})),
            _ => serde_json::json!({}),
        };
        let arguments = arguments.to_string().replace('\'', "'\\''");
        let auth = if self.token.is_some() {
            " -H \"Authorization: Bearer $TOOLHOST_TOKEN\""
        } else {
            ""
        };
        println!(
            "  try: curl -s -X POST {}/tools/{tool}{auth} -H 'Content-Type: application/json' -d '{arguments}'",
            self.base
        );
        println!("  MCP: {}/mcp", self.base);
    }

    async fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(u16, Value)> {
        request(
            &self.base,
            self.token.as_deref(),
            (method, path),
            body,
            Duration::from_secs(180),
        )
        .await
    }
}

/// One request to a toolhost server at `base`, as the holder of `token`,
/// off the async workers (the client is blocking): its status and JSON
/// body (`null` when the body is not JSON). `body` is a component, for PUT.
/// `dev` reads `/plugins` with it too.
pub(super) async fn request(
    base: &str,
    token: Option<&str>,
    (method, path): (&'static str, &str),
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> anyhow::Result<(u16, Value)> {
    let url = format!("{base}{path}");
    let auth = token.map(|token| format!("Bearer {token}"));
    let base = base.to_string();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let response = match (method, body) {
            ("PUT", Some(body)) => {
                let mut request = agent.put(&url).header("Content-Type", "application/wasm");
                if let Some(auth) = &auth {
                    request = request.header("Authorization", auth);
                }
                request.send(&body[..])
            }
            ("DELETE", _) => {
                let mut request = agent.delete(&url);
                if let Some(auth) = &auth {
                    request = request.header("Authorization", auth);
                }
                request.call()
            }
            _ => {
                let mut request = agent.get(&url);
                if let Some(auth) = &auth {
                    request = request.header("Authorization", auth);
                }
                request.call()
            }
        };
        let mut response = response
            .map_err(|error| anyhow::anyhow!("cannot reach the server at {base}: {error}"))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    })
    .await?
}

/// Arguments that show the shape a tool takes: each required property
/// with its default, first enum value, or a placeholder of its type.
fn example_arguments(schema: &Value) -> Value {
    let mut arguments = serde_json::Map::new();
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let property = &schema["properties"][name];
        let value = if let Some(default) = property.get("default") {
            default.clone()
        } else if let Some(first) = property["enum"]
            .as_array()
            .and_then(|values| values.first())
        {
            first.clone()
        } else {
            match property["type"].as_str() {
                Some("integer" | "number") => serde_json::json!(1),
                Some("boolean") => serde_json::json!(true),
                Some("array") => serde_json::json!([]),
                Some("object") => example_arguments(property),
                _ => serde_json::json!("..."),
            }
        };
        arguments.insert(name.to_string(), value);
    }
    Value::Object(arguments)
}

/// The error message of an envelope, or the body as it is.
fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .map_or_else(|| body.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_arguments_fill_required_properties_only() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "text": { "type": "string" },
                "count": { "type": "integer" },
                "mode": { "enum": ["fast", "slow"] },
                "loud": { "type": "boolean", "default": false },
                "optional": { "type": "string" }
            },
            "required": ["text", "count", "mode", "loud"]
        });
        assert_eq!(
            example_arguments(&schema),
            serde_json::json!({ "text": "...", "count": 1, "mode": "fast", "loud": false })
        );
    }
}
