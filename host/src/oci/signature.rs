//! cosign key-based signatures, signed and verified with the `sigstore`
//! crate (no cosign CLI): the signature of manifest `sha256:<hex>` is the
//! image at tag `sha256-<hex>.sig` of the same repository, whose layer is
//! the simple-signing payload (media type
//! `application/vnd.dev.cosign.simplesigning.v1+json`) naming that digest,
//! with the signature of the payload's bytes in the layer's
//! `dev.cosignproject.cosign/signature` annotation. This is what `cosign
//! sign --key` writes and `cosign verify --key` reads.
//!
//! Keys: a PEM public key to verify (`cosign.pub`, or any PKIX EC P-256/
//! P-384, Ed25519 or RSA key); a private key to sign, cosign's encrypted
//! format (`cosign generate-key-pair`, password from `COSIGN_PASSWORD`) or
//! an unencrypted PKCS#8 PEM.

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use sigstore::cosign::constraint::{Constraint, PrivateKeySigner};
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraint};
use sigstore::cosign::{ClientBuilder, CosignCapabilities, SignatureLayer};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::SigStoreKeyPair;
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};

use super::OciError;
use super::artifact::pinned;

/// The public key every OCI-sourced plugin must be signed with
/// (`--verify-key`), parsed once at start-up.
pub(crate) struct VerifyKey {
    verifier: PublicKeyVerifier,
    /// Where it came from, for reasons.
    pub(crate) file: String,
}

impl std::fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyKey")
            .field("file", &self.file)
            .finish()
    }
}

impl VerifyKey {
    /// Parses a PEM public key; the algorithm follows from the key.
    pub(crate) fn from_pem(pem: &str, file: &str) -> Result<Self, OciError> {
        let verifier = PublicKeyVerifier::try_from(pem.as_bytes()).map_err(|e| {
            OciError::Key(format!(
                "{file} is not a PEM public key cosign can verify with: {e}"
            ))
        })?;
        Ok(VerifyKey {
            verifier,
            file: file.to_string(),
        })
    }
}

fn sigstore_client(registry: &str) -> Result<sigstore::cosign::Client, OciError> {
    ClientBuilder::default()
        .with_oci_client_config(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(super::plain_http(registry)),
            ..ClientConfig::default()
        })
        .build()
        .map_err(|e| OciError::Registry(format!("cannot make a signature client: {e}")))
}

fn oci_reference(reference: &Reference) -> Result<OciReference, OciError> {
    reference
        .whole()
        .parse()
        .map_err(|e| OciError::Reference(format!("{}: {e}", reference.whole())))
}

/// The tag cosign keeps the signature of `digest` under.
pub(crate) fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

/// Checks that manifest `digest` of `reference`'s repository carries a
/// cosign signature by `key` over exactly that digest. The error says
/// which of these failed: no signature at all, signatures over another
/// digest, or none by this key.
pub(crate) async fn verify(
    reference: &Reference,
    digest: &str,
    auth: &RegistryAuth,
    key: &VerifyKey,
) -> Result<(), OciError> {
    let at = pinned(reference, digest);
    let image = oci_reference(&at)?;
    let mut client = sigstore_client(reference.resolve_registry())?;
    let layers = client
        .trusted_signature_layers(&Auth::from(auth), &image)
        .await
        .map_err(|e| {
            OciError::Registry(format!("cannot read the signatures of {}: {e}", at.whole()))
        })?;
    let tag = signature_tag(digest);
    if layers.is_empty() {
        // sigstore drops a signature whose payload names another digest;
        // say so rather than "not signed" when that is what is there.
        if let Some(other) = payload_digest_at(reference, &tag, auth).await
            && other != digest
        {
            return Err(OciError::Signature(format!(
                "the signature at tag {tag} is over another digest ({other}), not {digest}"
            )));
        }
        return Err(OciError::Signature(format!(
            "{} is not signed: no cosign signature over {digest} (tag {tag})",
            at.whole()
        )));
    }
    let over_digest: Vec<&SignatureLayer> = layers
        .iter()
        .filter(|layer| layer.simple_signing.critical.image.docker_manifest_digest == digest)
        .collect();
    if over_digest.is_empty() {
        let other = &layers[0]
            .simple_signing
            .critical
            .image
            .docker_manifest_digest;
        return Err(OciError::Signature(format!(
            "the signature at tag {tag} is over another digest ({other}), not {digest}"
        )));
    }
    let signed = over_digest
        .iter()
        .any(|layer| key.verifier.verify(layer).unwrap_or(false));
    if !signed {
        return Err(OciError::Signature(format!(
            "{} is signed, but not by the key in {}",
            at.whole(),
            key.file
        )));
    }
    Ok(())
}

/// The digest the simple-signing payload at `tag` of `reference`'s
/// repository names, if there is one to read.
async fn payload_digest_at(
    reference: &Reference,
    tag: &str,
    auth: &RegistryAuth,
) -> Option<String> {
    let at = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        tag.to_string(),
    );
    let client = super::client_for(&at);
    let (manifest, _) = client.pull_image_manifest(&at, auth).await.ok()?;
    let layer = manifest
        .layers
        .iter()
        .find(|layer| layer.media_type == SIMPLE_SIGNING_MEDIA_TYPE && layer.size < 64 * 1024)?;
    let mut payload = Vec::new();
    client.pull_blob(&at, layer, &mut payload).await.ok()?;
    let payload: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    payload["critical"]["image"]["docker-manifest-digest"]
        .as_str()
        .map(str::to_string)
}

/// The media type of cosign's signature payload layer.
const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// A signing key from its PEM text: cosign's encrypted format (with
/// `password`) or an unencrypted PKCS#8 key.
pub(crate) fn signing_key(
    pem: &str,
    password: &[u8],
) -> Result<sigstore::crypto::signing_key::SigStoreSigner, OciError> {
    let pair = if pem.contains("ENCRYPTED") {
        SigStoreKeyPair::from_encrypted_pem(pem.as_bytes(), password).map_err(|e| {
            OciError::Key(format!(
                "cannot decrypt the signing key (is COSIGN_PASSWORD right?): {e}"
            ))
        })?
    } else {
        SigStoreKeyPair::from_pem(pem.as_bytes())
            .map_err(|e| OciError::Key(format!("the signing key is not a PEM private key: {e}")))?
    };
    let schemes = [
        SigningScheme::ECDSA_P256_SHA256_ASN1,
        SigningScheme::ECDSA_P384_SHA384_ASN1,
        SigningScheme::ED25519,
        SigningScheme::RSA_PKCS1_SHA256(0),
    ];
    schemes
        .iter()
        .find_map(|scheme| pair.to_sigstore_signer(scheme).ok())
        .ok_or_else(|| {
            OciError::Key("the signing key's algorithm is not one cosign signs with".to_string())
        })
}

/// Signs manifest `digest` of `reference`'s repository and pushes the
/// signature beside it (tag `sha256-<hex>.sig`), as `cosign sign --key`
/// does. Answers with the signature's reference.
pub(crate) async fn sign(
    reference: &Reference,
    digest: &str,
    auth: &RegistryAuth,
    signer: sigstore::crypto::signing_key::SigStoreSigner,
) -> Result<String, OciError> {
    let at = pinned(reference, digest);
    let image = oci_reference(&at)?;
    let mut client = sigstore_client(reference.resolve_registry())?;
    let sig_auth = Auth::from(auth);
    let (signature_image, source_digest) = client
        .triangulate(&image, &sig_auth)
        .await
        .map_err(|e| OciError::Registry(format!("cannot find {} to sign it: {e}", at.whole())))?;
    if source_digest != digest {
        return Err(OciError::Registry(format!(
            "the registry serves {source_digest} for {}, not {digest}",
            at.whole()
        )));
    }
    let mut layer = SignatureLayer::new_unsigned(&image, digest)
        .map_err(|e| OciError::Signature(format!("cannot make the signature payload: {e}")))?;
    // cosign names the repository, without tag or digest.
    layer.simple_signing.critical.identity.docker_reference =
        format!("{}/{}", reference.registry(), reference.repository());
    PrivateKeySigner::new_with_signer(signer)
        .add_constraint(&mut layer)
        .map_err(|e| OciError::Signature(format!("cannot sign: {e}")))?;
    client
        .push_signature(None, &sig_auth, &signature_image, vec![layer])
        .await
        .map_err(|e| {
            OciError::Registry(format!(
                "cannot push the signature to {signature_image}: {e}"
            ))
        })?;
    Ok(signature_image.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cosign's own key format (`cosign generate-key-pair`: an encrypted
    /// PKCS#8 key, password in COSIGN_PASSWORD) and a plain PKCS#8 key
    /// both sign; the public half verifies what they sign.
    #[test]
    fn cosign_and_pkcs8_keys_sign_and_their_public_keys_verify() {
        let pair = SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .unwrap()
            .to_sigstore_keypair()
            .unwrap();
        let encrypted = pair.private_key_to_encrypted_pem(b"hunter2").unwrap();
        let plain = pair.private_key_to_pem().unwrap();
        let public = pair.public_key_to_pem().unwrap();
        let key = VerifyKey::from_pem(&public, "cosign.pub").unwrap();
        for (pem, password) in [(encrypted.as_str(), &b"hunter2"[..]), (plain.as_str(), b"")] {
            let signer = signing_key(pem, password).unwrap();
            let mut layer = SignatureLayer::new_unsigned(
                &"127.0.0.1:5000/tools/echo@sha256:0000000000000000000000000000000000000000000000000000000000000000"
                    .parse()
                    .unwrap(),
                "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            )
            .unwrap();
            PrivateKeySigner::new_with_signer(signer)
                .add_constraint(&mut layer)
                .unwrap();
            assert!(key.verifier.verify(&layer).unwrap());
            // The payload changed after signing no longer verifies.
            layer.raw_data.push(b' ');
            assert!(!key.verifier.verify(&layer).unwrap());
        }
        let wrong = signing_key(&encrypted, b"wrong").unwrap_err();
        assert!(matches!(wrong, OciError::Key(_)), "{wrong}");
        assert!(wrong.to_string().contains("COSIGN_PASSWORD"), "{wrong}");
        assert!(VerifyKey::from_pem("not a key", "k.pub").is_err());
    }
}
