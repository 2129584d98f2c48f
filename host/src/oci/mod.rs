//! Plugins in OCI registries: references, which registries may be spoken
//! to over plain HTTP (loopback only), and registry credentials. The wasm
//! artifact layout (push, pull, digests) is in `artifact.rs`, cosign
//! signatures in `signature.rs`. Both speak to registries through
//! `oci-client` (sigstore builds on the same client).

pub(crate) mod artifact;
pub(crate) mod signature;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::Reference;

/// Why speaking to a registry, or checking what it served, failed: typed
/// by what went wrong, each with the sentence a person reads (the plugin
/// report's `source.error`, `push`'s refusal).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OciError {
    /// The reference cannot be used: it names no registry, or is not one.
    #[error("{0}")]
    Reference(String),
    /// The registry could not be reached, or refused a request.
    #[error("{0}")]
    Registry(String),
    /// What the registry served is not a component in the wasm artifact
    /// layout, is too large, or does not hash to its digest.
    #[error("{0}")]
    Artifact(String),
    /// A signature is missing, covers another digest, or is another key's.
    #[error("{0}")]
    Signature(String),
    /// A key that cannot be read or used.
    #[error("{0}")]
    Key(String),
    /// A pulled component that cannot be kept in the cache.
    #[error("cannot keep the component in {file}: {source}")]
    Cache {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

/// How long one request to a registry may take to connect, and to answer:
/// a registry that hangs must not hold a poll (or a start-up) forever.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Where registry credentials come from: `~/.docker/config.json` (or
/// `$DOCKER_CONFIG/config.json`), as docker and podman write it, with its
/// credential helpers; or a config file named on the command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    pub(crate) config_file: Option<PathBuf>,
}

/// Parses `oci://registry/repo:tag`, `registry/repo@sha256:…` (the scheme
/// is optional). The registry must be named: a reference that would fall
/// back to Docker Hub is refused, so nothing is pulled from a registry the
/// operator did not write down.
pub(crate) fn parse_reference(text: &str) -> Result<Reference, OciError> {
    let bare = text.strip_prefix("oci://").unwrap_or(text);
    let first = bare.split('/').next().unwrap_or_default();
    let names_registry =
        bare.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if !names_registry {
        return Err(OciError::Reference(format!(
            "{text:?} does not name a registry (write oci://REGISTRY/REPOSITORY:TAG)"
        )));
    }
    bare.parse::<Reference>()
        .map_err(|e| OciError::Reference(format!("{text:?} is not an OCI reference: {e}")))
}

/// Whether `registry` (host, host:port or `[v6]:port`) is this machine: the
/// only registries spoken to over plain HTTP.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The registries spoken to over plain HTTP among `registry`: itself if
/// it is loopback, else none (both registry clients, oci-client's and
/// sigstore's, take this list).
pub(crate) fn plain_http(registry: &str) -> Vec<String> {
    if is_loopback(registry) {
        vec![registry.to_string()]
    } else {
        Vec::new()
    }
}

/// The client configuration for one registry: HTTPS, except plain HTTP for
/// a loopback registry; bounded connect and read times.
pub(crate) fn client_config(registry: &str) -> ClientConfig {
    ClientConfig {
        protocol: ClientProtocol::HttpsExcept(plain_http(registry)),
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        ..ClientConfig::default()
    }
}

/// A client for the registry of `reference`.
pub(crate) fn client_for(reference: &Reference) -> oci_client::Client {
    oci_client::Client::new(client_config(reference.resolve_registry()))
}

impl Credentials {
    /// The credentials for `registry`: anonymous when the config file has
    /// none (or there is no config file). Blocking (a credential helper is
    /// a process): call off the async workers.
    pub(crate) fn for_registry(&self, registry: &str) -> RegistryAuth {
        use docker_credential::DockerCredential;
        let found = match &self.config_file {
            Some(path) => std::fs::File::open(path)
                .map_err(|_| docker_credential::CredentialRetrievalError::ConfigReadError)
                .and_then(|file| {
                    docker_credential::get_credential_from_reader(
                        std::io::BufReader::new(file),
                        registry,
                    )
                }),
            None => docker_credential::get_credential(registry),
        };
        match found {
            Ok(DockerCredential::UsernamePassword(user, password)) => {
                RegistryAuth::Basic(user, password)
            }
            Ok(DockerCredential::IdentityToken(token)) => RegistryAuth::Bearer(token),
            Err(_) => RegistryAuth::Anonymous,
        }
    }

    /// [`Credentials::for_registry`] on a blocking thread.
    pub(crate) async fn lookup(&self, registry: &str) -> RegistryAuth {
        let (credentials, registry) = (self.clone(), registry.to_string());
        tokio::task::spawn_blocking(move || credentials.for_registry(&registry))
            .await
            .unwrap_or(RegistryAuth::Anonymous)
    }
}

/// A registry error in words, with what to do when it is a refusal of
/// credentials.
pub(crate) fn describe(what: &str, error: impl std::fmt::Display) -> OciError {
    let text = error.to_string();
    let lower = text.to_lowercase();
    let refused = ["401", "403", "unauthorized", "not authorized", "denied"]
        .iter()
        .any(|word| lower.contains(word));
    OciError::Registry(if refused {
        format!(
            "{what}: the registry refused (it needs credentials this host does not have: `docker login` the registry, or name a config with --registry-config): {text}"
        )
    } else {
        format!("{what}: {text}")
    })
}

/// `sha256:<hex>` → `<hex>`, for file names; `None` for anything else
/// (another algorithm, or not hex), so a digest never becomes a path.
pub(crate) fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(hex)
}

/// The SHA-256 digest of `bytes`, as OCI writes it.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// A key file's text, with the file named in the error.
pub(crate) fn read_key(path: &Path) -> Result<String, OciError> {
    std::fs::read_to_string(path)
        .map_err(|e| OciError::Key(format!("cannot read {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_must_name_their_registry() {
        assert!(parse_reference("oci://127.0.0.1:5000/tools/echo:1").is_ok());
        assert!(parse_reference("registry.example/tools/weather:1.2").is_ok());
        assert!(parse_reference("localhost/echo@sha256:0123456789012345678901234567890123456789012345678901234567890123").is_ok());
        for bad in [
            "echo:1",
            "tools/echo:1",
            "oci://",
            "oci://Registry.example/UPPER:1",
        ] {
            assert!(parse_reference(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_http_only_for_loopback() {
        for local in [
            "127.0.0.1:5000",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "127.9.9.9",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "registry.example",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[fe80::1]:5000",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn only_sha256_hex_digests_become_file_names() {
        let good = format!("sha256:{}", "a".repeat(64));
        assert_eq!(digest_hex(&good), Some("a".repeat(64).as_str()));
        for bad in [
            "sha512:aa".to_string(),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:../{}", "a".repeat(61)),
            "sha256:".to_string(),
        ] {
            assert_eq!(digest_hex(&bad), None, "{bad}");
        }
    }
}
