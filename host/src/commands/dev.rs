//! `toolhost dev [PROJECT]`: edit, save, live. Watches a plugin project's
//! sources, rebuilds it on every save (`cargo build --release --target
//! wasm32-wasip2`), drops the component into the served folder atomically
//! (write beside, then rename), and prints what became of it: the build
//! error, or the tools now live, or the exact reason the host rejected the
//! new version while the old one keeps serving.
//!
//! Which server: if a toolhost already answers at `--listen` (default
//! 127.0.0.1:8000), the component goes into the folder that server serves
//! (`GET /plugins` says which) and the load result is read back from that
//! server's `/plugins`; otherwise `dev` opens a [`Host`] itself, exactly as
//! `toolhost serve` would with the same flags (`--plugins`, default
//! `plugins`), serves it, and waits on the host's load events. A folder
//! given with `--plugins` (or `TOOLHOST_PLUGINS`) is always the one built
//! into: when the server at `--listen` serves another, `dev` serves that
//! folder itself on a free port of the same address and says so. Either
//! way what `dev` prints is what callers get.
//!
//! What counts as an edit: a write, create, rename or removal of a `.rs`,
//! `.wit` or `Cargo.toml` file: `Cargo.toml` and `build.rs` at the top of
//! the project, anything under `src/` and `wit/` (hidden files aside).
//! Reads (cargo's own) never count and `target/` is never watched, so a
//! build never triggers the next one.
//!
//! Ctrl-C stops it; when it serves itself, it stops with its server.

mod session;
mod target;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use self::session::{say, watch_and_build};
use self::target::{DevServer, Target};
use super::project::Project;
use super::remote::{Publisher, ServerOptions};
use super::serve::{DEFAULT_LISTEN, ServeOptions};
use crate::Host;

#[derive(Args)]
pub(super) struct DevOptions {
    /// The plugin project: a Cargo crate with `crate-type = ["cdylib"]`, or
    /// a folder with `app.py` (Python) or `app.js` (JavaScript).
    #[arg(default_value = ".")]
    project: PathBuf,
    /// Publish each build onto this toolhost server (into your namespace,
    /// with `--token`), instead of serving or writing a folder.
    #[arg(long = "server", env = "TOOLHOST_SERVER")]
    server_url: Option<String>,
    /// Every `serve` flag; they apply when `dev` serves itself.
    #[command(flatten)]
    serve: ServeOptions,
}

impl DevOptions {
    pub(super) async fn run(mut self) -> anyhow::Result<u8> {
        // Ctrl-C ends `dev` at once, mid-build too (and with it the server
        // it runs, if any).
        tokio::spawn(async {
            let _ = tokio::signal::ctrl_c().await;
            std::process::exit(0);
        });
        let project = Project::inspect(&self.project).await?;
        if let Some(url) = self.server_url.clone() {
            let options = ServerOptions {
                url: Some(url),
                token: self.serve.token.clone(),
            };
            let publisher = Publisher::connect(&options).await?;
            say(format!(
                "publishing {} as {} on {}",
                project.id,
                publisher.plugin_id(&project.id),
                options.url.as_deref().unwrap_or_default()
            ));
            return watch_and_build(project, PathBuf::new(), Target::Publish(publisher), None)
                .await;
        }
        let address = self.serve.listen.unwrap_or(DEFAULT_LISTEN.parse()?);
        let mut server = DevServer {
            base: format!("http://{address}"),
            token: self.serve.token.clone(),
        };
        let mut serving = None;
        let asked_for = self.serve.host.plugins_given.as_deref().map(absolute);
        let remote = match (server.folder().await, asked_for) {
            (Some(folder), Some(Ok(asked))) if !same_folder(&folder, &asked) => {
                // The folder asked for is not the one that server serves:
                // serve it here, beside that server.
                let free = std::net::TcpListener::bind((address.ip(), 0))?.local_addr()?;
                say(format!(
                    "toolhost at {} serves {}, not {}: serving {} on http://{free} instead",
                    server.base,
                    folder.display(),
                    asked.display(),
                    asked.display()
                ));
                self.serve.listen = Some(free);
                server.base = format!("http://{free}");
                None
            }
            (found, _) => found,
        };
        let (folder, target) = match remote {
            Some(folder) => {
                say(format!(
                    "toolhost at {} serves {}: {}.wasm goes there",
                    server.base,
                    folder.display(),
                    project.id
                ));
                (folder, Target::Remote(server))
            }
            None => {
                let folder = absolute(&self.serve.host.plugins())?;
                std::fs::create_dir_all(&folder)
                    .with_context(|| format!("cannot create {}", folder.display()))?;
                self.serve.check()?;
                let host = Host::open(self.serve.host_config()).await?;
                let served = host.clone();
                let serve = self.serve;
                let task = tokio::spawn(async move { serve.serve(served).await });
                say(format!(
                    "serving {} on {} (REST at /, MCP at /mcp); Ctrl-C stops",
                    folder.display(),
                    server.base
                ));
                serving = Some(task);
                (folder, Target::Local { host, server })
            }
        };

        watch_and_build(project, folder, target, serving).await
    }
}

/// Whether two paths name the same folder (one may not exist yet).
fn same_folder(a: &Path, b: &Path) -> bool {
    let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    canonical(a) == canonical(b)
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}
