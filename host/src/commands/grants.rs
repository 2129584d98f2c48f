//! `toolhost grants allow|revoke|list`: an admin's outbound HTTP grants,
//! in the policy files a server already reads, edited in place (comments
//! and layout kept): the room's (`_room.toml`, every plugin of the folder),
//! a namespace's (`NS/_namespace.toml`) or one plugin's (`[NS/]NAME.toml`).
//! Each origin is checked as the server checks it before anything is
//! written; the file is written beside its place and renamed over it, so a
//! serving server reloads what it governs once, whole.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::registry::layout::is_valid_namespace;
use crate::registry::policy::{NAMESPACE_POLICY, ROOM_POLICY};
use crate::runtime::OriginPattern;

#[derive(Args)]
pub(super) struct GrantsOptions {
    #[command(subcommand)]
    action: Action,
}

#[derive(Args, Clone)]
struct Scope {
    /// The plugin folder [default: plugins].
    #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
    plugins: PathBuf,
    /// One namespace's plugins (`NS/_namespace.toml`) instead of the room.
    #[arg(long, value_name = "NS", conflicts_with = "plugin")]
    namespace: Option<String>,
    /// One plugin (`NAME` at the top, `NS/NAME` in a namespace) instead of
    /// the room.
    #[arg(long, value_name = "ID")]
    plugin: Option<String>,
}

#[derive(Subcommand)]
enum Action {
    /// Allow outbound HTTP to these origins (`https://api.example.com`,
    /// `http://127.0.0.1:8080`, `https://*.example.org`): for the whole
    /// room unless --namespace or --plugin says otherwise.
    Allow {
        #[command(flatten)]
        scope: Scope,
        #[arg(required = true, value_name = "ORIGIN")]
        origins: Vec<String>,
    },
    /// Take origins back.
    Revoke {
        #[command(flatten)]
        scope: Scope,
        #[arg(required = true, value_name = "ORIGIN")]
        origins: Vec<String>,
    },
    /// List every grant of the folder: the room's, each namespace's, each
    /// plugin's.
    List {
        /// The plugin folder [default: plugins].
        #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
        plugins: PathBuf,
    },
}

impl GrantsOptions {
    pub(super) fn run(self) -> anyhow::Result<u8> {
        match self.action {
            Action::Allow { scope, origins } => change(&scope, &origins, true),
            Action::Revoke { scope, origins } => change(&scope, &origins, false),
            Action::List { plugins } => {
                for file in policy_files(&plugins)? {
                    let allowed = allowed_in(&std::fs::read_to_string(&file)?);
                    if !allowed.is_empty() {
                        let shown = file.strip_prefix(&plugins).unwrap_or(&file);
                        println!("{}: {}", shown.display(), allowed.join(", "));
                    }
                }
                Ok(0)
            }
        }
    }
}

/// The policy file a scope names.
fn file_of(scope: &Scope) -> anyhow::Result<PathBuf> {
    if !scope.plugins.is_dir() {
        bail!(
            "{} is not a folder: name the plugin folder with --plugins",
            scope.plugins.display()
        );
    }
    if let Some(namespace) = &scope.namespace {
        if !is_valid_namespace(namespace) {
            bail!("{namespace:?} is not a namespace's name");
        }
        return Ok(scope.plugins.join(namespace).join(NAMESPACE_POLICY));
    }
    if let Some(id) = &scope.plugin {
        let parts: Vec<&str> = id.split('/').collect();
        let valid_name = |name: &str| {
            !name.is_empty()
                && name.len() <= 64
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        return match parts.as_slice() {
            [name] if valid_name(name) => Ok(scope.plugins.join(format!("{name}.toml"))),
            [namespace, name] if is_valid_namespace(namespace) && valid_name(name) => {
                Ok(scope.plugins.join(namespace).join(format!("{name}.toml")))
            }
            _ => bail!("{id:?} is not a plugin id (NAME, or NS/NAME)"),
        };
    }
    Ok(scope.plugins.join(ROOM_POLICY))
}

/// Adds (or takes back) `origins` in the scope's `[http] allow`.
fn change(scope: &Scope, origins: &[String], allow: bool) -> anyhow::Result<u8> {
    for origin in origins {
        OriginPattern::parse(origin).map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    let file = file_of(scope)?;
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", file.display())),
    };
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} does not parse", file.display()))?;
    let http = document
        .entry("http")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .with_context(|| format!("{}: [http] is not a table", file.display()))?;
    let list = http
        .entry("allow")
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .with_context(|| format!("{}: [http] allow is not a list", file.display()))?;
    for origin in origins {
        let present = list.iter().any(|value| value.as_str() == Some(origin));
        if allow && !present {
            list.push(origin.as_str());
        } else if !allow {
            list.retain(|value| value.as_str() != Some(origin));
        }
    }
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::registry::layout::write_by_rename(&file, document.to_string().as_bytes())?;
    let now = allowed_in(&document.to_string());
    println!(
        "{}: [http] allow = [{}]",
        file.display(),
        now.iter()
            .map(|origin| format!("{origin:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(0)
}

/// The origins a policy's text allows.
fn allowed_in(text: &str) -> Vec<String> {
    text.parse::<toml_edit::DocumentMut>()
        .ok()
        .and_then(|document| {
            document.get("http")?.get("allow")?.as_array().map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Every policy file of the folder: the room's, then the top level's and
/// each namespace's, in name order.
fn policy_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let tomls = |dir: &Path| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "toml") && path.is_file())
            .collect();
        found.sort();
        found
    };
    files.extend(tomls(root));
    let mut namespaces: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("cannot read {}", root.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_dir()
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_valid_namespace)
        })
        .collect();
    namespaces.sort();
    for namespace in namespaces {
        files.extend(tomls(&namespace));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(dir: &Path, namespace: Option<&str>, plugin: Option<&str>) -> Scope {
        Scope {
            plugins: dir.to_path_buf(),
            namespace: namespace.map(str::to_string),
            plugin: plugin.map(str::to_string),
        }
    }

    #[test]
    fn grants_are_added_and_taken_back_keeping_what_the_admin_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let room = scope(dir.path(), None, None);
        change(&room, &["http://127.0.0.1:8080".into()], true).unwrap();
        change(
            &room,
            &[
                "http://127.0.0.1:8080".into(),
                "https://api.example.com".into(),
            ],
            true,
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join(ROOM_POLICY)).unwrap();
        assert_eq!(
            allowed_in(&text),
            ["http://127.0.0.1:8080", "https://api.example.com"]
        );
        assert!(crate::registry::policy::room_allow(&text).is_ok(), "{text}");

        let own = dir.path().join("ada");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(
            own.join("weather.toml"),
            "# the key is the instructor's\n[config]\napi_key = \"k\"\n",
        )
        .unwrap();
        let plugin = scope(dir.path(), None, Some("ada/weather"));
        change(&plugin, &["https://api.example.com".into()], true).unwrap();
        let text = std::fs::read_to_string(own.join("weather.toml")).unwrap();
        assert!(
            text.starts_with("# the key is the instructor's\n[config]"),
            "{text}"
        );
        change(&plugin, &["https://api.example.com".into()], false).unwrap();
        let text = std::fs::read_to_string(own.join("weather.toml")).unwrap();
        assert!(allowed_in(&text).is_empty(), "{text}");

        assert!(change(&room, &["ftp://x".into()], true).is_err());
        assert!(file_of(&scope(dir.path(), Some("../x"), None)).is_err());
        assert!(file_of(&scope(dir.path(), None, Some("a/../b"))).is_err());
        let files = policy_files(dir.path()).unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
    }
}
