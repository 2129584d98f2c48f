//! The `toolhost` binary: parses the command line and runs it. Everything
//! else is the library (`lib.rs` has the map).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    toolhost::commands::Cli::parse().run()
}
