//! A file's verdict on the one load path (`Registry::load` in `mod.rs`):
//! [`judge`] reads, compiles and lists one file into a [`Verdict`] (a
//! version to admit, a refusal, unchanged, gone, or a read to retry), and
//! [`apply`] applies it to the snapshot being built under the registry's
//! rules (tool names and URIs to the first holder, a refused version never
//! taking down the one serving).

use std::path::Path;
use std::sync::Arc;

use crate::registry::layout;
use crate::registry::pinned;
use crate::registry::plugin::{self, LoadError, LoadedPlugin, Version};
use crate::registry::policy;
use crate::registry::snapshot::Snapshot;
use crate::registry::sources;
use crate::registry::tools::ToolListLimits;
use crate::runtime::Runtime;

/// What reading a file yielded: a version to admit, or a refusal.
pub(super) enum Verdict {
    Unchanged,
    Gone,
    Loaded(Box<LoadedPlugin>),
    Refused {
        version: Version,
        reason: LoadError,
    },
    /// The file could not be read for a reason that may pass (EMFILE):
    /// keep what serves, try again later.
    Retry(String),
    /// A version whose definitions wait for approval (`approvals.rs`):
    /// held beside what serves, or beside `approved`, the approved copy
    /// loaded when nothing serves (after a restart).
    Held {
        version: Version,
        reason: LoadError,
        approved: Option<Box<LoadedPlugin>>,
    },
}

impl Verdict {
    /// Its name, for the load's span.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Verdict::Unchanged => "unchanged",
            Verdict::Gone => "gone",
            Verdict::Loaded(_) => "loaded",
            Verdict::Refused { .. } => "refused",
            Verdict::Retry(_) => "retry",
            Verdict::Held { .. } => "held",
        }
    }
}

/// What applying a verdict did to a plugin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Admitted,
    Refused,
    Removed,
}

/// Applies one file's verdict to a snapshot being built, and adds what it
/// did to `outcomes` (nothing, for a file that is unchanged; a plugin
/// taken out of service by the one admitted, too).
pub(super) fn apply(
    next: &mut Snapshot,
    id: &str,
    path: &Path,
    verdict: Verdict,
    outcomes: &mut Vec<(String, Outcome)>,
) {
    let mut tell =
        |id: &str, outcome: Outcome| match outcomes.iter_mut().find(|(known, _)| known == id) {
            Some((_, known)) => *known = outcome,
            None => outcomes.push((id.to_string(), outcome)),
        };
    match verdict {
        Verdict::Unchanged | Verdict::Retry(_) => {}
        Verdict::Gone => {
            if next.plugin_report(id).is_none() {
                return;
            }
            tracing::info!(plugin = %id, "plugin removed");
            next.remove(id);
            tell(id, Outcome::Removed);
        }
        Verdict::Loaded(plugin) => {
            let names: Vec<&str> = plugin.tools.iter().map(|t| t.name.as_str()).collect();
            let from_cache = plugin.compiled.from_cache;
            tracing::info!(plugin = %id, hash = %&plugin.version.content_hash[..12], from_cache, tools = ?names, "plugin loaded");
            for displaced in next.admit(Arc::new(*plugin)) {
                tell(&displaced, Outcome::Refused);
            }
            tell(id, Outcome::Admitted);
        }
        Verdict::Refused { version, reason } => {
            tracing::warn!(plugin = %id, %reason, "plugin rejected");
            next.reject(id, path, version, Arc::new(reason));
            tell(id, Outcome::Refused);
        }
        Verdict::Held {
            version,
            reason,
            approved,
        } => {
            if let Some(approved) = approved {
                tracing::info!(plugin = %id, hash = %&approved.version.content_hash[..12], "the approved version serves");
                for displaced in next.admit(Arc::new(*approved)) {
                    tell(&displaced, Outcome::Refused);
                }
            }
            tracing::info!(plugin = %id, %reason, "held for approval");
            next.reject(id, path, version, Arc::new(reason));
            tell(id, Outcome::Refused);
        }
    }
}

/// Reads and loads one file, without touching the registry.
#[tracing::instrument(level = "debug", name = "verdict", skip_all)]
pub(super) async fn judge(
    sources: &Arc<sources::Sources>,
    runtime: &Arc<Runtime>,
    limits: &ToolListLimits,
    before: &Snapshot,
    id: &str,
    path: &Path,
) -> Verdict {
    let namespaced = layout::namespace_of(id).is_some();
    let read = match sources::declared(path).await {
        Err(reason) => {
            let reason = reason.to_string();
            return Verdict::Refused {
                version: Version {
                    content_hash: plugin::content_hash(reason.as_bytes()),
                    policy_hash: None,
                },
                reason: LoadError::Policy {
                    file: policy::policy_path(path),
                    reason,
                },
            };
        }
        Ok(Some(spec)) => {
            let fetched = if tokio::fs::try_exists(path).await.unwrap_or(false) {
                Err(sources::FetchError::AlsoAFile {
                    policy: policy::policy_path(path),
                    file: path.to_path_buf(),
                })
            } else {
                sources.fetch(id, path, spec).await
            };
            match fetched {
                Ok(wasm) => plugin::with_policy(wasm, path, namespaced).await,
                Err(reason) => {
                    let reason = reason.to_string();
                    return Verdict::Refused {
                        version: Version {
                            content_hash: plugin::content_hash(reason.as_bytes()),
                            policy_hash: None,
                        },
                        reason: LoadError::Source(reason),
                    };
                }
            }
        }
        Ok(None) => {
            sources.forget(id);
            plugin::read_source(path, namespaced).await
        }
    };
    let source = match read {
        Ok(source) => source,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Verdict::Gone,
        Err(error) if is_transient(&error) => {
            return Verdict::Retry(format!("cannot read the file: {error}"));
        }
        Err(error) => {
            return Verdict::Refused {
                version: Version::default(),
                reason: LoadError::Unreadable {
                    file: path.to_path_buf(),
                    error,
                },
            };
        }
    };
    let version = source.version.clone();
    if before.already_judged(id, &version) {
        return Verdict::Unchanged;
    }
    match plugin::load(runtime, limits, id, path, source).await {
        Ok(plugin) => Verdict::Loaded(Box::new(plugin)),
        Err(reason) => Verdict::Refused { version, reason },
    }
}

/// `verdict` under `--require-approval`: a loaded version whose
/// definitions are not approved is held (see [`Verdict::Held`]); one that
/// is serves, and its component becomes the approved copy.
pub(super) async fn held_for_approval(
    (runtime, limits): (&Arc<Runtime>, &ToolListLimits),
    snapshot: &Snapshot,
    approvals: &crate::registry::approvals::Approvals,
    id: &str,
    path: &Path,
    verdict: Verdict,
) -> Verdict {
    let Verdict::Loaded(plugin) = verdict else {
        return verdict;
    };
    let texts = pinned::texts(runtime, &plugin).await;
    let held = match approvals.judge(&plugin, &texts) {
        Ok(()) => {
            approvals.keep_serving_copy(&plugin, &texts);
            return Verdict::Loaded(plugin);
        }
        Err(held) => held,
    };
    let version = plugin.version.clone();
    let reason = LoadError::Pending(held);
    if snapshot.is_serving(id) {
        return Verdict::Held {
            version,
            reason,
            approved: None,
        };
    }
    // Nothing serves (a restart, or a plugin removed by hand and back):
    // the approved copy does, under the live file's policy, if it still
    // loads and is still approved.
    let approved = match approvals.approved_copy(id) {
        Some(copy) => {
            let loaded = async {
                let bytes = plugin::read_plugin_file(&copy).await.ok()?;
                let namespaced = layout::namespace_of(id).is_some();
                let mut source = plugin::with_policy(bytes, path, namespaced).await.ok()?;
                // A component, or a source file, as the approved copy is.
                source.language = crate::languages::Language::of_path(&copy);
                plugin::load(runtime, limits, id, path, source).await.ok()
            };
            match loaded.await {
                Some(approved) => {
                    let texts = pinned::texts(runtime, &approved).await;
                    approvals
                        .judge(&approved, &texts)
                        .is_ok()
                        .then(|| Box::new(approved))
                }
                None => None,
            }
        }
        None => None,
    };
    Verdict::Held {
        version,
        reason,
        approved,
    }
}

/// Read failures that say nothing about the file: the process is out of
/// file descriptors or memory for the moment.
pub(super) fn is_transient(error: &std::io::Error) -> bool {
    const EINTR: i32 = 4;
    const EAGAIN: i32 = 11;
    const ENOMEM: i32 = 12;
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    matches!(
        error.raw_os_error(),
        Some(EINTR | EAGAIN | ENOMEM | ENFILE | EMFILE)
    ) || error.kind() == std::io::ErrorKind::Interrupted
}
