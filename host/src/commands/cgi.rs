//! `toolhost cgi`: answers one CGI/1.1 request. The adapter itself (CGI
//! environment in, `Status:` and JSON out) is `front/cgi.rs`; this command
//! owns the flags and loads the folder.

use clap::Args;

use super::options::{HostOptions, HttpOptions};
use crate::Host;

#[derive(Args)]
pub(super) struct CgiOptions {
    #[command(flatten)]
    host: HostOptions,
    #[command(flatten)]
    http: HttpOptions,
}

impl CgiOptions {
    pub(super) async fn run(self) -> anyhow::Result<()> {
        Host::answer_cgi(
            self.host.open_once().await,
            self.host.text_format,
            self.http.max_body_bytes,
        )
        .await
    }
}
