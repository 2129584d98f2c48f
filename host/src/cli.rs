//! The one-shot commands: `call`, `list` and `check`. They load the folder
//! (or one file) the way the server does and print what they find; results
//! go to stdout, logs to stderr.

use std::path::Path;

use crate::HostOptions;
use crate::envelope::Envelope;
use crate::errors::ErrorCode;
use crate::invoke;
use crate::loader;

/// `toolhost call`: prints the envelope; the exit status says how it went.
/// A host failure (an unreadable plugin folder, say) is printed as a
/// HOST_ERROR envelope too, so a script always gets JSON.
pub async fn call(host: &HostOptions, tool: &str, arguments: &str) -> anyhow::Result<u8> {
    let registry = match host.loaded_registry().await {
        Ok(registry) => registry,
        Err(error) => {
            let envelope = Envelope::host_error(ErrorCode::HostError, format!("{error:#}"), None);
            println!("{}", serde_json::to_string_pretty(&envelope)?);
            return Ok(ErrorCode::HostError.exit_code());
        }
    };
    let arguments = if arguments == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        text
    } else {
        arguments.to_string()
    };
    let envelope = match invoke::parse_arguments(arguments.as_bytes()) {
        Ok(arguments) => {
            invoke::call_tool(&registry, tool, arguments, host.text_format, None).await
        }
        Err(envelope) => envelope,
    };
    println!("{}", serde_json::to_string_pretty(&envelope)?);
    Ok(exit_code(&envelope))
}

fn exit_code(envelope: &Envelope) -> u8 {
    match &envelope.error {
        None => 0,
        Some(error) => error.host_code.map_or(1, |code| code.exit_code()),
    }
}

/// `toolhost list`: a table of plugins and their tools, or the JSON report.
pub async fn list(host: &HostOptions, json: bool) -> anyhow::Result<u8> {
    let registry = host.loaded_registry().await?;
    let report = registry.plugins_report();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    let plugins = report["plugins"].as_array().cloned().unwrap_or_default();
    if plugins.is_empty() {
        println!("no plugins in {}", host.plugins.display());
    }
    for plugin in plugins {
        let state = plugin["state"].as_str().unwrap_or("?");
        let tools: Vec<&str> = plugin["tools"]
            .as_array()
            .map(|tools| tools.iter().filter_map(|t| t.as_str()).collect())
            .unwrap_or_default();
        println!(
            "{:<20} {:<9} {}",
            plugin["id"].as_str().unwrap_or("?"),
            state,
            tools.join(", ")
        );
        if let Some(reason) = plugin["reason"].as_str() {
            println!("{:<20} {:<9} reason: {reason}", "", "");
        }
    }
    Ok(0)
}

/// `toolhost check`: 0 and the tool list when the file would load, 1 and
/// the reason when it would be rejected.
pub async fn check(host: &HostOptions, file: &Path) -> anyhow::Result<u8> {
    let id = file
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("plugin")
        .to_string();
    let registry = host.registry()?;
    let verdict = match loader::read_source(file).await {
        Err(error) => Err(format!("cannot read {}: {error}", file.display())),
        Ok(source) => {
            loader::load(
                registry.runtime(),
                registry.list_limits(),
                &id,
                file,
                source,
            )
            .await
        }
    };
    match verdict {
        Ok(plugin) => {
            println!("{}: ok, {} tool(s)", file.display(), plugin.tools.len());
            for tool in &plugin.tools {
                println!("  {:<24} {}", tool.name, tool.description);
            }
            let granted = crate::policy::describe(&plugin.grants);
            println!("granted: {}", serde_json::to_string_pretty(&granted)?);
            Ok(0)
        }
        Err(reason) => {
            println!("{}: rejected: {reason}", file.display());
            Ok(1)
        }
    }
}
