//! The on-disk cache of compiled plugins, so that a restart, or a re-drop of
//! a file whose content has not changed, does not compile it again.
//!
//! An entry is wasmtime's precompiled form of a component, named by the
//! SHA-256 of the component's bytes and by the engine's compatibility hash
//! (wasmtime version and every setting that affects code generation), so an
//! entry is only ever loaded by an engine that could have produced it.
//!
//! Loading an entry maps native code into the process: the cache folder must
//! be writable only by the user running toolhost (it is created 0700).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use wasmtime::Engine;
use wasmtime::component::Component;

pub struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

impl ArtifactCache {
    pub fn open(dir: &Path, engine: &Engine) -> anyhow::Result<Self> {
        create_private_dir(dir)
            .with_context(|| format!("cannot create cache folder {}", dir.display()))?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(ArtifactCache {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    fn entry_path(&self, content_hash: &str) -> PathBuf {
        self.dir
            .join(format!("{content_hash}-{}.cwasm", self.engine_key))
    }

    /// The cached compilation of the component with this content hash, if
    /// there is a usable one. A damaged entry is removed and reported as a
    /// miss, so the caller compiles afresh.
    pub fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let path = self.entry_path(content_hash);
        if !path.exists() {
            return None;
        }
        // SAFETY: entries are written only by `store` below, from
        // `Engine::precompile_component` of an engine with the same
        // compatibility key, into a folder private to this user; wasmtime
        // additionally checks the header and engine settings on load.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding unusable cache entry");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Compiles `wasm` and stores the result. A failure to write the cache
    /// is logged, never fatal: the compiled component is still returned.
    pub fn compile_and_store(
        &self,
        engine: &Engine,
        content_hash: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<Component> {
        let artifact = engine.precompile_component(wasm)?;
        let path = self.entry_path(content_hash);
        if let Err(error) = write_atomically(&path, &artifact) {
            tracing::warn!(path = %path.display(), %error, "could not write cache entry");
        }
        // SAFETY: `artifact` was produced just above by this very engine.
        unsafe { Component::deserialize(engine, &artifact) }
    }
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
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}
