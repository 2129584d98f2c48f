//! The plugin report: every plugin file, its state, its tools and what it
//! was granted, as one typed value. `GET /plugins` serialises it, `toolhost
//! list` prints it as a table, `toolhost check` prints the report of the
//! one file it loaded, and every load event carries one, so none of them
//! disagrees on a field. It deserialises too: `toolhost dev` and the tests
//! read a server's `/plugins` as this type, never by string keys.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::registry::plugin::LoadedPlugin;
use crate::registry::policy;

/// `GET /plugins`: every plugin file, by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginsReport {
    /// The folder served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    pub plugins: Vec<PluginReport>,
}

impl PluginsReport {
    /// The report as someone who is not an admin sees it (see
    /// [`PluginReport::for_person`]); the folder is left out.
    pub(crate) fn for_person(mut self, namespace: Option<&str>) -> PluginsReport {
        self.folder = None;
        self.plugins = self
            .plugins
            .into_iter()
            .filter(|plugin| !plugin.hidden_from(namespace))
            .map(|plugin| plugin.for_person(namespace))
            .collect();
        self
    }

    /// The report on the plugin with this id, if there is one.
    pub fn plugin(&self, id: &str) -> Option<&PluginReport> {
        self.plugins.iter().find(|plugin| plugin.id == id)
    }
}

impl PluginReport {
    /// The report as a person who is not an admin sees it, `namespace`
    /// being theirs: no server paths (the file is its name alone, granted
    /// directories keep only their path inside the sandbox, paths in a
    /// refusal's reason are cut to their last part), and why a plugin was
    /// refused only for their own plugins: another person's reasons are
    /// theirs and the admins'.
    /// Whether this plugin is in `namespace` (someone's own; `None`: no one's).
    fn is_in(&self, namespace: Option<&str>) -> bool {
        namespace.is_some() && crate::registry::layout::namespace_of(&self.id) == namespace
    }

    /// Whether someone who is not an admin, `namespace` being theirs,
    /// does not see this plugin at all: a new one waiting for approval,
    /// not theirs (nothing of it serves).
    pub(crate) fn hidden_from(&self, namespace: Option<&str>) -> bool {
        let own = self.is_in(namespace);
        self.state == PluginState::Pending && self.serving.is_none() && !own
    }

    pub(crate) fn for_person(mut self, namespace: Option<&str>) -> PluginReport {
        if let Some(name) = std::path::Path::new(&self.file).file_name() {
            self.file = name.to_string_lossy().into_owned();
        }
        if let Some(dirs) = self
            .granted
            .as_mut()
            .and_then(|granted| granted.get_mut("dirs"))
            .and_then(|dirs| dirs.as_array_mut())
        {
            for dir in dirs.iter_mut().filter_map(|dir| dir.as_object_mut()) {
                dir.remove("host");
            }
        }
        let own = self.is_in(namespace);
        // A version waiting for approval is its publisher's and the
        // admins' to see: anyone else sees the version that serves.
        if self.state == PluginState::Pending && !own {
            self.state = PluginState::Loaded;
            self.pending = None;
            self.reason = None;
            self.rejected_at = None;
            if let Some(serving) = self.serving.take() {
                self.content_hash = Some(serving.content_hash);
                self.loaded_at = Some(serving.loaded_at);
            }
        }
        if let Some(reason) = self.reason.take() {
            self.reason = Some(if own {
                without_paths(&reason)
            } else {
                "refused; only its publisher and admins see why".to_string()
            });
        }
        self
    }
}

/// `text` with every absolute path cut to its last part (`/srv/p/x.wasm`
/// to `x.wasm`), for readers who are not to learn the server's layout.
pub(crate) fn without_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        let starts_path = at == 0
            || rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '=' | '`'));
        if !starts_path {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
            continue;
        }
        out.push_str(&rest[..at]);
        let path = &rest[at..];
        let end = path
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ',' | ';' | '`'))
            .unwrap_or(path.len());
        let (path, after) = path.split_at(end);
        // A path's trailing `:` belongs to the sentence ("file /x: denied").
        let (path, colon) = match path.strip_suffix(':') {
            Some(path) => (path, ":"),
            None => (path, ""),
        };
        out.push_str(path.rsplit('/').find(|part| !part.is_empty()).unwrap_or(""));
        out.push_str(colon);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One plugin file and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginReport {
    pub id: String,
    pub file: String,
    /// The names of the tools the serving version provides.
    pub tools: Vec<String>,
    pub state: PluginState,
    /// Why the newest version was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The newest version's hash: the serving one, or the rejected one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_cache: Option<bool>,
    /// Which compiler made the serving code: `baseline` until the
    /// optimised code of a large plugin, or of one loaded after the
    /// server's start, is in place (see `runtime/compiler.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<crate::runtime::Tier>,
    /// The version that still serves while a newer one is rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<Serving>,
    /// What the serving version's policy grants (names, never values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<serde_json::Value>,
    /// Input-schema constructs a major LLM API refuses, in the serving
    /// version (see `registry/portability.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_warnings: Vec<String>,
    /// Who published the serving version over HTTP (`PUT /plugins/...`),
    /// and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    /// The language of the source the serving version is (`python`, `js`:
    /// a source file its runtime runs) or the server built it from, and
    /// how long that build took in seconds (none for a source file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_seconds: Option<f64>,
    /// Where the plugin comes from, when its policy names an OCI source:
    /// the reference, the digest serving, when the registry last answered,
    /// and why the newest check gave no new version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::registry::sources::SourceReport>,
    /// Set while a load job for this file runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiling: Option<Compiling>,
    /// The newest version's changes from the approved definitions, while
    /// it waits for approval (`summary`, `changes`): its publisher's and
    /// the admins' to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum PluginState {
    Loaded,
    Rejected,
    Compiling,
    /// Waits for an admin's approval (`--require-approval`).
    Pending,
}

impl PluginState {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginState::Loaded => "loaded",
            PluginState::Rejected => "rejected",
            PluginState::Compiling => "compiling",
            PluginState::Pending => "pending",
        }
    }
}

/// The version that still serves while a newer one is rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Serving {
    pub content_hash: String,
    pub loaded_at: String,
}

/// A load job in progress, and how long it has run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compiling {
    pub elapsed_ms: u64,
}

fn time(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

impl PluginReport {
    /// A plugin whose newest version serves.
    pub(crate) fn loaded(plugin: &LoadedPlugin) -> PluginReport {
        PluginReport {
            content_hash: Some(plugin.version.content_hash.clone()),
            loaded_at: Some(time(plugin.loaded_at)),
            from_cache: Some(plugin.compiled.from_cache),
            compiler: Some(plugin.compiled.tier()),
            ..PluginReport::serving(
                &plugin.id,
                &plugin.file.display().to_string(),
                PluginState::Loaded,
                Some(plugin),
            )
        }
    }

    /// A plugin whose newest version was rejected for `reason`; `serving`
    /// is the older version still answering, if any.
    pub(crate) fn rejected(
        id: &str,
        file: &str,
        reason: &str,
        content_hash: &str,
        at: SystemTime,
        serving: Option<&LoadedPlugin>,
    ) -> PluginReport {
        PluginReport {
            reason: Some(reason.to_string()),
            content_hash: Some(content_hash.to_string()),
            rejected_at: Some(time(at)),
            serving: serving.map(|plugin| Serving {
                content_hash: plugin.version.content_hash.clone(),
                loaded_at: time(plugin.loaded_at),
            }),
            ..PluginReport::serving(id, file, PluginState::Rejected, serving)
        }
    }

    /// A version held for approval (`registry/approvals.rs`), beside the
    /// approved version serving, if any: `held` says what changed.
    pub(crate) fn pending(
        id: &str,
        file: &str,
        held: &crate::registry::plugin::Held,
        content_hash: &str,
        at: SystemTime,
        serving: Option<&LoadedPlugin>,
    ) -> PluginReport {
        PluginReport {
            state: PluginState::Pending,
            pending: Some(serde_json::json!({
                "summary": held.summary,
                "changes": held.changes,
            })),
            ..PluginReport::rejected(id, file, &held.summary, content_hash, at, serving)
        }
    }

    /// A file seen for the first time, with its load job in progress.
    pub(crate) fn compiling(id: &str, file: &str) -> PluginReport {
        PluginReport::serving(id, file, PluginState::Compiling, None)
    }

    /// Marks a load job in progress for this file, running for `elapsed_ms`.
    pub(crate) fn set_compiling(&mut self, elapsed_ms: u64) {
        self.compiling = Some(Compiling { elapsed_ms });
    }

    fn serving(
        id: &str,
        file: &str,
        state: PluginState,
        serving: Option<&LoadedPlugin>,
    ) -> PluginReport {
        PluginReport {
            id: id.to_string(),
            file: file.to_string(),
            tools: serving
                .map(|plugin| plugin.tools.iter().map(|tool| tool.name.clone()).collect())
                .unwrap_or_default(),
            state,
            reason: None,
            content_hash: None,
            rejected_at: None,
            loaded_at: None,
            from_cache: None,
            compiler: None,
            serving: None,
            source: None,
            granted: serving.map(|plugin| policy::describe(&plugin.grants)),
            schema_warnings: serving
                .map(|plugin| {
                    plugin
                        .schema_warnings
                        .iter()
                        .map(ToString::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            published_by: serving
                .and_then(|plugin| plugin.published.as_ref().map(|record| record.by.clone())),
            published_at: serving
                .and_then(|plugin| plugin.published.as_ref().map(|record| record.at.clone())),
            built_from: serving.and_then(|plugin| {
                crate::languages::Language::of_path(&plugin.file)
                    .map(|language| language.as_str().to_string())
                    .or_else(|| {
                        plugin
                            .published
                            .as_ref()
                            .and_then(|record| record.built_from.clone())
                    })
            }),
            build_seconds: serving.and_then(|plugin| {
                plugin
                    .published
                    .as_ref()
                    .and_then(|record| record.build_seconds)
            }),
            compiling: None,
            pending: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cut_to_their_last_part() {
        assert_eq!(
            without_paths("cannot read the file /srv/plugins/bob/x.wasm: denied"),
            "cannot read the file x.wasm: denied"
        );
        assert_eq!(
            without_paths(r#"the policy file "/srv/p/x.toml" names "/etc" (a/b stays)"#),
            r#"the policy file "x.toml" names "etc" (a/b stays)"#
        );
        assert_eq!(
            without_paths("tool \"a/b\" is taken"),
            "tool \"a/b\" is taken"
        );
    }
}
