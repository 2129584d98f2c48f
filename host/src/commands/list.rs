//! `toolhost list`: loads the folder the way the server does and prints
//! every plugin, its state and its tools (a table, or with `--json` the
//! `GET /plugins` report).

use clap::Args;

use super::options::HostOptions;
use crate::registry::report::PluginReport;

#[derive(Args)]
pub(super) struct ListOptions {
    #[command(flatten)]
    host: HostOptions,
    /// Print JSON (the `GET /plugins` report) instead of a table.
    #[arg(long)]
    json: bool,
}

impl ListOptions {
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        let report = self.host.open_once().await?.plugins();
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
            return Ok(0);
        }
        if report.plugins.is_empty() {
            println!("no plugins in {}", self.host.plugins().display());
        }
        for plugin in &report.plugins {
            print!("{}", table_row(plugin));
        }
        Ok(0)
    }
}

/// One plugin as a table row, and its rejection's reason under it.
fn table_row(plugin: &PluginReport) -> String {
    let mut row = format!(
        "{:<20} {:<9} {}\n",
        plugin.id,
        plugin.state.as_str(),
        plugin.tools.join(", ")
    );
    if let Some(reason) = &plugin.reason {
        row.push_str(&format!("{:<20} {:<9} reason: {reason}\n", "", ""));
    }
    row
}
