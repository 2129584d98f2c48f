//! Turns one plugin file into a [`LoadedPlugin`], or a [`LoadError`] saying
//! why it is not one. Used by the registry (startup scan and hot reload) and by
//! `toolhost check`, so both judge a file the same way. A component is
//! compiled; a source file (`x.py`, `x.js`) is its language's runtime
//! (compiled once, shared: `languages/runtimes.rs`) with the file in its
//! grants, after its imports are checked against what the runtime carries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::languages::{self, Language};
use crate::registry::catalog::{Catalog, CatalogError};
use crate::registry::layout::namespace_of;
use crate::registry::policy;
use crate::registry::portability::{self, SchemaWarning};
use crate::registry::tools::{self, Tool, ToolListError, ToolListLimits};
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
    #[error(transparent)]
    Details(#[from] crate::registry::tool_details::DetailError),
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
    #[error("{}", outside_message(*.language, .imports, .packages))]
    OutsideRuntime {
        language: Language,
        imports: Vec<languages::Import>,
        /// The room's packages' modules (what the store gives).
        packages: Vec<String>,
    },
    /// Its language's runtime is not there (`languages/runtimes.rs`).
    #[error(transparent)]
    NoRuntime(crate::languages::NoRuntime),
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

/// What to tell the author of a source whose `imports` neither its
/// runtime nor the room's packages carry: the modules, what is carried,
/// and what to do.
fn outside_message(
    language: Language,
    imports: &[languages::Import],
    packages: &[String],
) -> String {
    let named: Vec<String> = imports
        .iter()
        .map(|import| {
            format!(
                "{}:{}: `{}`",
                language.source_file(),
                import.line,
                import.module
            )
        })
        .collect();
    let packages = if packages.is_empty() {
        "none yet".to_string()
    } else {
        packages.join(", ")
    };
    match language {
        Language::Python => {
            let left_out: Vec<&str> = imports
                .iter()
                .filter(|import| crate::languages::runtimes::left_out(&import.module))
                .map(|import| import.module.split('.').next().unwrap_or_default())
                .collect();
            let why = if left_out.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} needs sockets, threads or processes, which the runtime leaves out: a \
                     server that builds Python, --builds python, builds it into a component of \
                     your own)",
                    left_out.join(", ")
                )
            };
            format!(
                "{} imports what neither toolhost's Python runtime nor this room's packages \
                 carry ({}){why}. The runtime carries CPython's standard library (but {}) and the \
                 helper library; the room's packages are: {packages}. An admin adds a \
                 pure-Python package with `toolhost packages add NAME` (docs/builds.md)",
                language.source_file(),
                named.join(", "),
                crate::languages::runtimes::PYTHON_LEFT_OUT.join(", ")
            )
        }
        Language::JavaScript | Language::TypeScript => format!(
            "{} imports what neither toolhost's JavaScript runtime nor this room's packages \
             carry ({}); the runtime carries the helper library (import {{ tool, exportPlugin \
             }} from \"./toolhost.js\"), fetch and the web's URL, Headers and TextEncoder; the \
             room's packages are: {packages}. An admin adds a pure JavaScript package with \
             `toolhost packages add --lang js NAME` (docs/builds.md)",
            language.source_file(),
            named.join(", ")
        ),
        Language::Rust => format!(
            "{} is Rust, which no runtime runs as source ({})",
            language.source_file(),
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
    pub(crate) language: Option<Language>,
    pub(crate) policy: Option<String>,
    /// Which file `policy` came from: the plugin's own, or its namespace's.
    pub(crate) policy_file: Option<PathBuf>,
    /// The room's policy (`_room.toml` at the top of the folder), which
    /// every plugin gets on top of its own.
    pub(crate) room_policy: Option<String>,
    /// The plugin folder it is in, for the room's package store.
    pub(crate) root: Option<PathBuf>,
    /// The package store's lock, for a source (the modules it may import
    /// beyond its runtime's).
    pub(crate) packages: Option<languages::packages::Lock>,
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
    let root = if namespaced {
        path.parent().and_then(Path::parent)
    } else {
        path.parent()
    };
    let room_file = root.map(|root| root.join(policy::ROOM_POLICY));
    let room_policy = match room_file {
        Some(file) => match tokio::fs::read_to_string(&file).await {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => {
                return Err(std::io::Error::other(format!(
                    "cannot read the room's policy file {}: {error}",
                    file.display()
                )));
            }
        },
        None => None,
    };
    let language = Language::of_path(path);
    // A source's packages: the lock's text is part of its version.
    let lock_text = match (language, root) {
        (Some(_), Some(root)) => {
            match tokio::fs::read_to_string(root.join(languages::packages::LOCK_FILE)).await {
                Ok(text) => Some(text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(error),
            }
        }
        _ => None,
    };
    // A change to either policy, or to the packages, is a new version.
    let policy_hash = match (&policy, &room_policy, &lock_text) {
        (None, None, None) => None,
        (own, room, lock) => Some(content_hash(
            format!(
                "{}\0{}\0{}",
                own.as_deref().unwrap_or_default(),
                room.as_deref().unwrap_or_default(),
                lock.as_deref().unwrap_or_default()
            )
            .as_bytes(),
        )),
    };
    let packages = match lock_text {
        Some(text) => Some(languages::packages::Lock::parse(&text).map_err(|error| {
            std::io::Error::other(format!("{}: {error}", languages::packages::LOCK_FILE))
        })?),
        None => None,
    };
    Ok(PluginSource {
        policy_file,
        room_policy,
        root: root.map(Path::to_path_buf),
        packages,
        published: published_by(path),
        since: first_published(path),
        version: Version {
            content_hash: content_hash(&bytes),
            policy_hash,
        },
        language,
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
    if let Some(text) = &source.room_policy {
        let room = policy::room_allow(text).map_err(|reason| LoadError::Policy {
            file: file
                .ancestors()
                .find_map(|dir| {
                    let room = dir.join(policy::ROOM_POLICY);
                    room.is_file().then_some(room)
                })
                .unwrap_or_else(|| PathBuf::from(policy::ROOM_POLICY)),
            reason: reason.to_string(),
        })?;
        if !room.is_empty() {
            let mut allow = grants.http_allow.as_ref().clone();
            allow.extend(room);
            grants.http_allow = Arc::new(allow);
        }
    }
    // A source file: its language's runtime, with the file to run.
    let runs_on_a_runtime = source.language.is_some();
    let component: Arc<languages::RuntimeComponent> = match source.language {
        None => Arc::new(languages::RuntimeComponent {
            wasm: source.bytes.into(),
            hash: source.version.content_hash.clone(),
        }),
        Some(language) => {
            let packages = source.packages.unwrap_or_default();
            let mut file = if crate::registry::layout::is_tool_folder(file) {
                folder_source(&source.bytes, &source.version.content_hash, &packages)?
            } else {
                source_of(language, source.bytes, &packages.modules(language))?
            };
            hand_runtime(&mut file, language, source.root.as_deref(), &packages)?;
            grants.source = Some(Arc::new(file));
            crate::languages::runtimes::component(language).map_err(LoadError::NoRuntime)?
        }
    };
    let compiled = {
        let runtime = runtime.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || {
            if runs_on_a_runtime {
                runtime.compile_runtime(&id, &component.wasm, &component.hash)
            } else {
                runtime.compile(&id, &component.wasm, &component.hash)
            }
            .map_err(LoadError::Compile)
        })
        .await
        .map_err(|e| LoadError::Compiler(format!("compilation did not finish: {e}")))??
    };
    // The grants it serves with: a source's image is taken as it is
    // described, for these very grants.
    let grants = Arc::new(grants);
    let mut description = runtime
        .describe(&compiled, &grants)
        .await
        .map_err(|failure| match (source.language, failure) {
            (Some(language), CallFailure::Trapped { reason, stderr }) => {
                let (line, headline) = languages::authors_line::authors_line(language, &stderr)
                    .unwrap_or((
                        None,
                        format!("{} did not run: {reason}", language.source_file()),
                    ));
                LoadError::SourceRaised {
                    headline,
                    line,
                    printed: languages::authors_line::clean_log(language, &stderr),
                }
            }
            (_, failure) => LoadError::ListTools(failure),
        })?;
    let catalog = Catalog::build(&mut description, namespace_of(id), list_limits)?;
    let mut tools = tools::build_tools(std::mem::take(&mut description.tools), list_limits)?;
    crate::registry::tool_details::apply(
        &mut tools,
        std::mem::take(&mut description.details),
        &catalog,
    )?;
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
            tool.task_timeout = task.timeout_secs().map(std::time::Duration::from_secs);
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
        grants,
        tools,
        catalog,
        schema_warnings,
        _release: ReleaseOnDrop,
    })
}

/// A source file's text, checked: UTF-8, within
/// [`MAX_SOURCE_FILE_BYTES`], importing only what its runtime carries.
fn source_of(
    language: Language,
    bytes: Vec<u8>,
    packages: &std::collections::BTreeSet<String>,
) -> Result<SourceFile, LoadError> {
    if bytes.len() > MAX_SOURCE_FILE_BYTES {
        return Err(LoadError::BadSource(format!(
            "{} is {} bytes, over the {MAX_SOURCE_FILE_BYTES} a source file may be",
            language.source_file(),
            bytes.len()
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        LoadError::BadSource(format!("{} is not UTF-8 text", language.source_file()))
    })?;
    let imports = languages::outside_with(language, &text, packages);
    if !imports.is_empty() {
        return Err(LoadError::OutsideRuntime {
            language,
            imports,
            packages: packages.iter().cloned().collect(),
        });
    }
    Ok(SourceFile {
        name: language.source_file().to_string(),
        text,
        dirs: Vec::new(),
        modules: Vec::new(),
        holds: Vec::new(),
    })
}

/// What a source's runtime is handed besides the source, read-only: the
/// rest of Python's standard library, the room's Python packages, and the
/// bundles of the room's JavaScript packages it imports (each checked
/// against the lock).
fn hand_runtime(
    file: &mut SourceFile,
    language: Language,
    root: Option<&Path>,
    packages: &languages::packages::Lock,
) -> Result<(), LoadError> {
    // The rest of the standard library, read-only, where the
    // Python runtime looks.
    if language == Language::Python
        && let Ok(host) = crate::languages::runtimes::python_stdlib()
    {
        file.dirs.push(crate::runtime::DirGrant {
            host,
            guest: crate::languages::runtimes::PYTHON_STDLIB_GUEST_DIR.into(),
            writable: false,
        });
    }
    // The room's packages, read-only, where the runtime looks.
    if let Some(root) = root
        && !packages.modules(language).is_empty()
        && language == Language::Python
    {
        let store = languages::packages::store_dir(root, language);
        if let Ok(host) = store.canonicalize() {
            file.dirs.push(crate::runtime::DirGrant {
                host,
                guest: languages::packages::PYTHON_GUEST_DIR.into(),
                writable: false,
            });
        }
    }
    // The room's JavaScript packages it imports, each its bundle.
    if let Some(root) = root
        && language.runtime() == Language::JavaScript
    {
        let store = languages::packages::store_dir(root, language);
        let locked = packages
            .section(language)
            .map(|section| section.packages.clone())
            .unwrap_or_default();
        for import in languages::imports(language, &file.text) {
            let Some(package) = locked.iter().find(|package| package.name == import.module) else {
                continue;
            };
            if file.modules.iter().any(|(name, _)| *name == import.module) {
                continue;
            }
            let bundle = store.join(languages::packages::bundle_file(&package.name));
            let code = std::fs::read_to_string(&bundle).map_err(|error| {
                LoadError::BadSource(format!(
                    "the package {} is in the lock but not in the store ({}): {error}",
                    package.name,
                    bundle.display()
                ))
            })?;
            // What runs is what the lock names, byte for byte.
            if content_hash(code.as_bytes()) != package.sha256 {
                return Err(LoadError::BadSource(format!(
                    "the package {}'s bundle ({}) is not the one the lock names: run \
                     toolhost packages add --lang js {} again",
                    package.name,
                    bundle.display(),
                    package.name
                )));
            }
            file.modules.push((import.module, code));
        }
    }
    Ok(())
}

/// A tool folder's source (a zip): checked, unpacked once into the cache,
/// its `app.py` to run and the folder handed to the runtime read-only; its
/// own modules are imports it carries.
fn folder_source(
    bytes: &[u8],
    digest: &str,
    packages: &languages::packages::Lock,
) -> Result<SourceFile, LoadError> {
    use crate::languages::folder::{GUEST_DIR, ToolFolder};
    let folder = ToolFolder::read(bytes)
        .map_err(|error| LoadError::BadSource(format!("the tool folder: {error}")))?;
    let language = folder.language;
    let mut carried = packages.modules(language);
    carried.extend(folder.modules());
    let mut file = source_of(language, folder.text.clone().into_bytes(), &carried)?;
    let root = crate::languages::runtimes::unpack_root().join("tools");
    let unpacked = folder
        .unpack(&root, digest)
        .map_err(|error| LoadError::BadSource(format!("cannot unpack the tool folder: {error}")))?;
    file.dirs.push(crate::runtime::DirGrant {
        host: unpacked.dir.clone(),
        guest: GUEST_DIR.into(),
        writable: false,
    });
    // The folder lives as long as the plugin that reads it.
    file.holds.push(unpacked);
    Ok(file)
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
