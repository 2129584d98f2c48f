//! The keys MCP's (and REST's) `requestState` is sealed with: the keys
//! file (`--request-state-keys`, a serde type) or one random key of the
//! process, as rmcp's `RequestStateCodec` (HMAC, key ids, rotation).

use std::collections::BTreeMap;

use rmcp::model::RequestStateCodec;

/// Why a keys file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeysError {
    /// It is not TOML of the keys file's shape.
    #[error(transparent)]
    File(#[from] toml::de::Error),
    /// The codec refused the keys (one too short, or no key is the active
    /// one).
    #[error(transparent)]
    Keys(#[from] rmcp::model::RequestStateError),
}

/// The keys `requestState` is sealed with: one active, the others still
/// accepted (rotation). Every replica behind one address needs the same.
pub(crate) struct InputKeys {
    pub(super) codec: RequestStateCodec,
}

/// The keys file (`--request-state-keys`): which key seals, and every key
/// that opens. Each secret is at least 32 bytes of text.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeysFile {
    pub(crate) active: String,
    pub(crate) keys: BTreeMap<String, String>,
}

impl InputKeys {
    /// Keys from the keys file's text.
    pub(crate) fn from_file_text(text: &str) -> Result<Self, KeysError> {
        let file: KeysFile = toml::from_str(text)?;
        let codec = RequestStateCodec::new_with_keyring(
            file.active,
            file.keys
                .into_iter()
                .map(|(kid, secret)| (kid, secret.into_bytes())),
        )?;
        Ok(InputKeys { codec })
    }

    /// One random key of this process: states open only here, and not
    /// after a restart.
    pub(crate) fn random() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the system's randomness");
        InputKeys {
            codec: RequestStateCodec::new(secret.to_vec()),
        }
    }
}
