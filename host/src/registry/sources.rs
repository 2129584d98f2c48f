//! Plugins that come from OCI registries: a policy `x.toml` with a
//! `[source]` (see `policy.rs`) is the plugin `x`, and its bytes come from
//! the registry instead of a file beside it.
//!
//! Rules:
//! - The reference is resolved to a manifest digest; with `--verify-key`,
//!   that digest must carry a cosign signature by the key (`oci/
//!   signature.rs`) before a byte of the component is pulled or used.
//! - Pulled components are checked against their digests and kept on disk
//!   by digest (`<cache>/oci/sha256/<hex>.wasm`, written whole and renamed
//!   into place), with the digest each reference last resolved to; a
//!   restart with the registry down serves what was last verified (with
//!   the same key), and says so.
//! - A tag is asked for its digest every `poll_secs` (a HEAD request; an
//!   unchanged digest costs nothing more). A new digest goes through the
//!   same load path as a dropped file: the poller tells whoever listens
//!   (the [`Host`](crate::Host), which asks the registry to load it; the
//!   poller holds no registry), the old version serves until the new one
//!   is loaded, and a rejected one never replaces it. A pinned `@sha256:`
//!   reference is never polled once it serves.
//! - A registry that is down, an unsigned artifact, a signature over
//!   another digest or by another key: the previous version keeps
//!   serving, and the reason is in `/plugins` (`source.error`). With
//!   nothing to serve yet, the plugin is rejected with that reason (a
//!   [`FetchError`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::oci::signature::{self, VerifyKey};
use crate::oci::{self, Credentials, OciError, artifact};
use crate::registry::plugin::MAX_PLUGIN_FILE_BYTES;
use crate::registry::policy::{PolicyError, SourceSpec};

/// What OCI sources need from the host's configuration.
#[derive(Debug)]
pub(crate) struct SourceSettings {
    /// Where pulled components are kept (`<dir>/sha256/<hex>.wasm`).
    pub(crate) cache_dir: PathBuf,
    /// Every OCI-sourced plugin must be signed with this key.
    pub(crate) verify_key: Option<VerifyKey>,
    /// The fingerprint of the key, which a cached component's record of
    /// verification must name to be served offline.
    pub(crate) verify_key_id: Option<String>,
    pub(crate) credentials: Credentials,
}

/// The OCI sources of the registry's plugins, by plugin id.
pub(crate) struct Sources {
    settings: Arc<SourceSettings>,
    state: Mutex<HashMap<String, SourceState>>,
    /// Where a poller sends the file path of a plugin with a new version.
    new_versions: tokio::sync::mpsc::UnboundedSender<PathBuf>,
}

struct SourceState {
    spec: SourceSpec,
    /// The newest verified digest, whose bytes are in the cache.
    latest: Option<String>,
    error: Option<String>,
    checked_at: Option<SystemTime>,
    poller: Option<tokio::task::AbortHandle>,
}

impl Drop for SourceState {
    fn drop(&mut self) {
        if let Some(poller) = &self.poller {
            poller.abort();
        }
    }
}

/// A plugin's source as `/plugins` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SourceReport {
    /// The reference as the policy writes it.
    pub oci: String,
    /// The digest serving (or about to), once one was verified.
    pub digest: Option<String>,
    pub poll_secs: u64,
    /// When the registry last answered, RFC 3339.
    pub checked_at: Option<String>,
    /// Why the newest check did not give a new version, if it did not.
    pub error: Option<String>,
    /// Whether signatures are required (`--verify-key`).
    pub verified: bool,
}

/// Why an OCI source gave nothing to serve: the reason its plugin is
/// refused with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    /// No version was verified yet: why the registry gave none (the
    /// reason `/plugins` shows as `source.error`).
    #[error("{0}")]
    NoVersion(String),
    /// The verified digest is not a sha256 one, which the cache keeps.
    #[error("a digest that is not sha256")]
    NotSha256,
    /// The cached component of the digest cannot be read.
    #[error("cannot read the cached {digest}: {source}")]
    CacheUnreadable {
        digest: String,
        source: std::io::Error,
    },
    /// The policy names a source, and a plugin file sits beside it too.
    #[error(
        "{} names an OCI source and {} exists too: remove one",
        policy.display(),
        file.display()
    )]
    AlsoAFile { policy: PathBuf, file: PathBuf },
}

/// What one check of a source found.
enum Checked {
    /// The digest already known.
    Unchanged,
    /// A new digest, verified and in the cache.
    New(String),
}

impl Sources {
    /// The sources, and the paths of plugins whose registries have a new
    /// version for them, to be loaded (the host reads them).
    pub(crate) fn new(
        settings: SourceSettings,
    ) -> (Self, tokio::sync::mpsc::UnboundedReceiver<PathBuf>) {
        let (new_versions, paths) = tokio::sync::mpsc::unbounded_channel();
        let sources = Sources {
            settings: Arc::new(settings),
            state: Mutex::default(),
            new_versions,
        };
        (sources, paths)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SourceState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes plugin `id` (at `path`) should serve from `spec`: those of
    /// the newest verified digest, checking the registry first when this
    /// source is new (or its spec changed). Starts the poller.
    pub(crate) async fn fetch(
        self: &Arc<Self>,
        id: &str,
        path: &Path,
        spec: SourceSpec,
    ) -> Result<Vec<u8>, FetchError> {
        let known = {
            let state = self.lock();
            state
                .get(id)
                .filter(|state| state.spec == spec)
                .map(|state| (state.latest.clone(), state.error.clone()))
        };
        let digest = match known {
            Some((Some(digest), _)) => digest,
            Some((None, error)) => return Err(FetchError::NoVersion(error.unwrap_or_default())),
            None => {
                let checked = self.check(&spec, None).await;
                let mut state = self.lock();
                let mut entry = SourceState {
                    spec: spec.clone(),
                    latest: None,
                    error: None,
                    checked_at: None,
                    poller: None,
                };
                match checked {
                    Ok(Checked::New(digest)) => {
                        entry.latest = Some(digest);
                        entry.checked_at = Some(SystemTime::now());
                    }
                    Ok(Checked::Unchanged) => {}
                    Err(reason) => match self.offline_fallback(&spec) {
                        Some(digest) => {
                            entry.error = Some(format!(
                                "{reason}; serving {digest}, verified earlier and cached"
                            ));
                            entry.latest = Some(digest);
                        }
                        None => entry.error = Some(reason.to_string()),
                    },
                }
                let pinned = oci::parse_reference(&spec.oci)
                    .is_ok_and(|reference| reference.digest().is_some());
                if !(pinned && entry.latest.is_some()) {
                    entry.poller = Some(self.spawn_poller(id, path, spec.clone()));
                }
                let result = entry.latest.clone().ok_or(entry.error.clone());
                state.insert(id.to_string(), entry);
                match result {
                    Ok(digest) => digest,
                    Err(reason) => return Err(FetchError::NoVersion(reason.unwrap_or_default())),
                }
            }
        };
        let file = self.cached_file(&digest).ok_or(FetchError::NotSha256)?;
        tokio::fs::read(&file)
            .await
            .map_err(|source| FetchError::CacheUnreadable { digest, source })
    }

    /// Stops following plugin `id`'s source (its policy is gone, or no
    /// longer names one).
    pub(crate) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Plugin `id`'s source, for `/plugins`.
    pub(crate) fn report(&self, id: &str) -> Option<SourceReport> {
        let state = self.lock();
        let state = state.get(id)?;
        Some(SourceReport {
            oci: state.spec.oci.clone(),
            digest: state.latest.clone(),
            poll_secs: state.spec.poll.as_secs(),
            checked_at: state
                .checked_at
                .map(|at| humantime::format_rfc3339_millis(at).to_string()),
            error: state.error.clone(),
            verified: self.settings.verify_key.is_some(),
        })
    }

    /// Resolves `spec` and, for a digest other than `known`, verifies its
    /// signature (when required) and puts its component in the cache.
    async fn check(&self, spec: &SourceSpec, known: Option<&str>) -> Result<Checked, OciError> {
        let reference = oci::parse_reference(&spec.oci)?;
        let registry = reference.resolve_registry().to_string();
        let auth = self.settings.credentials.lookup(&registry).await;
        let client = oci::client_for(&reference);
        let digest = artifact::resolve(&client, &reference, &auth).await?;
        if known == Some(digest.as_str()) {
            return Ok(Checked::Unchanged);
        }
        let file = self.cached_file(&digest).ok_or_else(|| {
            OciError::Artifact(format!(
                "the registry answered a digest that is not sha256: {digest}"
            ))
        })?;
        // A digest's signature by a key, once verified, stays valid (its
        // bytes cannot change): a restart does not ask the registry again.
        if let Some(key) = &self.settings.verify_key
            && !self.verified_before(&file)
        {
            signature::verify(&reference, &digest, &auth, key).await?;
        }
        if !file.exists() {
            let wasm =
                artifact::pull(&client, &reference, &digest, &auth, MAX_PLUGIN_FILE_BYTES).await?;
            write_whole(&file, &wasm).map_err(|source| OciError::Cache {
                file: file.clone(),
                source,
            })?;
        }
        if let Some(key_id) = &self.settings.verify_key_id {
            let _ = write_whole(&file.with_extension("verified"), key_id.as_bytes());
        }
        let _ = write_whole(&self.resolved_file(&spec.oci), digest.as_bytes());
        Ok(Checked::New(digest))
    }

    /// Whether the cached component at `file` was verified with the
    /// current key.
    fn verified_before(&self, file: &Path) -> bool {
        let Some(key_id) = &self.settings.verify_key_id else {
            return false;
        };
        file.exists()
            && std::fs::read_to_string(file.with_extension("verified"))
                .is_ok_and(|verified| verified == *key_id)
    }

    /// The digest `spec` last resolved to, if it is cached and (when
    /// signatures are required) was verified with the current key.
    fn offline_fallback(&self, spec: &SourceSpec) -> Option<String> {
        let digest = std::fs::read_to_string(self.resolved_file(&spec.oci)).ok()?;
        let file = self.cached_file(digest.trim())?;
        if !file.exists() {
            return None;
        }
        if self.settings.verify_key_id.is_some() && !self.verified_before(&file) {
            return None;
        }
        Some(digest.trim().to_string())
    }

    fn cached_file(&self, digest: &str) -> Option<PathBuf> {
        let hex = oci::digest_hex(digest)?;
        Some(
            self.settings
                .cache_dir
                .join("sha256")
                .join(format!("{hex}.wasm")),
        )
    }

    /// Where the digest a reference last resolved to is written.
    fn resolved_file(&self, reference: &str) -> PathBuf {
        let name = crate::registry::plugin::content_hash(reference.as_bytes());
        self.settings.cache_dir.join("refs").join(name)
    }

    fn spawn_poller(
        self: &Arc<Self>,
        id: &str,
        path: &Path,
        spec: SourceSpec,
    ) -> tokio::task::AbortHandle {
        let sources = Arc::downgrade(self);
        let (id, path) = (id.to_string(), path.to_path_buf());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(spec.poll).await;
                let Some(sources) = sources.upgrade() else {
                    return;
                };
                let known = sources.lock().get(&id).and_then(|s| s.latest.clone());
                let checked = sources.check(&spec, known.as_deref()).await;
                let mut state = sources.lock();
                let Some(entry) = state.get_mut(&id).filter(|entry| entry.spec == spec) else {
                    return;
                };
                match checked {
                    Ok(Checked::Unchanged) => {
                        entry.checked_at = Some(SystemTime::now());
                        entry.error = None;
                    }
                    Ok(Checked::New(digest)) => {
                        tracing::info!(plugin = %id, %digest, source = %spec.oci, "a new version in the registry");
                        entry.checked_at = Some(SystemTime::now());
                        entry.error = None;
                        entry.latest = Some(digest);
                        drop(state);
                        if sources.new_versions.send(path.clone()).is_err() {
                            return;
                        }
                    }
                    Err(reason) => {
                        let reason = reason.to_string();
                        if entry.error.as_deref() != Some(reason.as_str()) {
                            tracing::warn!(plugin = %id, source = %spec.oci, %reason, "the registry gave no new version");
                        }
                        entry.error = Some(reason);
                    }
                }
            }
        })
        .abort_handle()
    }
}

/// The `[source]` of the plugin at `path`'s own policy, if it has one.
/// A policy that cannot be read as text counts as none here (the load
/// reports it); a `[source]` that is not valid is an error.
pub(crate) async fn declared(path: &Path) -> Result<Option<SourceSpec>, PolicyError> {
    match tokio::fs::read_to_string(crate::registry::policy::policy_path(path)).await {
        Ok(text) => crate::registry::policy::source(&text),
        Err(_) => Ok(None),
    }
}

/// A key's fingerprint: the SHA-256 of its PEM text.
pub(crate) fn key_id(pem: &str) -> String {
    format!("{:x}", Sha256::digest(pem.as_bytes()))
}

/// Writes `bytes` to a temporary name beside `file`, then renames it into
/// place: a reader never sees half a file.
fn write_whole(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = file
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let temporary = file.with_file_name(format!(".{name}.{}.part", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, file)
}
