//! Turns one plugin file into a [`LoadedPlugin`], or a [`LoadError`] saying
//! why it is not one. Used by the registry (startup scan and hot reload) and by
//! `toolhost check`, so both judge a file the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::registry::policy;
use crate::registry::portability::{self, SchemaWarning};
use crate::registry::tools::{self, Tool, ToolListError, ToolListLimits};
use crate::runtime::{CallFailure, CompileError, CompiledPlugin, Grants, Runtime};

/// Files larger than this are refused before they are read whole: a plugin
/// folder is no place for a gigabyte of anything.
pub(crate) const MAX_PLUGIN_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Why a plugin file was not put in service. `Display` is the sentence
/// `/plugins`, `toolhost list`, `toolhost check` and the MCP warning show.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read (it is too large, say).
    #[error("cannot read {}: {error}", file.display())]
    Unreadable {
        file: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// Its policy file is not valid.
    #[error("{}: {reason}", file.display())]
    Policy { file: PathBuf, reason: String },
    /// The compile could not start or did not finish (the host's fault).
    #[error("{0}")]
    Compiler(String),
    /// It is not a usable component.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Its `list-tools` did not answer.
    #[error("list-tools failed: {0}")]
    ListTools(#[source] CallFailure),
    /// Its tool list breaks a rule or a limit (see `tools.rs`).
    #[error(transparent)]
    ToolList(#[from] ToolListError),
    /// One of its tools is already provided by another plugin.
    #[error("tool {tool:?} is already provided by plugin {holder:?}")]
    NameTaken { tool: String, holder: String },
}

/// A plugin that passed every check and can serve calls.
pub struct LoadedPlugin {
    pub(crate) id: String,
    pub(crate) file: PathBuf,
    pub(crate) version: Version,
    pub(crate) loaded_at: SystemTime,
    pub compiled: CompiledPlugin,
    pub grants: Arc<Grants>,
    /// Bounds this plugin's concurrent calls: its policy's `max_concurrent`,
    /// or by default half the host's call slots, so that one plugin can
    /// never hold every slot.
    pub(crate) permits: Arc<tokio::sync::Semaphore>,
    pub(crate) max_concurrent: usize,
    pub(crate) tools: Vec<Arc<Tool>>,
    /// Input-schema constructs a major LLM API refuses (never a rejection).
    pub(crate) schema_warnings: Vec<SchemaWarning>,
    /// Declared last, so dropped last: see [`ReleaseOnDrop`].
    pub(crate) _release: ReleaseOnDrop,
}

/// Gives freed heap memory back to the kernel when the plugin that holds
/// it is finally dropped. Fields drop in declaration order, so this runs
/// after the compiled code, its metadata and the tool list are freed,
/// whichever thread lets go of the last reference (a registry swap, an
/// in-flight call finishing on the old version). Trimming at the swap
/// instead raced with that last reference and could leave a removed
/// large plugin's memory with the allocator.
#[derive(Default)]
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        crate::runtime::release_free_memory();
    }
}

/// The identity of one version of a plugin: the SHA-256 of its bytes and
/// of its policy file, when there is one. A change to either is a new
/// version to load.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) content_hash: String,
    pub(crate) policy_hash: Option<String>,
}

/// The bytes of a plugin file and of its policy file, if any.
pub(crate) struct PluginSource {
    pub(crate) wasm: Vec<u8>,
    pub(crate) policy: Option<String>,
    pub(crate) version: Version,
}

/// Reads a plugin file and the policy file beside it.
pub(crate) async fn read_source(path: &Path) -> std::io::Result<PluginSource> {
    let wasm = read_plugin_file(path).await?;
    let policy = match tokio::fs::read_to_string(policy::policy_path(path)).await {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(std::io::Error::other(format!(
                "cannot read the policy file: {error}"
            )));
        }
    };
    Ok(PluginSource {
        version: Version {
            content_hash: content_hash(&wasm),
            policy_hash: policy.as_deref().map(|text| content_hash(text.as_bytes())),
        },
        wasm,
        policy,
    })
}

/// The plugin file a changed file belongs to: itself for `x.wasm`, `x.wasm`
/// for its policy `x.toml`; `None` for anything else.
pub(crate) fn plugin_file_for(path: &Path) -> Option<PathBuf> {
    let candidate = match path.extension()?.to_str()? {
        "wasm" => path.to_path_buf(),
        "toml" => path.with_extension("wasm"),
        _ => return None,
    };
    plugin_id(&candidate).map(|_| candidate)
}

/// The plugin id of a file in the plugin folder: its stem, for `*.wasm`
/// files that are not hidden (editors and copy tools park hidden temporary
/// files beside the real one).
pub(crate) fn plugin_id(path: &Path) -> Option<String> {
    if path.extension()? != "wasm" {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    (!stem.is_empty() && !stem.starts_with('.')).then(|| stem.to_string())
}

/// SHA-256 of the file's bytes, in hex: the plugin's version identity.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Reads a plugin file, refusing absurd sizes before reading.
pub(crate) async fn read_plugin_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let size = tokio::fs::metadata(path).await?.len();
    if size > MAX_PLUGIN_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "the file is {size} bytes, over the {MAX_PLUGIN_FILE_BYTES}-byte limit for plugins"
        )));
    }
    tokio::fs::read(path).await
}

/// Checks the policy, compiles the bytes (off the async worker threads),
/// asks the plugin for its tools and checks them.
pub(crate) async fn load(
    runtime: &Arc<Runtime>,
    list_limits: &ToolListLimits,
    id: &str,
    file: &Path,
    source: PluginSource,
) -> Result<LoadedPlugin, LoadError> {
    let grants = match &source.policy {
        None => runtime.no_grants(),
        Some(text) => {
            let folder = file.parent().unwrap_or(Path::new("."));
            policy::grants(text, folder, runtime.no_grants().limits).map_err(|reason| {
                LoadError::Policy {
                    file: policy::policy_path(file),
                    reason,
                }
            })?
        }
    };
    let compiled = {
        let runtime = runtime.clone();
        let id = id.to_string();
        let hash = source.version.content_hash.clone();
        let wasm = source.wasm;
        tokio::task::spawn_blocking(move || {
            // A thread pool of its own for each compile: wasmtime compiles
            // functions in parallel on the current rayon pool, and in a
            // shared pool a small plugin's functions would queue behind
            // every function of a large one compiling beside it.
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("toolhost-compile-{i}"))
                .build()
                .map_err(|e| LoadError::Compiler(format!("cannot start compiler threads: {e}")))?;
            pool.install(|| runtime.compile(&id, &wasm, &hash))
                .map_err(LoadError::Compile)
        })
        .await
        .map_err(|e| LoadError::Compiler(format!("compilation did not finish: {e}")))??
    };
    let specs = runtime
        .list_tools(&compiled)
        .await
        .map_err(LoadError::ListTools)?;
    let tools = tools::build_tools(specs, list_limits)?;
    let tools: Vec<Arc<Tool>> = tools.into_iter().map(Arc::new).collect();
    let schema_warnings = portability::check(&tools);
    for warning in &schema_warnings {
        tracing::warn!(plugin = id, "{warning}");
    }
    let max_concurrent = grants
        .max_concurrent
        .unwrap_or_else(|| default_share(runtime.max_calls()));
    Ok(LoadedPlugin {
        id: id.to_string(),
        file: file.to_path_buf(),
        version: source.version,
        loaded_at: SystemTime::now(),
        compiled,
        permits: Arc::new(tokio::sync::Semaphore::new(max_concurrent)),
        max_concurrent,
        grants: Arc::new(grants),
        tools,
        schema_warnings,
        _release: ReleaseOnDrop,
    })
}

/// How many calls a plugin without a `max_concurrent` policy may run at
/// once: half the host's slots, at least one.
pub(crate) fn default_share(max_calls: usize) -> usize {
    (max_calls / 2).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_visible_wasm_files_are_plugins() {
        assert_eq!(plugin_id(Path::new("/p/echo.wasm")), Some("echo".into()));
        assert_eq!(plugin_id(Path::new("/p/echo.wasm.tmp")), None);
        assert_eq!(plugin_id(Path::new("/p/.echo.wasm")), None);
        assert_eq!(plugin_id(Path::new("/p/echo.toml")), None);
        assert_eq!(plugin_id(Path::new("/p/.wasm")), None);
    }

    #[test]
    fn a_policy_file_belongs_to_its_plugin() {
        let wasm = Some(PathBuf::from("/p/echo.wasm"));
        assert_eq!(plugin_file_for(Path::new("/p/echo.wasm")), wasm);
        assert_eq!(plugin_file_for(Path::new("/p/echo.toml")), wasm);
        assert_eq!(plugin_file_for(Path::new("/p/.echo.toml")), None);
        assert_eq!(plugin_file_for(Path::new("/p/echo.txt")), None);
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
