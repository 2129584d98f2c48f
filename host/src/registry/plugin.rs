//! Turns one plugin file into a [`LoadedPlugin`], or a [`LoadError`] saying
//! why it is not one. Used by the registry (startup scan and hot reload) and by
//! `toolhost check`, so both judge a file the same way. A component is
//! compiled; a source file (`x.py`, `x.js`) is its language's runtime
//! (compiled once, shared: `runtime/languages.rs`) with the file in its
//! grants, after its imports are checked against what the runtime carries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::registry::catalog::{Catalog, CatalogError};
use crate::registry::layout::namespace_of;
use crate::registry::policy;
use crate::registry::portability::{self, SchemaWarning};
use crate::registry::tools::{self, Tool, ToolListError, ToolListLimits};
use crate::runtime::languages::{self, SourceLanguage};
use crate::runtime::{CallFailure, CompileError, CompiledPlugin, Grants, Runtime, SourceFile};

/// Files larger than this are refused before they are read whole: a plugin
/// folder is no place for a gigabyte of anything.
pub(crate) const MAX_PLUGIN_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The largest source file served as a plugin (`--max-source-kib` bounds
/// what is published; a file dropped in is bounded by this).
pub(crate) const MAX_SOURCE_FILE_BYTES: usize = 1024 * 1024;

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
    /// Its `list-tools` (or a 0.2.0 listing) did not answer; a trap
    /// says what the plugin printed last (an SDK's panic message, say).
    #[error("list-tools failed: {}{}", .0, printed_before(.0))]
    ListTools(#[source] CallFailure),
    /// Its resources or prompts break a rule or a limit (`catalog.rs`).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Its tool list breaks a rule or a limit (see `tools.rs`).
    #[error(transparent)]
    ToolList(#[from] ToolListError),
    /// Its OCI source gave nothing to serve (see `sources.rs`): the
    /// registry is unreachable, the artifact is not a wasm artifact, or its
    /// signature was refused.
    #[error("{0}")]
    Source(String),
    /// One of its tools is already provided by another plugin.
    #[error("tool {tool:?} is already provided by plugin {holder:?}")]
    NameTaken { tool: String, holder: String },
    /// One of its resource URIs, URI templates or prompt names is already
    /// served by another plugin (`what` says which, e.g. `prompt "greet"`).
    #[error("{what} is already provided by plugin {holder:?}")]
    Taken { what: String, holder: String },
    /// One of its URIs or templates overlaps another plugin's: some URI
    /// would be served by both.
    #[error("{what} overlaps what plugin {holder:?} serves: some URI would be served by both")]
    Overlaps { what: String, holder: String },
    /// It waits for an admin's approval of its definitions
    /// (`--require-approval`, see `approvals.rs`).
    #[error("awaiting an admin's approval: {}", .0.summary)]
    Pending(Box<Held>),
    /// A source file that is no text, or too large.
    #[error("{0}")]
    BadSource(String),
    /// A source file imports what its language's runtime does not carry.
    #[error("{}", outside_message(*.language, .imports))]
    OutsideRuntime {
        language: SourceLanguage,
        imports: Vec<languages::Import>,
    },
    /// Its language's runtime is not there (`runtime/languages.rs`).
    #[error(transparent)]
    NoRuntime(crate::runtime::languages::NoRuntime),
    /// A source file raised (or would not compile) as its runtime ran it:
    /// the author's line first (`app.py:7: SyntaxError: ...`), then what
    /// it printed.
    #[error("{headline}")]
    SourceRaised {
        headline: String,
        line: Option<u32>,
        printed: String,
    },
}

/// What to tell the author of a source whose `imports` its runtime does
/// not carry: the modules, the set, and what to do.
fn outside_message(language: SourceLanguage, imports: &[languages::Import]) -> String {
    let named: Vec<String> = imports
        .iter()
        .map(|import| {
            format!(
                "{}:{}: `{}`",
                language.file_name(),
                import.line,
                import.module
            )
        })
        .collect();
    match language {
        SourceLanguage::Python => format!(
            "{} imports what toolhost's Python runtime does not carry ({}); it carries the \
             helper library and these standard-library modules: {}. Use one of those, or \
             publish to a server that builds Python (--builds python) to get a component of \
             your own",
            language.file_name(),
            named.join(", "),
            language.modules()[1..].join(", ")
        ),
        SourceLanguage::JavaScript => format!(
            "{} imports what toolhost's JavaScript runtime does not carry ({}); a source may \
             import only the helper library (import {{ tool, exportPlugin }} from \
             \"./toolhost.js\"): put what it needs in the file, or publish to a server that \
             builds JavaScript (--builds js) to get a component of your own",
            language.file_name(),
            named.join(", ")
        ),
    }
}

/// For a listing that trapped: what the plugin printed last, on one line
/// (a trap's own reason is wasmtime's, `unreachable` for a Rust panic).
fn printed_before(failure: &CallFailure) -> String {
    match failure {
        CallFailure::Trapped { stderr, .. } if !stderr.trim().is_empty() => {
            let printed: Vec<&str> = stderr.split_whitespace().collect();
            format!("; it printed: {}", printed.join(" "))
        }
        _ => String::new(),
    }
}

impl LoadError {
    /// What a version held for approval waits on.
    pub(crate) fn held(&self) -> Option<&Held> {
        match self {
            LoadError::Pending(held) => Some(held),
            _ => None,
        }
    }
}

/// Why a version waits: what changed from the approved definitions.
/// (`--require-approval`, see `approvals.rs`).
#[derive(Debug, Clone)]
pub struct Held {
    /// The version's definitions and their digest, to approve.
    pub(crate) definitions: Value,
    pub(crate) digest: String,
    /// The changes (`approvals.rs`'s `changes`); empty for a code-only
    /// change under `ApprovalMode::All`.
    pub(crate) changes: Value,
    /// One line for people: how many definitions changed, or that it is
    /// new.
    pub(crate) summary: String,
}

/// A plugin that passed every check and can serve calls.
pub struct LoadedPlugin {
    pub(crate) id: String,
    pub(crate) file: PathBuf,
    pub(crate) version: Version,
    pub(crate) loaded_at: SystemTime,
    /// Who published this version over HTTP, and when (RFC 3339), and
    /// what it was built from.
    pub(crate) published: Option<PublishRecord>,
    /// When the plugin was first published (kept across its versions), or
    /// for a file dropped by hand, the file's time: who goes first when two
    /// plugins claim one name or URI (see `snapshot.rs`).
    pub(crate) since: SystemTime,
    pub compiled: CompiledPlugin,
    pub grants: Arc<Grants>,
    /// Bounds this plugin's concurrent calls: its policy's `max_concurrent`,
    /// or by default half the host's call slots, so that one plugin can
    /// never hold every slot.
    pub(crate) permits: Arc<tokio::sync::Semaphore>,
    pub(crate) max_concurrent: usize,
    pub(crate) tools: Vec<Arc<Tool>>,
    /// Its resources, templates and prompts (contract 0.2.0).
    pub(crate) catalog: Catalog,
    /// Input-schema constructs a major LLM API refuses (never a rejection).
    pub(crate) schema_warnings: Vec<SchemaWarning>,
    /// Declared last, so dropped last: see [`ReleaseOnDrop`].
    pub(crate) _release: ReleaseOnDrop,
}

impl LoadedPlugin {
    /// The order in which plugins claim names and URIs, smallest first:
    /// the top level before namespaces, then the one first published (or
    /// dropped), then by id. Load order never decides.
    pub(crate) fn claim_order(&self) -> (bool, SystemTime, String) {
        (
            crate::registry::layout::namespace_of(&self.id).is_some(),
            self.since,
            self.id.clone(),
        )
    }
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
    /// A component's bytes, or a source file's text.
    pub(crate) bytes: Vec<u8>,
    /// The language of a source file (`x.py`, `x.js`); `None` for a
    /// component.
    pub(crate) language: Option<SourceLanguage>,
    pub(crate) policy: Option<String>,
    /// Which file `policy` came from: the plugin's own, or its namespace's.
    pub(crate) policy_file: Option<PathBuf>,
    pub(crate) version: Version,
    /// Who published it over HTTP, and when (see `publish.rs`).
    pub(crate) published: Option<PublishRecord>,
    /// When it was first published, or the file's time (see
    /// [`LoadedPlugin::since`]).
    pub(crate) since: SystemTime,
}

/// Reads a plugin file and its policy: the file beside it, or else, for a
/// plugin in a namespace folder (`namespaced`), the namespace's
/// (`_namespace.toml` in that folder), or else none.
pub(crate) async fn read_source(path: &Path, namespaced: bool) -> std::io::Result<PluginSource> {
    let bytes = read_plugin_file(path).await?;
    with_policy(bytes, path, namespaced).await
}

/// A plugin's bytes (from its file, or from its OCI source) with its
/// policy, read as [`read_source`] reads it.
pub(crate) async fn with_policy(
    bytes: Vec<u8>,
    path: &Path,
    namespaced: bool,
) -> std::io::Result<PluginSource> {
    let mut candidates = vec![policy::policy_path(path)];
    if namespaced {
        candidates.push(path.with_file_name(policy::NAMESPACE_POLICY));
    }
    let mut policy = None;
    let mut policy_file = None;
    for candidate in candidates {
        match tokio::fs::read_to_string(&candidate).await {
            Ok(text) => {
                policy = Some(text);
                policy_file = Some(candidate);
                break;
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(std::io::Error::other(format!(
                    "cannot read the policy file {}: {error}",
                    candidate.display()
                )));
            }
        }
    }
    Ok(PluginSource {
        policy_file,
        published: published_by(path),
        since: first_published(path),
        version: Version {
            content_hash: content_hash(&bytes),
            policy_hash: policy.as_deref().map(|text| content_hash(text.as_bytes())),
        },
        language: SourceLanguage::of_path(path),
        bytes,
        policy,
    })
}

/// The record beside a published plugin (`.<name>.published`, JSON): who
/// published this version and when, and since when the plugin exists.
/// Publishing writes it; reports read it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublishRecord {
    /// Who published it.
    pub(crate) by: String,
    /// When (RFC 3339).
    pub(crate) at: String,
    /// When the plugin was first published (RFC 3339), kept across its
    /// versions; absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) first: Option<String>,
    /// The language of the source the server built it from, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) built_from: Option<String>,
    /// How long that build took, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) build_seconds: Option<f64>,
}

impl PublishRecord {
    /// The record in `bytes`, if they are one.
    pub(crate) fn read(bytes: &[u8]) -> Option<PublishRecord> {
        serde_json::from_slice(bytes).ok()
    }

    /// When the plugin was first published: `first`, or this version's
    /// `at` for a record without it.
    pub(crate) fn first_published(&self) -> &str {
        self.first.as_deref().unwrap_or(&self.at)
    }
}

/// Who published the plugin at `file`, and when (RFC 3339), if it was
/// published over HTTP (`publish.rs` writes the record).
pub(crate) fn published_by(file: &Path) -> Option<PublishRecord> {
    PublishRecord::read(&std::fs::read(published_file(file)).ok()?)
}

/// When the plugin at `file` was first published: the record's `first`
/// (kept across versions by `publish.rs`), or its `at`; for a file dropped
/// by hand (or a plugin from a registry), the file's creation time, else
/// its policy file's, else its modification time.
pub(crate) fn first_published(file: &Path) -> SystemTime {
    let recorded = published_by(file)
        .and_then(|record| humantime::parse_rfc3339_weak(record.first_published()).ok());
    recorded
        .or_else(|| {
            [file.to_path_buf(), policy::policy_path(file)]
                .iter()
                .find_map(|path| {
                    let metadata = std::fs::metadata(path).ok()?;
                    metadata.created().or_else(|_| metadata.modified()).ok()
                })
        })
        .unwrap_or_else(SystemTime::now)
}

/// `.<name>.source` beside the plugin: the source the server built it
/// from (hidden, so never a plugin; readable by its publisher and admins).
pub(crate) fn source_file(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    file.with_file_name(format!(".{name}.source"))
}

/// `.<name>.published` beside the plugin: hidden, so never a plugin.
pub(crate) fn published_file(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    file.with_file_name(format!(".{name}.published"))
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
#[tracing::instrument(level = "debug", name = "compile", skip_all)]
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
                    file: source
                        .policy_file
                        .clone()
                        .unwrap_or_else(|| policy::policy_path(file)),
                    reason: reason.to_string(),
                }
            })?
        }
    };
    let mut grants = grants;
    // A source file: its language's runtime, with the file to run.
    let component: Arc<languages::RuntimeComponent> = match source.language {
        None => Arc::new(languages::RuntimeComponent {
            wasm: source.bytes.into(),
            hash: source.version.content_hash.clone(),
        }),
        Some(language) => {
            let file = source_of(language, source.bytes)?;
            grants.source = Some(Arc::new(file));
            language.component().map_err(LoadError::NoRuntime)?
        }
    };
    let compiled = {
        let runtime = runtime.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || {
            runtime
                .compile(&id, &component.wasm, &component.hash)
                .map_err(LoadError::Compile)
        })
        .await
        .map_err(|e| LoadError::Compiler(format!("compilation did not finish: {e}")))??
    };
    let mut description = runtime
        .describe(&compiled, grants.source.clone())
        .await
        .map_err(|failure| match (source.language, failure) {
            (Some(language), CallFailure::Trapped { reason, stderr }) => {
                let (line, headline) = languages::authors_line(language, &stderr).unwrap_or((
                    None,
                    format!("{} did not run: {reason}", language.file_name()),
                ));
                LoadError::SourceRaised {
                    headline,
                    line,
                    printed: languages::clean_log(language, &stderr),
                }
            }
            (_, failure) => LoadError::ListTools(failure),
        })?;
    let catalog = Catalog::build(&mut description, namespace_of(id), list_limits)?;
    let mut tools = tools::build_tools(std::mem::take(&mut description.tools), list_limits)?;
    if let Some(text) = &source.policy {
        let policy_error = |reason: policy::PolicyError| LoadError::Policy {
            file: source
                .policy_file
                .clone()
                .unwrap_or_else(|| policy::policy_path(file)),
            reason: reason.to_string(),
        };
        for (name, task) in policy::tasks(text).map_err(policy_error)? {
            let Some(tool) = tools.iter_mut().find(|tool| tool.declared == name) else {
                return Err(policy_error(policy::PolicyError::UnknownTaskTool(name)));
            };
            tool.task_support = Some(task.support());
            tool.task_input_first = task.input_first();
        }
    }
    tools::in_namespace(&mut tools, namespace_of(id))?;
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
        published: source.published,
        since: source.since,
        compiled,
        permits: Arc::new(tokio::sync::Semaphore::new(max_concurrent)),
        max_concurrent,
        grants: Arc::new(grants),
        tools,
        catalog,
        schema_warnings,
        _release: ReleaseOnDrop,
    })
}

/// A source file's text, checked: UTF-8, within
/// [`MAX_SOURCE_FILE_BYTES`], importing only what its runtime carries.
fn source_of(language: SourceLanguage, bytes: Vec<u8>) -> Result<SourceFile, LoadError> {
    if bytes.len() > MAX_SOURCE_FILE_BYTES {
        return Err(LoadError::BadSource(format!(
            "{} is {} bytes, over the {MAX_SOURCE_FILE_BYTES} a source file may be",
            language.file_name(),
            bytes.len()
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| LoadError::BadSource(format!("{} is not UTF-8 text", language.file_name())))?;
    let imports = languages::outside(language, &text);
    if !imports.is_empty() {
        return Err(LoadError::OutsideRuntime { language, imports });
    }
    Ok(SourceFile {
        name: language.file_name().to_string(),
        text,
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
    use crate::registry::layout::Layout;

    #[test]
    fn only_visible_wasm_files_at_the_top_or_in_a_namespace_are_plugins() {
        let layout = Layout::new(Path::new("/p"));
        let id = |path: &str| layout.plugin_id(Path::new(path));
        assert_eq!(id("/p/echo.wasm"), Some("echo".into()));
        assert_eq!(id("/p/ada/echo.wasm"), Some("ada/echo".into()));
        assert_eq!(id("/p/echo.wasm.tmp"), None);
        assert_eq!(id("/p/.echo.wasm"), None);
        assert_eq!(id("/p/ada/.echo.wasm"), None);
        assert_eq!(id("/p/echo.toml"), None);
        assert_eq!(id("/p/.wasm"), None);
        assert_eq!(id("/p/ada/deeper/echo.wasm"), None, "one level only");
        assert_eq!(id("/p/a__b/echo.wasm"), None, "__ separates");
        assert_eq!(id("/p/.git/echo.wasm"), None);
        assert_eq!(id("/p/9lives/echo.wasm"), None);
        assert_eq!(id("/elsewhere/echo.wasm"), None);
    }

    #[test]
    fn a_policy_file_belongs_to_its_plugin() {
        let layout = Layout::new(Path::new("/p"));
        let file = |path: &str| layout.plugin_file_for(Path::new(path));
        let wasm = Some(PathBuf::from("/p/echo.wasm"));
        assert_eq!(file("/p/echo.wasm"), wasm);
        assert_eq!(file("/p/echo.toml"), wasm);
        assert_eq!(
            file("/p/ada/echo.toml"),
            Some(PathBuf::from("/p/ada/echo.wasm"))
        );
        assert_eq!(file("/p/.echo.toml"), None);
        assert_eq!(file("/p/echo.txt"), None);
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
