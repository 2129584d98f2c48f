//! The on-disk cache of compiled plugins, so that a restart, or a re-drop of
//! a file whose content has not changed, does not compile it again.
//!
//! An entry is wasmtime's precompiled form of a component, named by the
//! SHA-256 of the component's bytes and by the engine's compatibility hash
//! (wasmtime version and every setting that affects code generation), so an
//! entry is only ever loaded by an engine that could have produced it.
//!
//! Loading an entry maps native code into the process, so an entry is never
//! trusted as it lies on disk: each ends with a trailer, the SHA-256 of the
//! engine key, the content hash and the artifact, written with it. An entry
//! whose trailer does not match (a flipped bit, a torn write, a file from
//! elsewhere) is deleted, logged and compiled afresh; wasmtime's own header
//! checks come only after. The checksum guards against damage, not against
//! someone who can write the folder: that must be the user running toolhost
//! alone (it is created 0700).

use std::hash::{Hash, Hasher};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Ends every entry, after its checksum; also names the entry format.
const TRAILER_MAGIC: &[u8; 8] = b"THCACHE1";
const TRAILER_BYTES: usize = 32 + TRAILER_MAGIC.len();

pub(crate) struct ArtifactCache {
    dir: PathBuf,
}

/// The compatibility key of an engine: entries of the baseline and the
/// optimising compiler (`compiler.rs`) never mix.
fn engine_key(engine: &Engine) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

impl ArtifactCache {
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Self> {
        create_private_dir(dir)
            .with_context(|| format!("cannot create cache folder {}", dir.display()))?;
        Ok(ArtifactCache {
            dir: dir.to_path_buf(),
        })
    }

    fn entry_path(&self, engine_key: &str, content_hash: &str) -> PathBuf {
        self.dir.join(format!("{content_hash}-{engine_key}.cwasm"))
    }

    /// The cached compilation, by `engine`, of the component with this
    /// content hash, if there is a usable one. A damaged entry is removed
    /// and reported as a miss, so the caller compiles afresh.
    pub(crate) fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let engine_key = engine_key(engine);
        let path = self.entry_path(&engine_key, content_hash);
        let mut bytes = Vec::new();
        match std::fs::File::open(&path).and_then(|mut file| file.read_to_end(&mut bytes)) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read cache entry; compiling afresh");
                return None;
            }
        }
        let discard = |reason: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %reason, "discarding damaged cache entry; compiling afresh");
            let _ = std::fs::remove_file(&path);
        };
        let Some(artifact) = verified(&engine_key, content_hash, &bytes) else {
            discard(&"its checksum does not match");
            return None;
        };
        // SAFETY: the artifact is byte for byte what `store`
        // wrote from `Engine::precompile_component` of an engine with the
        // same compatibility key (the trailer proves it, short of someone
        // with write access to this user's private folder); wasmtime
        // additionally checks the header and engine settings.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(component) => Some(component),
            Err(error) => {
                discard(&error);
                None
            }
        }
    }

    /// Stores an artifact compiled by `engine`'s settings. A failure to
    /// write is logged, never fatal: the caller has the artifact either way.
    pub(crate) fn store(&self, engine: &Engine, content_hash: &str, artifact: &[u8]) {
        let engine_key = engine_key(engine);
        let path = self.entry_path(&engine_key, content_hash);
        let trailer = trailer(&engine_key, content_hash, artifact);
        if let Err(error) = write_atomically(&path, &[artifact, &trailer]) {
            tracing::warn!(path = %path.display(), %error, "could not write cache entry");
        }
    }

    /// Removes `engine`'s entry for a component, if there is one: the
    /// baseline entry once the optimised one is stored.
    pub(crate) fn remove(&self, engine: &Engine, content_hash: &str) {
        let _ = std::fs::remove_file(self.entry_path(&engine_key(engine), content_hash));
    }
}

/// The trailer of an entry: SHA-256 over the engine key, the content hash
/// and the artifact, then a magic tag.
fn trailer(engine_key: &str, content_hash: &str, artifact: &[u8]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    hasher.update(engine_key.as_bytes());
    hasher.update(content_hash.as_bytes());
    hasher.update(artifact);
    let mut trailer = hasher.finalize().to_vec();
    trailer.extend_from_slice(TRAILER_MAGIC);
    trailer
}

/// The artifact of an entry, if its trailer vouches for it.
fn verified<'a>(engine_key: &str, content_hash: &str, entry: &'a [u8]) -> Option<&'a [u8]> {
    let artifact = entry.get(..entry.len().checked_sub(TRAILER_BYTES)?)?;
    (trailer(engine_key, content_hash, artifact) == entry[artifact.len()..]).then_some(artifact)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Write to a temporary file and rename it over the entry, so a reader never
/// sees half an entry, even when two processes share the cache.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::File::create(&temp)?;
    for part in parts {
        file.write_all(part)?;
    }
    drop(file);
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}
