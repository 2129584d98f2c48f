//! The on-disk cache of compiled plugins, so that a restart, or a re-drop of
//! a file whose content has not changed, does not compile it again.
//!
//! An entry is wasmtime's precompiled form of a component, named by the
//! SHA-256 of the component's bytes and by the engine's compatibility hash
//! (wasmtime version and every setting that affects code generation), so an
//! entry is only ever loaded by an engine that could have produced it.
//!
//! Loading an entry maps native code into the process, so an entry is never
//! trusted as it lies on disk: each ends with a trailer, the XXH3-128 of the
//! engine key, the content hash and the artifact, written with it. An entry
//! whose trailer does not match (a flipped bit, a torn write, a file from
//! elsewhere) is deleted, logged and compiled afresh; wasmtime's own header checks come only after. The checksum
//! guards against damage, not against someone who can write the folder:
//! that must be the user running toolhost alone (it is created 0700). So it
//! need not be cryptographic, and a warm restart of 1,000 plugins reads
//! 274 MB of entries: SHA-256 (the first format) was 17 % of its CPU,
//! XXH3 runs at memory speed.
//!
//! A fresh compile's entry is served from the file as soon as it is
//! written, mapped through the descriptor that wrote it, with no reading
//! back; the compile is written into its entry as wasmtime emits it
//! (`compile_into`), not gathered in memory first. An entry found on disk
//! is checked first.
//!
//! A verified entry is mapped, not read: the code is then the page cache's,
//! resident only in the pages a call runs and shared with the file, instead
//! of a private copy of every plugin's whole artifact (at 1,000 plugins,
//! 400 of 436 MiB of the idle server were such copies). Entries are only
//! ever replaced by a rename and removed by unlinking, both of which leave
//! a mapped entry as it was; an entry changed in place by someone else
//! after it was verified is what the folder's owner must not do.
//!
//! The cache is bounded two ways. A server forgets the entries of a
//! version it no longer serves (replaced or removed; `Registry::apply`):
//! a workshop's edit loop would otherwise leave 40–50 MB per Python
//! version behind. And the folder is kept under [`MAX_BYTES`], the entries
//! used least recently removed first (a hit refreshes an entry's time), for
//! what no server forgets: versions of other processes sharing the folder,
//! entries of an older wasmtime. (A server sharing its folder with another
//! may remove an entry the other serves; the other compiles it again at
//! its next start.)

use std::hash::{Hash, Hasher};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use wasmtime::Engine;
use wasmtime::component::Component;
use xxhash_rust::xxh3::Xxh3;

use super::failure::CompileError;

/// Ends every entry, after its checksum (`THCACHE1` ended a SHA-256).
const TRAILER_MAGIC: &[u8; 8] = b"THCACHE2";
/// The entry format, in each entry's name: entries of the first format
/// (`{hash}-{key}.cwasm`, SHA-256) are never opened, and age out by the
/// size bound or go with their version (`forget`).
const ENTRY_FORMAT: &str = "v2";
/// How the temporary file of an entry being written is named.
const WRITING: &str = ".writing-";

/// How long an entry being written may go untouched before it counts as
/// abandoned (its writer died).
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(60 * 60);

const TRAILER_BYTES: usize = 16 + TRAILER_MAGIC.len();

/// How much of an entry is read at a time to check it.
const VERIFY_CHUNK: usize = 256 * 1024;

/// The most the cache folder holds (4 GiB): thirty Python plugins of a
/// workshop take about 1.5 GB, a thousand Rust plugins about as much.
pub(crate) const MAX_BYTES: u64 = 4 << 30;

/// Where a loaded component's compiled image lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Image {
    /// Mapped from its cache entry: its pages can be let go and are read
    /// again from the file (`allocator::release_mapped_file_pages`).
    Mapped,
    /// In this process's own memory (no cache, or an entry that cannot be
    /// mapped as code): it must stay as it is.
    InMemory,
}

#[derive(Clone)]
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
        let cache = ArtifactCache {
            dir: dir.to_path_buf(),
        };
        cache.sweep_abandoned_writes();
        Ok(cache)
    }

    /// Removes entries being written by a process that died meanwhile:
    /// those not touched for an hour (another server sharing the folder may
    /// be writing a newer one).
    fn sweep_abandoned_writes(&self) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let abandoned = |entry: &std::fs::DirEntry| {
            entry.file_name().to_string_lossy().starts_with(WRITING)
                && entry
                    .metadata()
                    .and_then(|metadata| metadata.modified())
                    .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > ABANDONED_AFTER))
        };
        for entry in listing.flatten().filter(abandoned) {
            let _ = std::fs::remove_file(entry.path());
        }
    }

    /// An entry's file: its format in the name, so that a toolhost of
    /// another entry format sharing the folder (a rollback, a CLI beside a
    /// server) never opens, and never removes, this one's entries.
    fn entry_path(&self, engine_key: &str, content_hash: &str) -> PathBuf {
        self.dir
            .join(format!("{content_hash}-{engine_key}.{ENTRY_FORMAT}.cwasm"))
    }

    /// The cached compilation, by `engine`, of the component with this
    /// content hash, if there is a usable one. A damaged entry is removed
    /// and reported as a miss, so the caller compiles afresh.
    pub(crate) fn load(&self, engine: &Engine, content_hash: &str) -> Option<(Component, Image)> {
        let engine_key = engine_key(engine);
        let path = self.entry_path(&engine_key, content_hash);
        let discard = |reason: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %reason, "discarding damaged cache entry; compiling afresh");
            let _ = std::fs::remove_file(&path);
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read cache entry; compiling afresh");
                return None;
            }
        };
        match verify(&mut file, &engine_key, content_hash) {
            Ok(true) => {}
            Ok(false) => {
                discard(&"its checksum does not match");
                return None;
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read cache entry; compiling afresh");
                return None;
            }
        }
        // SAFETY: the file is byte for byte what `compile_into` wrote from
        // `Engine::precompile_component_to` of an engine with the same
        // compatibility key (the trailer proves it, short of someone with
        // write access to this user's private folder), and this process
        // never changes an entry in place (module docs); wasmtime
        // additionally checks the header and engine settings, and ignores
        // the trailer after the artifact's sections. The file mapped is the
        // one just checked (its descriptor, not its name again).
        let mapped = unsafe { Component::deserialize_file(engine, same_file(&file, &path)) };
        let loaded = match mapped {
            Ok(component) => (component, Image::Mapped),
            // Not mappable as code (a folder on a `noexec` mount, no
            // mappings left) is not damage: the checked bytes, in memory.
            Err(map_error) => match in_memory(engine, &mut file) {
                Ok(component) => {
                    tracing::debug!(path = %path.display(), error = %format!("{map_error:#}"), "cache entry read into memory: it cannot be mapped as code");
                    (component, Image::InMemory)
                }
                Err(error) => {
                    discard(&error);
                    return None;
                }
            },
        };
        // Used now: the last entries the size bound removes.
        let _ = file.set_modified(std::time::SystemTime::now());
        Some(loaded)
    }

    /// A fresh compile's entry, written as `compile` emits the artifact
    /// into it (never gathered in memory first), then mapped without
    /// reading it back to check it: what is mapped is the file this call
    /// wrote and still holds open, whatever is renamed over its name
    /// meanwhile (where it cannot be mapped as code, on a `noexec` mount
    /// say, it is read into memory). `Ok(None)` when the entry could not
    /// be written or loaded: the caller compiles again, into memory (a full
    /// disk costs a second compile, never a failed load); `Err` when the
    /// compile failed. The entry is written under a temporary name, removed
    /// however this ends (and by [`ArtifactCache::open`] if the process
    /// died meanwhile), then renamed into place.
    pub(crate) fn compile_into(
        &self,
        engine: &Engine,
        content_hash: &str,
        compile: impl FnOnce(&mut (dyn std::io::Write + Send)) -> Result<(), CompileError>,
    ) -> Result<Option<(Component, Image)>, CompileError> {
        let engine_key = engine_key(engine);
        let path = self.entry_path(&engine_key, content_hash);
        let not_written = |error: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %error, "could not write cache entry");
        };
        let temp = match tempfile::Builder::new()
            .prefix(WRITING)
            .tempfile_in(&self.dir)
        {
            Ok(temp) => temp,
            Err(error) => {
                not_written(&error);
                return Ok(None);
            }
        };
        let mut out = Checksummed {
            inner: std::io::BufWriter::with_capacity(1 << 20, temp.as_file()),
            hasher: checksum(&engine_key, content_hash),
            failed: None,
        };
        let compiled = compile(&mut out);
        // Moved whole (a block), so that nothing left of it borrows the
        // file past here.
        let Checksummed {
            inner,
            hasher,
            failed,
        } = { out };
        if let Some(error) = failed {
            not_written(&error);
            return Ok(None);
        }
        compiled?;
        let finished = inner
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &sealed(hasher)));
        if let Err(error) = finished {
            not_written(&error);
            return Ok(None);
        }
        let file = match temp.persist(&path) {
            Ok(file) => file,
            Err(error) => {
                not_written(&error);
                return Ok(None);
            }
        };
        self.keep_under(MAX_BYTES);
        // SAFETY: `file` holds byte for byte what `compile` wrote, an
        // artifact of `engine`'s settings (`Engine::precompile_component_to`),
        // and this process never changes an entry in place (module docs);
        // wasmtime additionally checks the header and engine settings, and
        // ignores the trailer after the artifact's sections.
        match unsafe { Component::deserialize_file(engine, same_file(&file, &path)) } {
            Ok(component) => Ok(Some((component, Image::Mapped))),
            Err(error) => {
                tracing::debug!(path = %path.display(), error = %format!("{error:#}"), "cache entry not mapped: it is served from memory");
                let artifact = std::fs::read(same_file(&file, &path)).ok();
                // SAFETY: the same bytes, read back whole.
                Ok(artifact
                    .and_then(|artifact| unsafe { Component::deserialize(engine, artifact) }.ok())
                    .map(|component| (component, Image::InMemory)))
            }
        }
    }

    /// Removes every entry of these components (both compilers', any
    /// engine's): versions no longer served.
    pub(crate) fn forget(&self, content_hashes: &[String]) {
        for (path, _, _) in self.entries() {
            let hash = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.split_once('-'))
                .map(|(hash, _)| hash);
            if hash.is_some_and(|hash| content_hashes.iter().any(|gone| gone == hash)) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Removes the entries used least recently until the folder's entries
    /// take at most `max` bytes.
    fn keep_under(&self, max: u64) {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|(_, bytes, _)| bytes).sum();
        if total <= max {
            return;
        }
        entries.sort_by_key(|(_, _, used)| *used);
        for (path, bytes, _) in entries {
            if total <= max {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::info!(path = %path.display(), bytes, "compile cache over its bound; removed the entry used least recently");
                total -= bytes;
            }
        }
    }

    /// Every entry: its path, size and last use.
    fn entries(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        listing
            .flatten()
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "cwasm"))
            .filter_map(|entry| {
                let metadata = entry.metadata().ok()?;
                Some((entry.path(), metadata.len(), metadata.modified().ok()?))
            })
            .collect()
    }

    /// Removes `engine`'s entry for a component, if there is one: the
    /// baseline entry once the optimised one is stored.
    pub(crate) fn remove(&self, engine: &Engine, content_hash: &str) {
        let _ = std::fs::remove_file(self.entry_path(&engine_key(engine), content_hash));
    }
}

/// The trailer's hash, over the engine key and content hash so far.
fn checksum(engine_key: &str, content_hash: &str) -> Xxh3 {
    let mut hasher = Xxh3::new();
    hasher.update(engine_key.as_bytes());
    hasher.update(content_hash.as_bytes());
    hasher
}

/// The trailer once the artifact is hashed: the hash, then the magic tag.
fn sealed(hasher: Xxh3) -> Vec<u8> {
    let mut trailer = hasher.digest128().to_le_bytes().to_vec();
    trailer.extend_from_slice(TRAILER_MAGIC);
    trailer
}

/// Whether the entry open as `file` ends with the trailer of what comes
/// before it, read in pieces (an artifact is never held in memory to check
/// it).
fn verify(file: &mut std::fs::File, engine_key: &str, content_hash: &str) -> std::io::Result<bool> {
    let Some(artifact_bytes) = file.metadata()?.len().checked_sub(TRAILER_BYTES as u64) else {
        return Ok(false);
    };
    let mut hasher = checksum(engine_key, content_hash);
    let mut chunk = vec![0; VERIFY_CHUNK];
    let mut artifact = file.take(artifact_bytes);
    let mut copied = 0;
    loop {
        match artifact.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                hasher.update(&chunk[..read]);
                copied += read as u64;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    let mut trailer = Vec::with_capacity(TRAILER_BYTES);
    file.read_to_end(&mut trailer)?;
    Ok(copied == artifact_bytes && trailer == sealed(hasher))
}

/// A name that opens `file` itself (Linux: its descriptor under /proc), so
/// that what is mapped is what was checked, whatever is renamed over the
/// entry meanwhile; elsewhere, the entry's path.
fn same_file(file: &std::fs::File, path: &Path) -> PathBuf {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd as _;
        let by_descriptor = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if by_descriptor.exists() {
            return by_descriptor;
        }
    }
    let _ = file;
    path.to_path_buf()
}

/// The checked entry open as `file`, read into memory and loaded from
/// there.
fn in_memory(engine: &Engine, file: &mut std::fs::File) -> anyhow::Result<Component> {
    use std::io::Seek as _;
    let mut entry = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))?;
    file.read_to_end(&mut entry)?;
    let artifact = &entry[..entry.len().saturating_sub(TRAILER_BYTES)];
    // SAFETY: as for the mapped load in `load`: these are the bytes checked.
    unsafe { Component::deserialize(engine, artifact) }.map_err(anyhow::Error::from)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// A writer that checksums what passes through it, as an entry's trailer
/// does, and keeps the first error of the writer beneath (so that a cache
/// that cannot be written is told apart from a compile that failed).
struct Checksummed<W> {
    inner: W,
    hasher: Xxh3,
    failed: Option<std::io::Error>,
}

impl<W: std::io::Write> std::io::Write for Checksummed<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self.inner.write(bytes) {
            Ok(written) => {
                self.hasher.update(&bytes[..written]);
                Ok(written)
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => Err(error),
            Err(error) => {
                let told = std::io::Error::new(error.kind(), error.to_string());
                self.failed.get_or_insert(error);
                Err(told)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in a folder of its own, an engine, and that engine's
    /// artifact of an empty component.
    fn a_cache_and_an_artifact() -> (tempfile::TempDir, ArtifactCache, Engine, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(dir.path()).unwrap();
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let artifact = engine.precompile_component(b"\0asm\x0d\0\x01\0").unwrap();
        (dir, cache, engine, artifact)
    }

    /// Stores `artifact` as the entry of `content_hash`, as a compile
    /// streamed into it would.
    fn store(cache: &ArtifactCache, engine: &Engine, content_hash: &str, artifact: &[u8]) {
        cache
            .compile_into(engine, content_hash, |out| {
                out.write_all(artifact)
                    .map_err(|e| CompileError::Invalid(e.to_string()))
            })
            .unwrap()
            .expect("stored");
    }

    #[test]
    fn an_entry_is_checked_then_mapped_and_a_damaged_one_discarded() {
        let (dir, cache, engine, artifact) = a_cache_and_an_artifact();
        store(&cache, &engine, "abc", &artifact);
        let path = cache.entry_path(&engine_key(&engine), "abc");

        let (component, image) = cache.load(&engine, "abc").expect("a stored entry loads");
        assert_eq!(image, Image::Mapped);
        #[cfg(target_os = "linux")]
        {
            // Mapped, not copied; its pages can be let go and read back the
            // same (runtime/allocator.rs).
            let resident = || -> u64 {
                let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
                let mut inside = false;
                let mut kib = 0;
                for line in smaps.lines() {
                    if line
                        .split_whitespace()
                        .next()
                        .is_some_and(|first| first.contains('-'))
                    {
                        inside = line.contains(path.to_str().unwrap());
                    } else if inside && let Some(rss) = line.strip_prefix("Rss:") {
                        kib += rss
                            .trim()
                            .trim_end_matches("kB")
                            .trim()
                            .parse::<u64>()
                            .unwrap();
                    }
                }
                kib
            };
            let range = component.image_range();
            let len = range.end.addr() - range.start.addr();
            // SAFETY: the component's image, alive while `component` is.
            let image = unsafe { std::slice::from_raw_parts(range.start, len) }.to_vec();
            assert!(resident() > 0, "the entry is mapped, not copied");
            super::super::allocator::release_mapped_file_pages(range.start, len);
            assert_eq!(resident(), 0, "its pages were let go");
            // SAFETY: as above.
            let again = unsafe { std::slice::from_raw_parts(range.start, len) };
            assert!(image == again, "the same bytes come back");
        }
        drop(component);

        let mut damaged = std::fs::read(&path).unwrap();
        damaged[artifact.len() / 2] ^= 1;
        std::fs::write(&path, &damaged).unwrap();
        assert!(cache.load(&engine, "abc").is_none());
        assert!(!path.exists(), "a damaged entry is removed");
        std::fs::write(&path, &damaged[..TRAILER_BYTES - 1]).unwrap();
        assert!(cache.load(&engine, "abc").is_none());
        assert!(cache.load(&engine, "missing").is_none());

        // An entry of the first format (a SHA-256, then `THCACHE1`, under
        // the name without the format) is neither opened nor removed: a
        // toolhost of that format may share the folder.
        let first_format = dir
            .path()
            .join(format!("abc-{}.cwasm", engine_key(&engine)));
        let mut older = artifact.to_vec();
        older.extend_from_slice(&[0; 32]);
        older.extend_from_slice(b"THCACHE1");
        std::fs::write(&first_format, &older).unwrap();
        assert!(cache.load(&engine, "abc").is_none());
        assert!(
            first_format.exists(),
            "another format's entry is left alone"
        );
        assert!(path.to_str().unwrap().ends_with(".v2.cwasm"), "{path:?}");
        // The current format, stored again, is sound.
        store(&cache, &engine, "abc", &artifact);
        let mut file = std::fs::File::open(&path).unwrap();
        assert!(verify(&mut file, &engine_key(&engine), "abc").unwrap());
    }

    /// A compile streamed into its entry writes what `precompile_component`
    /// returns, with the trailer a later start checks, and is served from
    /// the file written, mapped; a compile that fails leaves nothing in the
    /// folder.
    #[test]
    fn a_compile_streamed_into_its_entry_is_the_artifact_and_a_failed_one_leaves_nothing() {
        let (dir, cache, engine, _) = a_cache_and_an_artifact();
        let wasm = wat::parse_str(
            r#"(component
                 (core module $m (func (export "f") (result i32) i32.const 7))
                 (core instance $i (instantiate $m))
                 (func (export "f") (result s32) (canon lift (core func $i "f"))))"#,
        )
        .unwrap();
        let artifact = engine.precompile_component(&wasm).unwrap();
        let (component, image) = cache
            .compile_into(&engine, "abc", |out| {
                engine
                    .precompile_component_to(&wasm, out)
                    .map(drop)
                    .map_err(|e| CompileError::Invalid(e.to_string()))
            })
            .unwrap()
            .expect("written and mapped");
        assert_eq!(image, Image::Mapped);
        let path = cache.entry_path(&engine_key(&engine), "abc");
        let entry = std::fs::read(&path).unwrap();
        assert_eq!(&entry[..entry.len() - TRAILER_BYTES], &artifact[..]);
        // What is mapped is the file written, whatever replaces its name
        // (a rename, as entries are only ever replaced).
        let other = dir.path().join("another");
        std::fs::write(&other, b"another entry").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let range = component.image_range();
        let len = range.end.addr() - range.start.addr();
        // SAFETY: the component's image, alive while `component` is.
        let mapped = unsafe { std::slice::from_raw_parts(range.start, len) };
        let compared = len.min(artifact.len());
        assert_eq!(&mapped[..compared], &artifact[..compared]);
        std::fs::write(&other, &entry).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        assert!(verify(&mut file, &engine_key(&engine), "abc").unwrap());
        assert!(cache.load(&engine, "abc").is_some());
        drop(component);

        let failed = cache.compile_into(&engine, "def", |out| {
            out.write_all(b"half an artifact").unwrap();
            Err(CompileError::Invalid("the compile failed".into()))
        });
        assert!(matches!(failed, Err(CompileError::Invalid(_))));
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [path.file_name().unwrap()],
            "no temporary file is left"
        );
    }

    /// An entry a dead process was writing is removed as the cache opens;
    /// one written now (by another server sharing the folder) is left.
    #[test]
    fn opening_the_cache_removes_abandoned_writes_only() {
        let dir = tempfile::tempdir().unwrap();
        let abandoned = dir.path().join(format!("{WRITING}dead"));
        let current = dir.path().join(format!("{WRITING}alive"));
        std::fs::write(&abandoned, b"half").unwrap();
        std::fs::write(&current, b"half").unwrap();
        std::fs::File::options()
            .append(true)
            .open(&abandoned)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - 2 * ABANDONED_AFTER)
            .unwrap();
        ArtifactCache::open(dir.path()).unwrap();
        assert!(!abandoned.exists());
        assert!(current.exists());
    }

    #[test]
    fn the_cache_forgets_versions_and_keeps_under_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(dir.path()).unwrap();
        let entry = |name: &str, bytes: usize, age_secs: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; bytes]).unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age_secs);
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        entry("aaa-1.cwasm", 100, 30);
        entry("aaa-2.cwasm", 100, 30);
        entry("bbb-1.cwasm", 100, 20);
        entry("ccc-1.cwasm", 100, 10);
        entry("notes.txt", 1000, 40);
        cache.forget(&["aaa".to_string()]);
        let names = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        assert_eq!(names(), ["bbb-1.cwasm", "ccc-1.cwasm", "notes.txt"]);
        cache.keep_under(150);
        assert_eq!(names(), ["ccc-1.cwasm", "notes.txt"]);
        cache.keep_under(150);
        assert_eq!(names(), ["ccc-1.cwasm", "notes.txt"]);
    }
}
