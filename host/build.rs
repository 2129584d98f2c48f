//! Embeds the language runtimes `make runtimes` built (`target/runtimes/`,
//! see `src/runtime/languages.rs`), so that a `toolhost` binary runs
//! Python and JavaScript source with nothing installed beside it. A build
//! made before them embeds none: that binary finds them in this
//! repository's `target/runtimes`, or is told where with
//! `TOOLHOST_PYTHON_RUNTIME` / `TOOLHOST_JS_RUNTIME`.
//!
//! It also names the cargo profile the binary was built with
//! (`TOOLHOST_BUILD_PROFILE`, shown by `toolhost --version`), so that a
//! measurement says which build it measured: `serve` (README's first
//! build) or `release` (fat LTO, what is installed and shipped).

use std::path::Path;

use sha2::Digest;

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
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
    for (name, embedded) in [
        ("python.wasm", "python-runtime.wasm"),
        ("js.wasm", "js-runtime.wasm"),
    ] {
        let source = built.join(name);
        let bytes = match std::fs::read(&source) {
            Ok(bytes) => {
                // Only a file that exists is watched: a missing one would
                // make every build run this again.
                println!("cargo:rerun-if-changed={}", source.display());
                bytes
            }
            Err(_) => Vec::new(),
        };
        // Its SHA-256 beside it (its compile key), so that a server with
        // the runtime compiled in its cache never reads the bytes.
        let digest = if bytes.is_empty() {
            String::new()
        } else {
            sha256_hex(&bytes)
        };
        let target = Path::new(&out).join(embedded);
        if std::fs::read(&target).ok().as_deref() != Some(bytes.as_slice()) {
            std::fs::write(&target, bytes).expect("writing into OUT_DIR");
        }
        std::fs::write(target.with_extension("sha256"), digest).expect("writing into OUT_DIR");
    }
}
