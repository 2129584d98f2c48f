//! The wasm artifact layout of CNCF TAG Runtime (what `wkg oci push`
//! writes): an OCI image manifest whose config has media type
//! `application/vnd.wasm.config.v0+json` and whose one layer is the
//! component, `application/wasm`. Pushed and pulled here; every pull is
//! checked against its digests (the manifest's and the layer's) before a
//! byte of it is used.

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;

use super::{OciError, describe, sha256_digest};

/// The config's media type in the wasm artifact layout.
pub(crate) const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub(crate) const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The largest manifest read: a wasm artifact's is a few hundred bytes.
const MAX_MANIFEST_BYTES: usize = 64 * 1024;

/// The manifest digest `reference` names now: a tag's current digest, or
/// the digest a pinned reference carries.
pub(crate) async fn resolve(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
) -> Result<String, OciError> {
    if let Some(digest) = reference.digest() {
        return Ok(digest.to_string());
    }
    client
        .fetch_manifest_digest(reference, auth)
        .await
        .map_err(|e| describe(&format!("cannot resolve {}", reference.whole()), e))
}

/// `reference`'s repository at `digest`.
pub(crate) fn pinned(reference: &Reference, digest: &str) -> Reference {
    Reference::with_digest(
        reference.registry().to_string(),
        reference.repository().to_string(),
        digest.to_string(),
    )
}

/// Pulls the component at `digest` of `reference`'s repository: the
/// manifest must hash to `digest` and have the wasm artifact layout, the
/// layer must hash to its descriptor's digest and be at most `max_bytes`.
pub(crate) async fn pull(
    client: &Client,
    reference: &Reference,
    digest: &str,
    auth: &RegistryAuth,
    max_bytes: u64,
) -> Result<Vec<u8>, OciError> {
    let at = pinned(reference, digest);
    let (raw, _) = client
        .pull_manifest_raw(&at, auth, &[OCI_IMAGE_MEDIA_TYPE])
        .await
        .map_err(|e| describe(&format!("cannot pull the manifest of {}", at.whole()), e))?;
    if raw.len() > MAX_MANIFEST_BYTES {
        return Err(OciError::Artifact(format!(
            "the manifest of {} is too large",
            at.whole()
        )));
    }
    if sha256_digest(&raw) != digest {
        return Err(OciError::Artifact(format!(
            "the registry's manifest for {} does not hash to its digest",
            at.whole()
        )));
    }
    let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|e| {
        OciError::Artifact(format!(
            "the manifest of {} is not an image manifest: {e}",
            at.whole()
        ))
    })?;
    let layer = check_layout(&manifest)
        .map_err(|why| OciError::Artifact(format!("{}: {why}", at.whole())))?;
    if layer.size < 0 || layer.size as u64 > max_bytes {
        return Err(OciError::Artifact(format!(
            "{}: the component is {} bytes, over the {max_bytes}-byte limit for plugins",
            at.whole(),
            layer.size
        )));
    }
    let mut wasm = Vec::with_capacity(layer.size as usize);
    client
        .pull_blob(&at, layer, &mut wasm)
        .await
        .map_err(|e| describe(&format!("cannot pull the component of {}", at.whole()), e))?;
    if sha256_digest(&wasm) != layer.digest {
        return Err(OciError::Artifact(format!(
            "the component of {} does not hash to its digest {}",
            at.whole(),
            layer.digest
        )));
    }
    Ok(wasm)
}

/// How a manifest is not in the wasm artifact layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotWasmLayout {
    /// Its config blob is of another media type.
    #[error(
        "not a wasm artifact (config media type {:?}, expected {:?})",
        .0,
        CONFIG_MEDIA_TYPE
    )]
    Config(String),
    /// Its one layer is of another media type.
    #[error("its layer has media type {:?}, expected {:?}", .0, LAYER_MEDIA_TYPE)]
    Layer(String),
    #[error("a wasm artifact has one layer, this one has {0}")]
    Layers(usize),
}

/// The one `application/wasm` layer of a manifest in the wasm artifact
/// layout, or what is wrong with it.
pub(crate) fn check_layout(
    manifest: &OciImageManifest,
) -> Result<&oci_client::manifest::OciDescriptor, NotWasmLayout> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(NotWasmLayout::Config(manifest.config.media_type.clone()));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer),
        [layer] => Err(NotWasmLayout::Layer(layer.media_type.clone())),
        layers => Err(NotWasmLayout::Layers(layers.len())),
    }
}

/// The config blob of the layout: `architecture` "wasm", `os` "wasip2"
/// (toolhost's plugins are WASI 0.2 components), the layer's digest.
pub(crate) fn config_json(layer_digest: &str) -> Vec<u8> {
    let created = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    serde_json::to_vec(&json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    }))
    .unwrap_or_default()
}

/// Pushes `wasm` to `reference` in the wasm artifact layout; answers with
/// the manifest digest the registry now serves for it.
pub(crate) async fn push(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
    wasm: Vec<u8>,
) -> Result<String, OciError> {
    let layer = ImageLayer::new(wasm, LAYER_MEDIA_TYPE.to_string(), None);
    let config = Config::new(
        config_json(&sha256_digest(&layer.data)),
        CONFIG_MEDIA_TYPE.to_string(),
        None,
    );
    let annotations = BTreeMap::from([(
        "org.opencontainers.image.created".to_string(),
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    )]);
    let mut manifest =
        OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
    client
        .push(reference, &[layer], config, auth, Some(manifest))
        .await
        .map_err(|e| describe(&format!("cannot push to {}", reference.whole()), e))?;
    client
        .fetch_manifest_digest(reference, auth)
        .await
        .map_err(|e| {
            OciError::Registry(format!(
                "pushed, but cannot read back the digest of {}: {e}",
                reference.whole()
            ))
        })
}
