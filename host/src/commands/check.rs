//! `toolhost check FILE`: loads one file exactly as the server would,
//! without serving it, and prints its tools and grants (exit 0) or why it
//! would be rejected (exit 1). Input-schema constructs a major LLM API
//! refuses are printed as `warning:` lines, with the tool and the path;
//! they do not change the exit code.

use std::path::PathBuf;

use clap::Args;

use super::options::HostOptions;
use crate::registry::report::PluginReport;
use crate::{Host, HostConfig};

#[derive(Args)]
pub(super) struct CheckOptions {
    #[command(flatten)]
    host: HostOptions,
    file: PathBuf,
}

impl CheckOptions {
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        let file = &self.file;
        let mut config = self.host.config(HostConfig::DEBOUNCE).once();
        config.folder = None;
        let host = Host::open(config).await?;
        match host.check(file).await {
            Ok(plugin) => {
                let report = PluginReport::loaded(&plugin);
                println!("{}: ok, {} tool(s)", file.display(), report.tools.len());
                for tool in &plugin.tools {
                    println!("  {:<24} {}", tool.name, tool.description);
                }
                let catalog = &plugin.catalog;
                for resource in &catalog.resources {
                    println!("  resource {}", resource.uri);
                }
                for template in &catalog.templates {
                    println!("  resource template {}", template.template);
                }
                for prompt in &catalog.prompts {
                    println!("  prompt {}", prompt.name);
                }
                println!(
                    "granted: {}",
                    serde_json::to_string_pretty(&report.granted)?
                );
                for warning in &report.schema_warnings {
                    println!("warning: {warning}");
                }
                Ok(0)
            }
            Err(reason) => {
                println!("{}: rejected: {reason}", file.display());
                Ok(1)
            }
        }
    }
}
