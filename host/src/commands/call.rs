//! `toolhost call`: loads the folder the way the server does, calls one
//! tool once and prints its envelope; the exit status says how it went.

use clap::Args;

use super::options::HostOptions;
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::call::invoke;

#[derive(Args)]
pub(super) struct CallOptions {
    #[command(flatten)]
    host: HostOptions,
    /// The tool's name.
    tool: String,
    /// The arguments as a JSON object; `-` reads them from stdin.
    #[arg(default_value = "{}")]
    arguments: String,
}

impl CallOptions {
    /// Prints the envelope and returns the exit status. A host failure (an
    /// unreadable plugin folder, say) is printed as a HOST_ERROR envelope
    /// too, so a script always gets JSON.
    pub(super) async fn run(self) -> anyhow::Result<u8> {
        let host = match self.host.open_once().await {
            Ok(host) => host,
            Err(error) => {
                let envelope =
                    Envelope::host_error(ErrorCode::HostError, format!("{error:#}"), None);
                println!("{}", serde_json::to_string_pretty(&envelope)?);
                return Ok(ErrorCode::HostError.exit_code());
            }
        };
        let arguments = if self.arguments == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
            text
        } else {
            self.arguments
        };
        let envelope = match invoke::parse_arguments(arguments.as_bytes()) {
            Ok(arguments) => {
                invoke::call_tool(
                    host.registry(),
                    host.calls(),
                    &self.tool,
                    arguments,
                    self.host.text_format,
                    None,
                    invoke::Front::Cli,
                    &crate::registry::view::View::all(),
                )
                .await
            }
            Err(envelope) => envelope,
        };
        println!("{}", serde_json::to_string_pretty(&envelope)?);
        Ok(exit_code(&envelope))
    }
}

/// 0 success; 1 the tool reported an error; otherwise the host code's.
fn exit_code(envelope: &Envelope) -> u8 {
    match &envelope.error {
        None => 0,
        Some(error) => error.host_code.map_or(1, |code| code.exit_code()),
    }
}
