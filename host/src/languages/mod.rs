//! What a language is, in one place: the three plugin languages (one
//! [`Language`] type, what each is called, which files and media types are
//! its own), what a source imports (`imports.rs`, one scanner per
//! language), the author's line in what a toolchain or a runtime printed
//! (`authors_line.rs`, one reader), and the embedded runtimes that run a
//! Python or JavaScript source with no build (`runtimes.rs`: loading, and
//! the modules each carries). Every room that needs a language asks here;
//! this room asks no other.

pub mod authors_line;
pub mod folder;
pub mod imports;
mod language;
pub mod packages;
pub mod runtimes;

pub use imports::{Import, imports, outside, outside_with};
pub use language::Language;
pub use runtimes::{NoRuntime, RuntimeComponent};
