//! The call path every front shares: [`invoke`] looks a tool up, checks
//! its arguments, calls it and hands the outcome to the one normalizer
//! ([`envelope`]); [`errors`] is the one table of error codes and their
//! HTTP, JSON-RPC and exit statuses; [`render`] turns structured data into
//! text; [`accounting`] is what a call cost, returned with its result;
//! [`catalog`] is the same path for resources, prompts and completion.

pub mod accounting;
pub(crate) mod catalog;
pub mod envelope;
pub(crate) mod errors;
pub mod invoke;
pub(crate) mod render;
