//! `toolhost push FILE oci://REGISTRY/REPO:TAG [--sign-key KEY]`: the
//! component in the wasm artifact layout, and with a key, its cosign
//! signature beside it (`oci/`). Nothing is pushed when the file is not a
//! component or the key cannot be read.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::oci::{self, Credentials, artifact, signature};

/// The first eight bytes of a WebAssembly component (a core module has
/// version 1, layer 0).
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

pub(super) async fn push(
    wasm: &Path,
    target: &str,
    sign_key: Option<&Path>,
    registry_config: Option<PathBuf>,
) -> anyhow::Result<u8> {
    if !target.starts_with("oci://") {
        bail!("{target:?} is not an OCI target: write oci://REGISTRY/REPOSITORY:TAG");
    }
    let reference = oci::parse_reference(target)?;
    if reference.digest().is_some() {
        bail!("push to a tag (oci://REGISTRY/REPOSITORY:TAG), not a digest");
    }
    let bytes = std::fs::read(wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
    if !bytes.starts_with(&COMPONENT_HEADER) {
        bail!(
            "{} is not a WebAssembly component (a plugin is built for wasm32-wasip2, or with componentize-py / componentize-js)",
            wasm.display()
        );
    }
    // The key first: a key that cannot be used pushes nothing.
    let signer = match sign_key {
        Some(path) => {
            let pem = oci::read_key(path)?;
            let password = std::env::var("COSIGN_PASSWORD").unwrap_or_default();
            Some(signature::signing_key(&pem, password.as_bytes())?)
        }
        None => None,
    };
    let credentials = Credentials {
        config_file: registry_config,
    };
    let auth = credentials.lookup(reference.resolve_registry()).await;
    let client = oci::client_for(&reference);
    let digest = artifact::push(&client, &reference, &auth, bytes).await?;
    println!("pushed {} ({digest})", reference.whole());
    if let Some(signer) = signer {
        let signed = signature::sign(&reference, &digest, &auth, signer).await?;
        println!("signed: {signed}");
    }
    println!(
        "serve it with a policy beside no .wasm, e.g. plugins/{}.toml:\n  [source]\n  oci = \"{}\"",
        crate::commands::project::plugin_id_of(
            reference
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or("plugin")
        ),
        reference.whole()
    );
    Ok(0)
}
