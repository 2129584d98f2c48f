//! `toolhost cgi`: answers one CGI/1.1 request. The adapter itself (CGI
//! environment in, `Status:` and JSON out) is `front/cgi.rs`; this command
//! owns the flags and loads the folder.

use clap::Args;

use super::options::{HostOptions, HttpOptions};
use crate::front::cgi;
use crate::front::rest::RestSettings;

#[derive(Args)]
pub(super) struct CgiOptions {
    #[command(flatten)]
    host: HostOptions,
    #[command(flatten)]
    http: HttpOptions,
}

impl CgiOptions {
    pub(super) async fn run(self) -> anyhow::Result<()> {
        let settings = RestSettings {
            max_body_bytes: self.http.max_body_bytes,
            text_format: self.host.text_format,
        };
        cgi::run(self.host.loaded_registry().await, settings).await
    }
}
