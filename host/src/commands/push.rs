//! `toolhost push FILE.wasm | PROJECT | app.py | app.js --server URL
//! --token T [--name N]`: publishes onto someone else's server, into the
//! token holder's namespace (the server says whose token it is and which
//! source it builds, `GET /me`): Python or JavaScript source when the
//! server builds that language (no toolchain here), else a component,
//! building a project first; prints the build's stages, then the tools
//! live under their served names, or the author's line of a failed build,
//! or the server's reason for refusing them. `--delete NAME`
//! removes one's own plugin. An attendee never needs the server's
//! filesystem. The client that speaks to the server is `remote.rs`'s,
//! which `toolhost dev --server` uses too.
//!
//! `toolhost push FILE|PROJECT oci://REGISTRY/REPO:TAG [--sign-key KEY]`
//! pushes to an OCI registry instead (`push/oci.rs`), for servers whose
//! policies name that source.

mod oci;

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::project::{Project, other_modules, plugin_id_of, tool_folder_zip};
use super::remote::{Outcome, Publisher, ServerOptions};
use crate::builds::recipe::Language;

#[derive(Args)]
pub(super) struct PushOptions {
    /// A component (`.wasm`), or a plugin project to build first (Rust,
    /// Python `app.py` or JavaScript `app.js`).
    #[arg(required_unless_present = "delete")]
    source: Option<PathBuf>,
    /// Push to an OCI registry instead of a server:
    /// oci://REGISTRY/REPOSITORY:TAG (plain HTTP for a loopback registry
    /// only; credentials from docker's config.json).
    #[arg(value_name = "oci://REGISTRY/REPO:TAG", conflicts_with_all = ["delete", "name"])]
    target: Option<String>,
    /// With an OCI target: sign what is pushed with this private key, as
    /// `cosign sign --key` does (cosign's encrypted key, password from
    /// COSIGN_PASSWORD, or an unencrypted PKCS#8 PEM).
    #[arg(long, value_name = "KEY", requires = "target")]
    sign_key: Option<PathBuf>,
    /// With an OCI target: registry credentials in docker's config.json
    /// format [default: $DOCKER_CONFIG/config.json or ~/.docker/config.json].
    #[arg(
        long,
        env = "TOOLHOST_REGISTRY_CONFIG",
        value_name = "FILE",
        requires = "target"
    )]
    registry_config: Option<PathBuf>,
    #[command(flatten)]
    server: ServerOptions,
    /// The plugin's name on the server [default: the file's or project's].
    #[arg(long)]
    name: Option<String>,
    /// Remove this plugin of yours from the server instead.
    #[arg(long, value_name = "NAME", conflicts_with = "name")]
    delete: Option<String>,
}

impl PushOptions {
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        if let Some(target) = &self.target {
            let source = self
                .source
                .as_deref()
                .context("name a component or a project")?;
            let (wasm, _) = built(source).await?;
            return oci::push(
                &wasm,
                target,
                self.sign_key.as_deref(),
                self.registry_config,
            )
            .await;
        }
        let publisher = Publisher::connect(&self.server).await?;
        if let Some(name) = &self.delete {
            publisher.remove(name).await?;
            println!("removed {}", publisher.plugin_id(name));
            return Ok(0);
        }
        let source = self.source.context("name a component or a project")?;
        if let Some((zip, default_name)) = folder_to_send(&source, &publisher)? {
            let name = self.name.clone().unwrap_or(default_name);
            println!(
                "sending {} as a tool folder ({})",
                source.display(),
                publisher.plugin_id(&name)
            );
            let outcome = publisher.publish_folder(&name, zip).await?;
            return Ok(report(outcome, &publisher).await);
        }
        let outcome = match source_to_send(&source, &publisher).await? {
            Some((language, text, default_name)) => {
                let name = self.name.unwrap_or(default_name);
                println!(
                    "sending {} to be built on the server ({})",
                    language.source_file(),
                    publisher.plugin_id(&name)
                );
                publisher.publish_source(&name, language, text).await?
            }
            None => {
                let (wasm, default_name) = built(&source).await?;
                let name = self.name.unwrap_or(default_name);
                let bytes = std::fs::read(&wasm)
                    .with_context(|| format!("cannot read {}", wasm.display()))?;
                publisher.publish(&name, bytes).await?
            }
        };
        Ok(report(outcome, &publisher).await)
    }
}

/// What the server made of a publish, printed; the exit status.
async fn report(outcome: Outcome, publisher: &Publisher) -> u8 {
    match outcome {
        Outcome::Live(report, _)
            if report.state == crate::registry::report::PluginState::Pending =>
        {
            println!(
                "held for an admin's approval ({}): {}",
                report.id,
                report
                    .reason
                    .as_deref()
                    .unwrap_or("its definitions are new")
            );
            0
        }
        Outcome::Live(report, build) => {
            println!("live: {} ({})", report.tools.join(", "), report.id);
            for note in build
                .iter()
                .flat_map(|build| build["notes"].as_array().cloned().unwrap_or_default())
            {
                println!("note: {}", note.as_str().unwrap_or_default());
            }
            publisher.print_usage(&report).await;
            0
        }
        Outcome::Refused(reason) => {
            println!("refused; what served before serves on:\n  {reason}");
            1
        }
        Outcome::BuildFailed { headline, log } => {
            println!("the build failed; what served before serves on:\n  {headline}");
            if !log.trim().is_empty() {
                println!("\nthe build's log (its end):\n{}", log.trim_end());
            }
            1
        }
    }
}

/// A Python project of more than `app.py` (its own modules, data files),
/// as a tool folder to send (`project::tool_folder_zip`), with the
/// plugin's default name; `None` for anything else, or a server that takes
/// no Python source.
fn folder_to_send(
    source: &std::path::Path,
    publisher: &super::remote::Publisher,
) -> anyhow::Result<Option<(Vec<u8>, String)>> {
    if !source.is_dir()
        || Language::detect(source) != Some(Language::Python)
        || other_modules(source, Language::Python).is_empty()
        || !publisher.builds(Language::Python)
    {
        return Ok(None);
    }
    let bytes = tool_folder_zip(source)?;
    let name = std::path::absolute(source)?
        .file_name()
        .map(|dir| plugin_id_of(&dir.to_string_lossy()))
        .unwrap_or_default();
    Ok(Some((bytes, name)))
}

/// The source to send when the server builds it: a Python or JavaScript
/// project (its `app.py` or `app.js`), or that file itself; with the
/// plugin's default name. `None`: build here and send the component.
async fn source_to_send(
    source: &std::path::Path,
    publisher: &super::remote::Publisher,
) -> anyhow::Result<Option<(Language, String, String)>> {
    let (language, file, name) = if source.is_dir() {
        match Language::detect(source) {
            Some(language @ (Language::Python | Language::JavaScript | Language::TypeScript)) => {
                let project = Project::inspect(source).await?;
                let more = other_modules(source, language);
                if !more.is_empty() && publisher.builds(language) {
                    // The server builds one file; a project of several is
                    // built here, with its toolchain, as before.
                    println!(
                        "{} has modules besides {} ({}): the server builds one file, so it is \
                         built here",
                        source.display(),
                        language.source_file(),
                        more.join(", ")
                    );
                    return Ok(None);
                }
                (language, source.join(language.source_file()), project.id)
            }
            _ => return Ok(None),
        }
    } else {
        let language = match source.extension().and_then(|ext| ext.to_str()) {
            Some("py") => Language::Python,
            Some("js" | "mjs") => Language::JavaScript,
            Some("ts") => Language::TypeScript,
            _ => return Ok(None),
        };
        let stem = source
            .file_stem()
            .map(|stem| plugin_id_of(&stem.to_string_lossy()))
            .unwrap_or_default();
        // `app.py` is named after its folder, as a project is.
        let name = if stem == "app" {
            std::path::absolute(source)?
                .parent()
                .and_then(|dir| dir.file_name())
                .map(|dir| plugin_id_of(&dir.to_string_lossy()))
                .unwrap_or(stem)
        } else {
            stem
        };
        if !publisher.builds(language) {
            anyhow::bail!(
                "this server does not build {} source: push the project's folder (built here \
                 with its toolchain) or a built component",
                language.as_str()
            );
        }
        (language, source.to_path_buf(), name)
    };
    if !publisher.builds(language) {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    Ok(Some((language, text, name)))
}

/// The component to push: the file, or a project built first; with the
/// plugin's default name.
async fn built(source: &std::path::Path) -> anyhow::Result<(PathBuf, String)> {
    if source.is_dir() {
        let project = Project::inspect(source).await?;
        println!("building {} ...", project.id);
        let built = project
            .build()
            .await
            .map_err(|output| anyhow::anyhow!("the build failed:\n{output}"))?;
        Ok((built, project.id.clone()))
    } else {
        let stem = source
            .file_stem()
            .map(|stem| plugin_id_of(&stem.to_string_lossy()))
            .unwrap_or_default();
        Ok((source.to_path_buf(), stem))
    }
}
