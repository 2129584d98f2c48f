//! A toolhost server seen from outside, over its own HTTP API: who a token
//! is and which source the server builds for them (`GET /me`), publishing
//! a component or a source and removing one's plugins (`PUT`/`DELETE
//! /plugins/...`), a build's progress (`GET /events`), reading `/plugins`,
//! and how to reach the tools (the curl line, the MCP URL and header).
//! `toolhost push` and `toolhost dev --server` publish with it; `dev` also
//! reads another server's `/plugins` with [`request`].

use std::time::Duration;

use anyhow::bail;
use clap::Args;
use serde_json::Value;

use crate::builds::recipe::Language;
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
    /// It serves; with the server's `build` answer when it built source.
    Live(Box<PluginReport>, Option<Value>),
    /// The loader refused it: why.
    Refused(String),
    /// The source did not build: the author's line and error first, then
    /// the end of the build's log.
    BuildFailed { headline: String, log: String },
}

/// A server one publishes onto, as one person.
pub(super) struct Publisher {
    base: String,
    token: Option<String>,
    /// Where this person's plugins go: their namespace, or the top level
    /// on an open server.
    namespace: Option<String>,
    /// The source languages the server builds for this person.
    builds: Vec<String>,
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
            builds: Vec::new(),
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
        publisher.builds = me["builds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|language| language.as_str().map(str::to_string))
            .collect();
        Ok(publisher)
    }

    /// Whether the server builds `language` source for this person.
    pub(super) fn builds(&self, language: Language) -> bool {
        self.builds.iter().any(|built| built == language.as_str())
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
        let (status, body) = self
            .request_as("PUT", &path, Some((wasm, "application/wasm")))
            .await?;
        answer(status, body)
    }

    /// Publishes `zip`, a tool folder, as `name`.
    pub(super) async fn publish_folder(&self, name: &str, zip: Vec<u8>) -> anyhow::Result<Outcome> {
        let path = format!("/plugins/{}", self.plugin_id(name));
        let (status, body) = self
            .request_as("PUT", &path, Some((zip, "application/zip")))
            .await?;
        answer(status, body)
    }

    /// Publishes `source` (one `app.py` or `app.js`) as `name` for the
    /// server to build, printing the build's stages as they come; returns
    /// what the server made of it.
    pub(super) async fn publish_source(
        &self,
        name: &str,
        language: Language,
        source: String,
    ) -> anyhow::Result<Outcome> {
        let id = self.plugin_id(name);
        let progress = self.follow_build(&id);
        let path = format!("/plugins/{id}");
        let kind = language.media_type();
        let outcome = self
            .request_as("PUT", &path, Some((source.into_bytes(), kind)))
            .await;
        progress.store(true, std::sync::atomic::Ordering::Relaxed);
        let (status, body) = outcome?;
        answer(status, body)
    }

    /// Prints the build stages of plugin `id` from the server's event feed
    /// until the returned flag is set (a thread of its own, which ends at
    /// the feed's next line after that).
    fn follow_build(&self, id: &str) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (url, auth, id, stop) = (
            format!("{}/events", self.base),
            self.token.as_ref().map(|token| format!("Bearer {token}")),
            id.to_string(),
            done.clone(),
        );
        std::thread::spawn(move || {
            use std::io::BufRead;
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(600)))
                .build()
                .into();
            let mut request = agent.get(&url).header("Accept", "text/event-stream");
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            let Ok(response) = request.call() else {
                return;
            };
            let reader = std::io::BufReader::new(response.into_body().into_reader());
            let mut build_event = false;
            let mut queued = false;
            for line in reader.lines() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let Ok(line) = line else { return };
                if let Some(kind) = line.strip_prefix("event: ") {
                    build_event = kind == "build";
                    continue;
                }
                let Some(data) = line.strip_prefix("data: ").filter(|_| build_event) else {
                    continue;
                };
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if event["plugin"] != id.as_str() {
                    continue;
                }
                match event["stage"].as_str() {
                    // Told again when its place moves: said once.
                    Some("queued") if !queued => {
                        queued = true;
                        println!("  queued for a build on the server ...");
                    }
                    Some("building") => println!("  building on the server ..."),
                    Some("built") => println!(
                        "  built in {:.1} s; loading ...",
                        event["seconds"].as_f64().unwrap_or_default()
                    ),
                    _ => {}
                }
            }
        });
        done
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
        println!("  tools, as clients call them: {}", report.tools.join(", "));
        println!(
            "  try: curl -s -X POST {}/tools/{tool}{auth} -H 'Content-Type: application/json' -d '{arguments}'",
            self.base
        );
        match &self.token {
            Some(_) => println!(
                "  MCP: {}/mcp with the header \"Authorization: Bearer $TOOLHOST_TOKEN\" \
                 (client configurations: the page at {}/, signed in)",
                self.base, self.base
            ),
            None => println!("  MCP: {}/mcp", self.base),
        }
    }

    async fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(u16, Value)> {
        self.request_as(method, path, body.map(|body| (body, "application/wasm")))
            .await
    }

    async fn request_as(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
    ) -> anyhow::Result<(u16, Value)> {
        request_typed(
            &self.base,
            self.token.as_deref(),
            (method, path),
            body,
            Duration::from_secs(600),
        )
        .await
    }
}

/// What a publish's answer says.
fn answer(status: u16, body: Value) -> anyhow::Result<Outcome> {
    match (status, body["error"]["code"].as_str()) {
        (200..=202, _) => {
            let build = body.get("build").cloned();
            Ok(Outcome::Live(
                Box::new(serde_json::from_value(body)?),
                build,
            ))
        }
        (422, Some("BUILD_FAILED")) => Ok(Outcome::BuildFailed {
            headline: message(&body),
            log: body["error"]["details"]["log"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        }),
        (422, _) => Ok(Outcome::Refused(
            body["error"]["details"]["reason"]
                .as_str()
                .map_or_else(|| message(&body), str::to_string),
        )),
        (401, _) => bail!("the server no longer knows this token"),
        (status, _) => bail!(
            "the server refused the upload ({status}): {}",
            message(&body)
        ),
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
    let body = body.map(|body| (body, "application/wasm"));
    request_typed(base, token, (method, path), body, timeout).await
}

/// [`request`] with the body's media type.
async fn request_typed(
    base: &str,
    token: Option<&str>,
    (method, path): (&'static str, &str),
    body: Option<(Vec<u8>, &'static str)>,
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
            ("PUT", Some((body, kind))) => {
                let mut request = agent.put(&url).header("Content-Type", kind);
                if let Some(auth) = &auth {
                    request = request.header("Authorization", auth);
                }
                request.send(&body[..])
            }
            ("POST", _) => {
                let mut request = agent.post(&url).header("Content-Type", "application/json");
                if let Some(auth) = &auth {
                    request = request.header("Authorization", auth);
                }
                request.send(&b""[..])
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
