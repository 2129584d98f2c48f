//! Reads a plugin's policy file, `<plugin>.toml` beside `<plugin>.wasm` (or,
//! in a namespace folder, the namespace's [`NAMESPACE_POLICY`] when the
//! plugin has none of its own), into the [`Grants`] its sandbox gets. No
//! file means no grants. A file that does
//! not parse, names an unknown key, a host variable that is not set, or a
//! directory that does not exist rejects the plugin with that reason (a
//! [`PolicyError`]).
//!
//! ```toml
//! [env]                      # environment variables
//! UNITS = "metric"           # a literal value
//! API_KEY = { from_host = "WEATHER_API_KEY" }   # or the host's variable
//!
//! [config]                   # values for the `config` import
//! base_url = "https://api.example.com"
//! api_key = { from_host = "WEATHER_API_KEY" }
//!
//! [[dirs]]                   # preopened directories
//! host = "data/users"        # relative to the policy file's folder
//! guest = "/data"
//! mode = "read-write"        # or "read-only" (the default)
//!
//! [http]                     # outbound HTTP, by scheme://host[:port]
//! allow = ["https://api.example.com", "http://127.0.0.1:*"]
//! max_requests = 32          # per call, through the runtimes' `http` import
//! max_response_kib = 8192    # the largest answer one of them may get
//!
//! [limits]                   # each defaults to the server's setting
//! timeout_ms = 5000
//! memory_mib = 32
//! fuel = 1_000_000_000       # instruction budget per call
//! max_concurrent = 4         # more calls wait briefly, then get BUSY
//! reuse_instance = 100       # opt-in: one instance serves up to 100 calls
//!
//! [source]                   # the plugin comes from an OCI registry
//! oci = "registry.example/tools/weather:1.2"   # or …@sha256:<digest>
//! poll_secs = 30             # how often a tag is asked for a new digest
//!
//! [tasks]                    # tools that run as tasks (docs/mcp.md)
//! render = "optional"        # for a client that asks; else a call
//! export = "required"        # only ever a task
//! wizard = { support = "required", input_first = true }
//! ```
//!
//! A policy with a `[source]` is a plugin by itself: no `.wasm` file sits
//! beside it (one that does is refused, so that which bytes serve is never
//! in doubt). See `registry/sources.rs`.
//!
//! `reuse_instance` trades isolation for speed (docs/security.md, "Reusing an
//! instance"): calls of the plugin may then see what earlier calls left in
//! its memory. Without it, every call gets a fresh instance.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::oci::OciError;
use crate::runtime::{BadOrigin, DirGrant, Grants, Limits, OriginPattern, OutboundLimits};

/// Why a policy file is not valid: the reason its plugin is refused with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PolicyError {
    /// It is not TOML of the policy's shape (an unknown key, say).
    #[error("the policy does not parse: {0}")]
    Parse(#[from] toml::de::Error),
    /// `[source] oci` is not a reference to an OCI registry.
    #[error("[source] oci: {0}")]
    SourceReference(#[source] OciError),
    #[error("[source] poll_secs must be greater than zero")]
    ZeroPoll,
    /// A value comes from a host environment variable that is not set.
    #[error("[{section}] {key} comes from the host variable {variable}, which is not set")]
    HostVariableUnset {
        section: &'static str,
        key: String,
        variable: String,
    },
    /// A `[[dirs]]` host folder cannot be resolved.
    #[error("[[dirs]] host {host:?} cannot be used: {source}")]
    DirUnusable {
        host: String,
        source: std::io::Error,
    },
    #[error("[[dirs]] host {0:?} is not a directory")]
    DirNotADirectory(String),
    #[error("[[dirs]] guest {0:?} must be an absolute path")]
    GuestNotAbsolute(String),
    #[error("[http] allow: {0}")]
    HttpAllow(#[source] BadOrigin),
    #[error("[limits] values must be greater than zero")]
    ZeroLimit,
    /// `[tasks]` names a tool the plugin does not list.
    #[error("[tasks] names {0:?}, which is not a tool of this plugin")]
    UnknownTaskTool(String),
    /// A task's `timeout_secs` outside 1 s to a day.
    #[error("[tasks] {0:?}: timeout_secs is {1}, not between 1 and 86400 (a day)")]
    BadTaskTimeout(String, u64),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    env: BTreeMap<String, Value>,
    #[serde(default)]
    config: BTreeMap<String, Value>,
    #[serde(default)]
    dirs: Vec<DirEntry>,
    #[serde(default)]
    http: HttpSection,
    #[serde(default)]
    limits: LimitsSection,
    /// Read by [`source`]; the grants ignore it.
    #[serde(default)]
    #[allow(dead_code)]
    source: Option<SourceSection>,
    /// Read by [`tasks`]; the grants ignore it.
    #[serde(default)]
    #[allow(dead_code)]
    tasks: BTreeMap<String, crate::registry::tools::TaskPolicy>,
}

/// The `[tasks]` of policy text: which tools (by the name the plugin
/// declares) run as tasks, `"optional"` or `"required"`, or
/// `{ support = "required", input_first = true }` for a tool that asks
/// for its input before it becomes a task; `timeout_secs` (a second to a
/// day) gives its runs their own deadline.
pub(crate) fn tasks(
    text: &str,
) -> Result<BTreeMap<String, crate::registry::tools::TaskPolicy>, PolicyError> {
    #[derive(Deserialize)]
    struct OnlyTasks {
        #[serde(default)]
        tasks: BTreeMap<String, crate::registry::tools::TaskPolicy>,
    }
    let file: OnlyTasks = toml::from_str(text)?;
    for (name, task) in &file.tasks {
        if let Some(secs) = task.timeout_secs()
            && !(1..=crate::registry::tools::MAX_TASK_TIMEOUT_SECS).contains(&secs)
        {
            return Err(PolicyError::BadTaskTimeout(name.clone(), secs));
        }
    }
    Ok(file.tasks)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSection {
    oci: String,
    poll_secs: Option<u64>,
}

/// Where a plugin comes from when its policy names an OCI source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceSpec {
    /// The reference as written (`oci://` optional).
    pub(crate) oci: String,
    /// How often a tag is asked for a new digest.
    pub(crate) poll: Duration,
}

/// How often a tag is polled when the policy does not say.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(30);

/// The `[source]` of policy text: `Ok(None)` without one, an error for a
/// section that is not valid (the plugin is refused with it).
pub(crate) fn source(text: &str) -> Result<Option<SourceSpec>, PolicyError> {
    #[derive(Deserialize)]
    struct OnlySource {
        source: Option<SourceSection>,
    }
    let file: OnlySource = toml::from_str(text)?;
    let Some(section) = file.source else {
        return Ok(None);
    };
    crate::oci::parse_reference(&section.oci).map_err(PolicyError::SourceReference)?;
    if section.poll_secs == Some(0) {
        return Err(PolicyError::ZeroPoll);
    }
    Ok(Some(SourceSpec {
        oci: section.oci,
        poll: section.poll_secs.map_or(DEFAULT_POLL, Duration::from_secs),
    }))
}

/// A literal, or the value of one of the host's environment variables.
#[derive(Deserialize)]
#[serde(untagged)]
enum Value {
    Literal(String),
    FromHost { from_host: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirEntry {
    host: String,
    guest: String,
    #[serde(default)]
    mode: DirMode,
}

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum DirMode {
    #[default]
    ReadOnly,
    ReadWrite,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    #[serde(default)]
    allow: Vec<String>,
    /// Requests one call may make through the `http` import.
    max_requests: Option<u32>,
    /// The largest answer one of them may get, in KiB.
    max_response_kib: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LimitsSection {
    timeout_ms: Option<u64>,
    memory_mib: Option<usize>,
    fuel: Option<u64>,
    max_concurrent: Option<usize>,
    reuse_instance: Option<u32>,
}

/// The room's policy, at the top of the plugin folder: what an admin
/// grants every plugin of the folder, whatever its namespace, on top of
/// its own or its namespace's policy. Only `[http] allow` (one origin for
/// a whole workshop's API exercise, in one place).
pub(crate) const ROOM_POLICY: &str = "_room.toml";

/// The room's policy file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RoomFile {
    #[serde(default)]
    http: RoomHttp,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RoomHttp {
    #[serde(default)]
    allow: Vec<String>,
}

/// The origins the room's policy allows every plugin.
pub(crate) fn room_allow(text: &str) -> Result<Vec<OriginPattern>, PolicyError> {
    let file: RoomFile = toml::from_str(text)?;
    file.http
        .allow
        .iter()
        .map(|pattern| OriginPattern::parse(pattern).map_err(PolicyError::HttpAllow))
        .collect()
}

/// A namespace's policy, in its folder: what every plugin published there
/// gets unless an admin wrote one beside the plugin itself. Publishing
/// never writes a policy, so an uploaded plugin has only what an admin
/// granted (deny by default).
pub(crate) const NAMESPACE_POLICY: &str = "_namespace.toml";

/// The policy file of a plugin file: same folder, same stem, `.toml`.
pub(crate) fn policy_path(wasm: &Path) -> std::path::PathBuf {
    wasm.with_extension("toml")
}

/// Turns policy text into grants. `folder` anchors relative directory
/// paths; `defaults` are the server's limits.
pub(crate) fn grants(text: &str, folder: &Path, defaults: Limits) -> Result<Grants, PolicyError> {
    let file: PolicyFile = toml::from_str(text)?;
    let resolve = |section: &'static str, key: &str, value: Value| match value {
        Value::Literal(text) => Ok(text),
        Value::FromHost { from_host } => {
            std::env::var(&from_host).map_err(|_| PolicyError::HostVariableUnset {
                section,
                key: key.to_string(),
                variable: from_host,
            })
        }
    };
    let env = file
        .env
        .into_iter()
        .map(|(key, value)| Ok((key.clone(), resolve("env", &key, value)?)))
        .collect::<Result<Vec<_>, PolicyError>>()?;
    let config = file
        .config
        .into_iter()
        .map(|(key, value)| Ok((key.clone(), resolve("config", &key, value)?)))
        .collect::<Result<BTreeMap<_, _>, PolicyError>>()?;
    let dirs = file
        .dirs
        .into_iter()
        .map(|entry| {
            let host = folder.join(&entry.host);
            let host = host
                .canonicalize()
                .map_err(|source| PolicyError::DirUnusable {
                    host: host.display().to_string(),
                    source,
                })?;
            if !host.is_dir() {
                return Err(PolicyError::DirNotADirectory(host.display().to_string()));
            }
            if !entry.guest.starts_with('/') {
                return Err(PolicyError::GuestNotAbsolute(entry.guest));
            }
            Ok(DirGrant {
                host,
                guest: entry.guest,
                writable: entry.mode == DirMode::ReadWrite,
            })
        })
        .collect::<Result<Vec<_>, PolicyError>>()?;
    let http_allow = file
        .http
        .allow
        .iter()
        .map(|pattern| OriginPattern::parse(pattern).map_err(PolicyError::HttpAllow))
        .collect::<Result<Vec<_>, PolicyError>>()?;
    let limits = &file.limits;
    if file.http.max_requests == Some(0) || file.http.max_response_kib == Some(0) {
        return Err(PolicyError::ZeroLimit);
    }
    if limits.max_concurrent == Some(0)
        || limits.reuse_instance == Some(0)
        || limits.memory_mib == Some(0)
        || limits.timeout_ms == Some(0)
    {
        return Err(PolicyError::ZeroLimit);
    }
    Ok(Grants {
        env,
        config,
        dirs,
        http_allow: Arc::new(http_allow),
        outbound: {
            let default = OutboundLimits::default();
            OutboundLimits {
                max_requests: file.http.max_requests.unwrap_or(default.max_requests),
                max_response_bytes: file
                    .http
                    .max_response_kib
                    .map_or(default.max_response_bytes, |kib| kib.saturating_mul(1024)),
            }
        },
        limits: Limits {
            timeout: limits
                .timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            memory_bytes: limits
                .memory_mib
                .map_or(defaults.memory_bytes, |mib| mib.saturating_mul(1024 * 1024)),
        },
        fuel: limits.fuel,
        max_concurrent: limits.max_concurrent,
        reuse_instance: limits.reuse_instance,
        source: None,
    })
}

/// What a plugin is granted, for `GET /plugins` and `toolhost check`.
/// Names only: the values of environment variables and config entries may
/// be secrets, and are never shown.
pub(crate) fn describe(grants: &Grants) -> serde_json::Value {
    let dirs: Vec<serde_json::Value> = grants
        .dirs
        .iter()
        .map(|dir| {
            serde_json::json!({
                "host": dir.host.display().to_string(),
                "guest": dir.guest,
                "mode": if dir.writable { "read-write" } else { "read-only" },
            })
        })
        .collect();
    let http: Vec<String> = grants
        .http_allow
        .iter()
        .map(|pattern| {
            let port = pattern
                .port
                .map_or("*".to_string(), |port| port.to_string());
            let host = if pattern.host.contains(':') {
                format!("[{}]", pattern.host)
            } else {
                pattern.host.clone()
            };
            format!("{}://{host}:{port}", pattern.scheme)
        })
        .collect();
    serde_json::json!({
        "env": grants.env.iter().map(|(key, _)| key).collect::<Vec<_>>(),
        "config": grants.config.keys().collect::<Vec<_>>(),
        "dirs": dirs,
        "httpAllow": http,
        "limits": {
            "timeoutMs": grants.limits.timeout.as_millis(),
            "memoryBytes": grants.limits.memory_bytes,
            "fuel": grants.fuel,
            "maxConcurrent": grants.max_concurrent,
            "reuseInstance": grants.reuse_instance,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Limits = Limits {
        timeout: Duration::from_secs(10),
        memory_bytes: 64 << 20,
    };

    #[test]
    fn an_empty_policy_grants_nothing() {
        let grants = grants("", Path::new("."), DEFAULTS).unwrap();
        assert!(grants.env.is_empty() && grants.config.is_empty() && grants.dirs.is_empty());
        assert!(grants.http_allow.is_empty());
        assert_eq!(grants.limits.timeout, DEFAULTS.timeout);
    }

    #[test]
    fn a_full_policy_is_resolved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        // SAFETY: set before any thread of this test reads the environment.
        unsafe { std::env::set_var("TOOLHOST_TEST_SECRET", "hunter2") };
        let text = r#"
            [env]
            MODE = "test"
            [config]
            api_key = { from_host = "TOOLHOST_TEST_SECRET" }
            [[dirs]]
            host = "data"
            guest = "/data"
            mode = "read-write"
            [http]
            allow = ["http://127.0.0.1:*"]
            [limits]
            timeout_ms = 250
            memory_mib = 8
            fuel = 1000
            max_concurrent = 2
        "#;
        let grants = grants(text, dir.path(), DEFAULTS).unwrap();
        assert_eq!(grants.env, vec![("MODE".to_string(), "test".to_string())]);
        assert_eq!(grants.config["api_key"], "hunter2");
        assert!(grants.dirs[0].writable && grants.dirs[0].guest == "/data");
        assert!(grants.http_allow[0].matches("http", "127.0.0.1", 9));
        assert_eq!(grants.limits.timeout, Duration::from_millis(250));
        assert_eq!(grants.limits.memory_bytes, 8 << 20);
        assert_eq!((grants.fuel, grants.max_concurrent), (Some(1000), Some(2)));
    }

    #[test]
    fn faults_are_named() {
        let reason = |text: &str| {
            grants(text, Path::new("/nonexistent"), DEFAULTS)
                .unwrap_err()
                .to_string()
        };
        assert!(reason("[env\n").contains("does not parse"));
        assert!(reason("[network]\nall = true").contains("unknown field"));
        assert!(
            reason("[config]\nk = { from_host = \"TOOLHOST_SURELY_UNSET\" }").contains("not set")
        );
        assert!(reason("[[dirs]]\nhost = \"missing\"\nguest = \"/d\"").contains("cannot be used"));
        assert!(reason("[http]\nallow = [\"ftp://x\"]").contains("only http and https"));
        assert!(reason("[limits]\nmax_concurrent = 0").contains("greater than zero"));
        assert!(reason("[source]\noci = \"r.example/x:1\"\nlayers = 2").contains("unknown field"));
    }

    #[test]
    fn a_source_is_read_and_checked() {
        assert_eq!(source("[limits]\nfuel = 1").unwrap(), None);
        let spec = source("[source]\noci = \"oci://127.0.0.1:5000/tools/echo:1\"\npoll_secs = 2")
            .unwrap()
            .unwrap();
        assert_eq!(spec.poll, Duration::from_secs(2));
        assert_eq!(
            source("[source]\noci = \"r.example/x:1\"")
                .unwrap()
                .unwrap()
                .poll,
            DEFAULT_POLL
        );
        assert!(
            source("[source]\noci = \"echo:1\"")
                .unwrap_err()
                .to_string()
                .contains("registry")
        );
        assert!(source("[source]\noci = \"r.example/x:1\"\npoll_secs = 0").is_err());
        // The grants accept a policy with a source.
        grants(
            "[source]\noci = \"r.example/x:1\"",
            Path::new("."),
            DEFAULTS,
        )
        .unwrap();
    }
}
