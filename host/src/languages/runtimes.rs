//! The language runtimes: one component per language that runs a source
//! file as a plugin, so that a Python or JavaScript tool needs no build of
//! its own. Each is built once, with the pinned toolchains, by `make
//! runtimes` (`sdk/python/runtime/`, `sdk/js/runtime/`): CPython with the
//! helper library and a stated set of standard-library modules already
//! imported ([`modules`]), and QuickJS with the helper library. The binary
//! embeds the ones there were when it was built (`build.rs`);
//! `TOOLHOST_PYTHON_RUNTIME` and `TOOLHOST_JS_RUNTIME` name others. A
//! plugin that is a source file is that component with the file in its
//! grants, which each instance reads through the `source` import.

use std::sync::{Arc, OnceLock};

use super::language::Language;

/// A runtime component's bytes and their SHA-256 (its compile key, built
/// into the binary beside them). The binary carries them zstd-compressed:
/// they are decompressed once, the first time a process asks for them.
pub struct RuntimeComponent {
    pub(crate) wasm: std::borrow::Cow<'static, [u8]>,
    pub(crate) hash: String,
}

/// Why a language's runtime component is not there (read once, and kept:
/// cloned to every caller).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoRuntime {
    /// The environment names a file that cannot be read.
    #[error("{variable}={file}: {source}")]
    Unreadable {
        variable: &'static str,
        file: String,
        source: Arc<std::io::Error>,
    },
    /// The language is compiled (Rust): its plugins are their components.
    #[error("a Rust plugin is its built component: there is no runtime for Rust source")]
    Compiled,
    /// None is embedded, and `make runtimes` left none in the repository.
    #[error(
        "this toolhost was built without its {language} runtime: run `make runtimes` in the \
         toolhost repository and build it again, or set {variable}"
    )]
    NotBuilt {
        language: &'static str,
        variable: &'static str,
    },
}

/// The Python runtime's stated standard-library modules, one a line.
const PYTHON_MODULES: &str = include_str!("../../../sdk/python/runtime/modules.txt");

const EMBEDDED_PYTHON: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/python-runtime.bin"));
const EMBEDDED_PYTHON_KIND: &str = include_str!(concat!(env!("OUT_DIR"), "/python-runtime.kind"));
const EMBEDDED_PYTHON_SHA256: &str =
    include_str!(concat!(env!("OUT_DIR"), "/python-runtime.sha256"));
const EMBEDDED_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/js-runtime.bin"));
const EMBEDDED_JS_KIND: &str = include_str!(concat!(env!("OUT_DIR"), "/js-runtime.kind"));
const EMBEDDED_JS_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/js-runtime.sha256"));
/// CPython's standard library for the Python runtime, a zstd-compressed
/// tar, and its top-level modules one a line (empty when not built).
const EMBEDDED_STDLIB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/python-stdlib.tar.zst"));
const EMBEDDED_STDLIB_MODULES: &str = include_str!(concat!(env!("OUT_DIR"), "/python-stdlib.txt"));
/// Where `make runtimes` leaves them in this repository, for a binary
/// built before them.
const BUILT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/runtimes");

/// Where the Python runtime sees the standard library.
pub const PYTHON_STDLIB_GUEST_DIR: &str = "/toolhost/stdlib";

/// Standard-library modules that stay out of the runtime, though their
/// source is there: they need sockets, threads, processes, a terminal or
/// native libraries a WebAssembly sandbox does not give. A source that
/// imports one is built (where the server builds), or refused. The list is
/// `sdk/python/runtime/left-out.txt`, which `make runtimes` also reads to
/// leave them out of the embedded standard library.
pub static PYTHON_LEFT_OUT: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| {
        include_str!("../../../sdk/python/runtime/left-out.txt")
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect()
    });

/// Whether a Python module is one of the standard library's the runtime
/// leaves out ([`PYTHON_LEFT_OUT`]; `asyncio.tasks` with `asyncio`).
pub fn left_out(module: &str) -> bool {
    PYTHON_LEFT_OUT.contains(&module.split('.').next().unwrap_or_default())
}

/// The modules a source of `language` may import with no build.
pub fn modules(language: Language) -> Vec<&'static str> {
    match language.runtime() {
        Language::Python => std::iter::once("toolhost_plugin")
            .chain(
                PYTHON_MODULES
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty() && !line.starts_with('#')),
            )
            .collect(),
        Language::JavaScript | Language::TypeScript => vec!["./toolhost.js"],
        Language::Rust => Vec::new(),
    }
}

/// Whether `language`'s runtime carries `module`.
pub fn carries(language: Language, module: &str) -> bool {
    let modules = modules(language);
    match language.runtime() {
        Language::Python => {
            module == "__future__"
                || modules.iter().any(|known| {
                    *known == module
                        || known
                            .strip_prefix(module)
                            .is_some_and(|rest| rest.starts_with('.'))
                })
                || {
                    // The rest of the standard library, read from disk.
                    let top = module.split('.').next().unwrap_or_default();
                    !left_out(module)
                        && python_stdlib_modules().contains(top)
                        && python_stdlib().is_ok()
                }
        }
        Language::JavaScript | Language::TypeScript => {
            modules.contains(&module) || module == "toolhost.js"
        }
        Language::Rust => false,
    }
}

/// The runtime component, read once: the environment's
/// (`TOOLHOST_PYTHON_RUNTIME`, `TOOLHOST_JS_RUNTIME`), the one built
/// into this binary, or the one `make runtimes` leaves in this
/// repository's `target/runtimes`. Why there is none, else.
pub fn component(language: Language) -> Result<Arc<RuntimeComponent>, NoRuntime> {
    static PYTHON: OnceLock<Result<Arc<RuntimeComponent>, NoRuntime>> = OnceLock::new();
    static JS: OnceLock<Result<Arc<RuntimeComponent>, NoRuntime>> = OnceLock::new();
    let (cell, variable, embedded, kind, digest, built) = match language.runtime() {
        Language::Python => (
            &PYTHON,
            "TOOLHOST_PYTHON_RUNTIME",
            EMBEDDED_PYTHON,
            EMBEDDED_PYTHON_KIND,
            EMBEDDED_PYTHON_SHA256,
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../target/runtimes/python.wasm"
            ),
        ),
        Language::JavaScript | Language::TypeScript => (
            &JS,
            "TOOLHOST_JS_RUNTIME",
            EMBEDDED_JS,
            EMBEDDED_JS_KIND,
            EMBEDDED_JS_SHA256,
            concat!(env!("CARGO_MANIFEST_DIR"), "/../target/runtimes/js.wasm"),
        ),
        Language::Rust => return Err(NoRuntime::Compiled),
    };
    cell.get_or_init(|| {
        let read = |file: &std::ffi::OsStr| {
            let wasm = std::fs::read(file)?;
            let hash = sha256_hex(&wasm);
            Ok::<_, std::io::Error>(RuntimeComponent {
                wasm: wasm.into(),
                hash,
            })
        };
        let component = if let Some(file) = std::env::var_os(variable) {
            read(&file).map_err(|error| NoRuntime::Unreadable {
                variable,
                file: file.to_string_lossy().into_owned(),
                source: Arc::new(error),
            })?
        } else if !embedded.is_empty() {
            RuntimeComponent {
                wasm: if kind.trim() == "zst" {
                    unzstd(embedded)
                        .map_err(|error| NoRuntime::Unreadable {
                            variable,
                            file: "(embedded)".into(),
                            source: Arc::new(error),
                        })?
                        .into()
                } else {
                    embedded.into()
                },
                hash: digest.trim().to_string(),
            }
        } else {
            read(std::ffi::OsStr::new(built)).map_err(|_| NoRuntime::NotBuilt {
                language: language.as_str(),
                variable,
            })?
        };
        Ok(Arc::new(component))
    })
    .clone()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `bytes`, zstd-decompressed: frames one after another, each with its
/// size in its header, as `zstd` and `make runtimes` write them (a runtime
/// in several frames, then a skippable one holding its digest:
/// `sdk/python/runtime/pack.py`). Each frame is decoded straight into its
/// own part of one buffer, the frames shared out among this thread and up
/// to one more per core, so that a runtime is unpacked on every core at
/// once (on this thread alone if no other can be started). Input with no
/// frame of data, or sizes no buffer could hold, is refused.
fn unzstd(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    const SKIPPABLE: u32 = 0x184D_2A50;
    let damaged = || std::io::Error::other("a damaged zstd frame, or one without its size");
    let mut frames = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let length = zstd::zstd_safe::find_frame_compressed_size(rest).map_err(|_| damaged())?;
        let (frame, after) = rest.split_at_checked(length).ok_or_else(damaged)?;
        rest = after;
        let magic = u32::from_le_bytes(frame[..4].try_into().map_err(|_| damaged())?);
        if magic & 0xFFFF_FFF0 == SKIPPABLE {
            continue;
        }
        let size = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten()
            .and_then(|size| usize::try_from(size).ok())
            .ok_or_else(damaged)?;
        frames.push((frame, size));
    }
    if frames.is_empty() {
        return Err(std::io::Error::other("no zstd frame of data"));
    }
    let total = frames
        .iter()
        .try_fold(0usize, |total, (_, size)| total.checked_add(*size))
        .ok_or_else(damaged)?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| damaged())?;
    out.resize(total, 0);
    let mut parts = Vec::with_capacity(frames.len());
    let mut unfilled = out.as_mut_slice();
    for (frame, size) in frames {
        let (part, after) = unfilled.split_at_mut(size);
        unfilled = after;
        parts.push((frame, part));
    }
    let helpers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parts.len())
        - 1;
    let parts = std::sync::Mutex::new(parts.into_iter());
    let decode_parts = || -> std::io::Result<()> {
        loop {
            let next = parts.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some((frame, part)) = next else {
                return Ok(());
            };
            let wanted = part.len();
            if zstd::bulk::decompress_to_buffer(frame, part)? != wanted {
                return Err(damaged());
            }
        }
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = (0..helpers)
            .map_while(|_| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, decode_parts)
                    .ok()
            })
            .collect();
        let mine = decode_parts();
        others.into_iter().fold(mine, |outcome, other| {
            let theirs = other
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a decoding thread panicked")));
            outcome.and(theirs)
        })
    })?;
    Ok(out)
}

/// The standard library's top-level modules (empty without it).
fn python_stdlib_modules() -> &'static std::collections::BTreeSet<String> {
    static MODULES: OnceLock<std::collections::BTreeSet<String>> = OnceLock::new();
    MODULES.get_or_init(|| {
        let text = if EMBEDDED_STDLIB_MODULES.is_empty() {
            std::fs::read_to_string(format!("{BUILT}/python-stdlib.txt")).unwrap_or_default()
        } else {
            EMBEDDED_STDLIB_MODULES.to_string()
        };
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// Where the standard library is unpacked: set once, as a host opens, to
/// its compile cache (else a folder of this process's own).
static UNPACK_ROOT: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Unpack the standard library and tool folders under `dir` (the host's
/// cache folder); the first host of a process decides.
pub fn unpack_into(dir: &std::path::Path) {
    let _ = UNPACK_ROOT.set(dir.to_path_buf());
}

/// Where things are unpacked: the host's cache folder, else a private
/// folder of this process's own (made with a name nobody could guess, mode
/// 0700: nothing planted in it beforehand is ever trusted).
pub fn unpack_root() -> std::path::PathBuf {
    static PRIVATE: OnceLock<std::path::PathBuf> = OnceLock::new();
    UNPACK_ROOT.get().cloned().unwrap_or_else(|| {
        PRIVATE
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("toolhost-")
                    .tempdir()
                    .map(|dir| dir.keep())
                    .unwrap_or_else(|_| std::env::temp_dir())
            })
            .clone()
    })
}

/// The Python standard library's folder on this machine, unpacked once
/// (from the binary, or `make runtimes`' copy) into
/// `<cache>/python-stdlib-<sha256>`: written under another name, then
/// renamed, so a folder of that name is whole. Handed to every Python
/// source read-only.
pub fn python_stdlib() -> Result<std::path::PathBuf, Arc<std::io::Error>> {
    static DIR: OnceLock<Result<std::path::PathBuf, Arc<std::io::Error>>> = OnceLock::new();
    DIR.get_or_init(|| {
        let compressed = if EMBEDDED_STDLIB.is_empty() {
            std::fs::read(format!("{BUILT}/python-stdlib.tar.zst")).map_err(Arc::new)?
        } else {
            EMBEDDED_STDLIB.to_vec()
        };
        let digest = sha256_hex(&compressed);
        let root = unpack_root();
        let dir = root.join(format!("python-stdlib-{}", &digest[..16]));
        if dir.is_dir() {
            return Ok(dir);
        }
        std::fs::create_dir_all(&root).map_err(Arc::new)?;
        let making = root.join(format!(
            ".python-stdlib-making-{}-{}",
            std::process::id(),
            &digest[..16]
        ));
        let _ = std::fs::remove_dir_all(&making);
        let tar = unzstd(&compressed).map_err(Arc::new)?;
        tar::Archive::new(std::io::Cursor::new(tar))
            .unpack(&making)
            .map_err(Arc::new)?;
        match std::fs::rename(&making, &dir) {
            Ok(()) => Ok(dir),
            // Another server unpacked it first: theirs is whole.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&making);
                Ok(dir)
            }
            Err(error) => Err(Arc::new(error)),
        }
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `make runtimes` writes each runtime's compressed copy with the
    /// digest of what it compressed; the build embeds that copy, and it
    /// unpacks to the digest the binary names the runtime by.
    #[test]
    fn an_embedded_runtime_is_its_compressed_copy_and_unpacks_to_its_digest() {
        for (embedded, kind, digest) in [
            (
                EMBEDDED_PYTHON,
                EMBEDDED_PYTHON_KIND,
                EMBEDDED_PYTHON_SHA256,
            ),
            (EMBEDDED_JS, EMBEDDED_JS_KIND, EMBEDDED_JS_SHA256),
        ] {
            if embedded.is_empty() {
                continue;
            }
            assert_eq!(
                kind.trim(),
                "zst",
                "the compressed copy is embedded (`make runtimes` writes it)"
            );
            assert_eq!(sha256_hex(&unzstd(embedded).unwrap()), digest.trim());
        }
    }

    /// Frames one after another (a skippable one among them) decode to
    /// what was compressed, in order; one cut short, or one without its
    /// size, is refused.
    #[test]
    fn frames_decode_in_order_and_a_damaged_one_is_refused() {
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|n| (n % 251).to_le_bytes())
            .collect();
        let mut packed = Vec::new();
        for piece in data.chunks(400_000) {
            packed.extend(zstd::bulk::compress(piece, 3).unwrap());
        }
        packed.extend(0x184D_2A5Eu32.to_le_bytes());
        packed.extend(4u32.to_le_bytes());
        packed.extend(b"skip");
        assert_eq!(unzstd(&packed).unwrap(), data);

        let mut one = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(unzstd(&one).unwrap(), data);
        one.truncate(one.len() - 10);
        assert!(unzstd(&one).is_err());

        assert!(unzstd(b"").is_err(), "nothing to unpack");
        // A frame whose header claims 2^63 bytes (single segment, its size
        // in 8 bytes, then one empty last block): refused, not allocated.
        let huge: Vec<u8> = [
            &0xFD2F_B528u32.to_le_bytes()[..],
            &[0xE0],
            &(1u64 << 63).to_le_bytes(),
            &[1, 0, 0],
        ]
        .concat();
        assert_eq!(
            zstd::zstd_safe::find_frame_compressed_size(&huge),
            Ok(huge.len()),
            "a frame the walk accepts: its size is what is refused"
        );
        assert!(unzstd(&huge).is_err(), "no buffer that size");
        assert!(unzstd(&huge.repeat(2)).is_err(), "sizes that overflow");
        let skip_only: Vec<u8> = [0x184D_2A5Eu32.to_le_bytes(), 0u32.to_le_bytes()].concat();
        assert!(unzstd(&skip_only).is_err(), "no frame of data");

        let mut sizeless = Vec::new();
        let mut encoder = zstd::stream::Encoder::new(&mut sizeless, 3).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, &data).unwrap();
        encoder.finish().unwrap();
        assert!(unzstd(&sizeless).is_err());
    }
}
