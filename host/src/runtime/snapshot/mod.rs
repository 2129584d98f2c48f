//! Snapshots of a language runtime after it has run an author's module:
//! taken once per source version, off the call path, and laid over each
//! fresh instance of the runtime before its call (`image.rs`), through
//! the runtime rewritten once to let the host read and write its state
//! (`instrument.rs`).

mod accessor;
mod bound;
pub(crate) mod image;
pub(crate) mod instrument;
mod mapped;
#[cfg(test)]
mod mapping_tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// What all sources' images may hold together. A source whose image would
/// pass it runs its module at each call, as without images.
pub(crate) const IMAGES_MAX_BYTES: usize = 256 << 20;

/// A language runtime rewritten by [`instrument::instrument`], and the
/// content hash it is compiled and cached under.
pub(crate) struct Rewritten {
    pub(crate) wasm: Vec<u8>,
    pub(crate) hash: String,
}

/// The runtime of `content_hash` rewritten, once per process (the rewrite
/// reads the whole component); `None` if it cannot be, said once.
pub(crate) fn rewritten(wasm: &[u8], content_hash: &str) -> Option<Arc<Rewritten>> {
    static DONE: OnceLock<Mutex<HashMap<String, Option<Arc<Rewritten>>>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    done.entry(content_hash.to_string())
        .or_insert_with(|| match instrument::instrument(wasm) {
            Ok(wasm) => Some(Arc::new(Rewritten {
                wasm,
                hash: format!("{content_hash}-state{}", instrument::VERSION),
            })),
            Err(error) => {
                tracing::info!(%error, "this language runtime gives no images: each call runs its source's module");
                None
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_python_runtime_is_rewritten_and_validates() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/runtimes/python.wasm"
        );
        let Ok(wasm) = std::fs::read(path) else {
            return;
        };
        let started = std::time::Instant::now();
        let rewritten = super::instrument::instrument(&wasm).unwrap();
        eprintln!(
            "rewritten in {:?}: {} -> {} bytes",
            started.elapsed(),
            wasm.len(),
            rewritten.len()
        );
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(&rewritten)
            .unwrap();
    }
}
