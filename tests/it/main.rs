//! The integration tests, as one binary: one link of the host library
//! instead of one per file, the guest fixtures built once per run
//! (`support` builds each plugin workspace once per process), and every
//! module's tests free to run side by side. Each module tests one area
//! over real sockets, on servers started with `toolhost serve`'s flags in
//! this process (`support::Server`'s `start`), or on the real binary
//! (its `process`) where a test needs the process: it signals it, reads
//! its log, measures it, gives it environment variables or a working
//! directory, or kills one replica of several.

mod approvals;
mod asking;
mod auth;
mod builds;
mod cli;
mod clients;
mod containment;
mod dashboard;
mod deploy;
mod dev;
mod events;
mod hostile;
mod images;
mod isolation;
mod languages;
mod limits;
mod mcp;
mod metrics;
mod oauth;
mod outbound;
mod packages;
mod protocol;
mod publish;
mod reload;
mod replicas;
mod resources;
mod rest;
mod sandbox;
mod sets;
mod shared;
mod shares;
mod skills;
mod sources;
mod support;
mod tasks;
mod tokens_cmd;
mod traces;
mod views;
mod workshop;
