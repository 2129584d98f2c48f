//! `toolhost serve`'s build flags: which published source the server
//! builds (`--builds python,js`; off by default), and each build's limits.
//! What they do is `builds/`'s.

use clap::Args;

use crate::builds::BuildSettings;

#[derive(Args, Debug, Clone)]
pub(super) struct BuildOptions {
    /// Build published source on this server: `python`, `js` (or both,
    /// comma-separated). Off by default. Their toolchains run the author's
    /// code inside wasm; Rust is never built here.
    #[arg(long, env = "TOOLHOST_BUILDS", value_delimiter = ',')]
    builds: Vec<String>,
    /// How long one build may run, in seconds, before it is stopped.
    #[arg(long, env = "TOOLHOST_BUILD_TIMEOUT_SECS", default_value_t = BuildSettings::DEFAULT_TIMEOUT_SECS, value_parser = clap::value_parser!(u64).range(1..))]
    build_timeout_secs: u64,
    /// How much resident memory one build's processes may hold, in MiB.
    #[arg(long, env = "TOOLHOST_BUILD_MEMORY_MIB", default_value_t = BuildSettings::DEFAULT_MEMORY_MIB, value_parser = clap::value_parser!(u64).range(64..))]
    build_memory_mib: u64,
    /// How much of a build's output is kept (and answered), in KiB.
    #[arg(long, env = "TOOLHOST_BUILD_LOG_KIB", default_value_t = BuildSettings::DEFAULT_LOG_KIB as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    build_log_kib: u64,
    /// The largest source a publish may send to be built, in KiB.
    #[arg(long, env = "TOOLHOST_MAX_SOURCE_KIB", default_value_t = BuildSettings::DEFAULT_MAX_SOURCE_KIB as u64, value_parser = clap::value_parser!(u64).range(1..=16384))]
    max_source_kib: u64,
    /// How many builds run at once [default: one per core].
    #[arg(long, env = "TOOLHOST_MAX_BUILDS", value_parser = clap::value_parser!(u32).range(1..))]
    max_builds: Option<u32>,
    /// How much one build may write in all (its own tmpfs or folder, the
    /// component included; each file counts at least 4 KiB), in MiB.
    #[arg(long, env = "TOOLHOST_BUILD_DISK_MIB", default_value_t = BuildSettings::DEFAULT_DISK_MIB, value_parser = clap::value_parser!(u64).range(16..))]
    build_disk_mib: u64,
    /// How long a build holds its slot, in seconds; past it, it gives the
    /// slot to the next build in line and goes on beside it at the lowest
    /// CPU priority.
    #[arg(long, env = "TOOLHOST_BUILD_SLICE_SECS", default_value_t = BuildSettings::DEFAULT_SLICE_SECS, value_parser = clap::value_parser!(u64).range(1..))]
    build_slice_secs: u64,
    /// Build even where bubblewrap cannot contain a build (not installed,
    /// not Linux, user namespaces refused): the toolchain then runs as this
    /// server's user and sees its files. Off by default: such a server
    /// refuses builds and says why (docs/security.md).
    #[arg(long, env = "TOOLHOST_BUILDS_UNCONTAINED")]
    builds_uncontained: bool,
}

impl BuildOptions {
    pub(super) fn settings(&self) -> BuildSettings {
        BuildSettings {
            languages: self.builds.clone(),
            timeout: std::time::Duration::from_secs(self.build_timeout_secs),
            memory_bytes: self.build_memory_mib << 20,
            log_bytes: (self.build_log_kib as usize) << 10,
            max_source_bytes: (self.max_source_kib as usize) << 10,
            slots: self
                .max_builds
                .map_or_else(BuildSettings::default_slots, |n| n as usize),
            disk_bytes: self.build_disk_mib << 20,
            slice: std::time::Duration::from_secs(self.build_slice_secs),
            uncontained: self.builds_uncontained,
        }
    }
}
