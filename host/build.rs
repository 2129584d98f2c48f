//! Embeds the language runtimes `make runtimes` built (`target/runtimes/`,
//! see `src/languages/runtimes.rs`), so that a `toolhost` binary runs
//! Python and JavaScript source with nothing installed beside it. A build
//! made before them embeds none: that binary finds them in this
//! repository's `target/runtimes`, or is told where with
//! `TOOLHOST_PYTHON_RUNTIME` / `TOOLHOST_JS_RUNTIME`. Each is embedded as
//! the zstd-compressed copy `make runtimes` writes beside it (`.wasm.zst`,
//! a third of the size), with the SHA-256 of its uncompressed bytes; and
//! CPython's standard library for the Python runtime
//! (`python-stdlib.tar.zst`) with the list of its modules.
//!
//! It gzips the page's bundled modules (`ui/vendor/*.js`: CodeMirror,
//! the ext-apps bridge), which the page is served as they are
//! (`src/front/ui.rs`): a quarter of their size, in the binary and on the
//! wire.
//!
//! It also names the cargo profile the binary was built with
//! (`TOOLHOST_BUILD_PROFILE`, shown by `toolhost --version`), so that a
//! measurement says which build it measured: `serve` (README's first
//! build) or `release` (fat LTO, what is installed and shipped).

use std::path::Path;

use sha2::Digest;

fn sha256_hex(bytes: &[u8]) -> String {
    sha256_hex_of_digest(&sha2::Sha256::digest(bytes))
}

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let built = Path::new(&manifest).join("../target/runtimes");
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is `<target>/<profile>/build/<crate>-<hash>/out`.
    let profile = Path::new(&out)
        .ancestors()
        .nth(3)
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
        .unwrap_or("unknown");
    println!("cargo:rustc-env=TOOLHOST_BUILD_PROFILE={profile}");
    // The folder too, once it exists (`make serve` makes it first): runtimes
    // built after this binary are embedded by its next build.
    if built.is_dir() {
        println!("cargo:rerun-if-changed={}", built.display());
    }
    for (name, embedded) in [("python.wasm", "python-runtime"), ("js.wasm", "js-runtime")] {
        let source = built.join(name);
        let bytes = read_watched(&source);
        // Its SHA-256 beside it (its compile key), so that a server with
        // the runtime compiled in its cache never reads the bytes.
        let digest = if bytes.is_empty() {
            String::new()
        } else {
            sha256_hex(&bytes)
        };
        // The compressed copy `make runtimes` writes beside it, when it is
        // of these bytes: its last frame, a skippable one, holds their
        // SHA-256 (sdk/python/runtime/pack.py). Else the bytes themselves.
        let compressed = read_watched(&built.join(format!("{name}.zst")));
        let (kind, embedded_bytes) = if !bytes.is_empty() && compressed_of(&compressed, &digest) {
            ("zst", compressed)
        } else {
            ("raw", bytes)
        };
        write_if_changed(
            &Path::new(&out).join(format!("{embedded}.bin")),
            &embedded_bytes,
        );
        std::fs::write(Path::new(&out).join(format!("{embedded}.kind")), kind)
            .expect("writing into OUT_DIR");
        std::fs::write(Path::new(&out).join(format!("{embedded}.sha256")), digest)
            .expect("writing into OUT_DIR");
    }
    // The page's bundles, gzipped (no timestamp: the same bytes each build).
    for name in ["codemirror.js", "app-bridge.js"] {
        let source = Path::new(&manifest).join("ui/vendor").join(name);
        let bytes = read_watched(&source);
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut gzip, &bytes).expect("gzip into memory");
        let gzipped = gzip.finish().expect("gzip into memory");
        write_if_changed(&Path::new(&out).join(format!("{name}.gz")), &gzipped);
    }
    // CPython's standard library for the Python runtime, and its modules.
    for name in ["python-stdlib.tar.zst", "python-stdlib.txt"] {
        let bytes = read_watched(&built.join(name));
        write_if_changed(&Path::new(&out).join(name), &bytes);
    }
}

/// Whether `compressed` ends with the skippable frame `pack.py compress`
/// writes, holding the SHA-256 whose hex is `digest`.
fn compressed_of(compressed: &[u8], digest: &str) -> bool {
    const DIGEST_FRAME: u32 = 0x184D_2A5E;
    let Some(at) = compressed.len().checked_sub(40) else {
        return false;
    };
    let frame = &compressed[at..];
    frame[..4] == DIGEST_FRAME.to_le_bytes()
        && frame[4..8] == 32u32.to_le_bytes()
        && sha256_hex_of_digest(&frame[8..]) == digest
}

fn sha256_hex_of_digest(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A file's bytes, watched for changes when it exists (a missing one
/// would make every build run this again); empty when it does not.
fn read_watched(path: &Path) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(bytes) => {
            println!("cargo:rerun-if-changed={}", path.display());
            bytes
        }
        Err(_) => Vec::new(),
    }
}

fn write_if_changed(target: &Path, bytes: &[u8]) {
    if std::fs::read(target).ok().as_deref() != Some(bytes) {
        std::fs::write(target, bytes).expect("writing into OUT_DIR");
    }
}
