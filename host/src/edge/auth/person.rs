//! Who a person is, whatever the way in: the roles, in the order of what
//! they allow, a person of the tokens file, and the rule for a person's
//! name (what a namespace and the logs carry).

use serde::Deserialize;

/// What a person may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    Metrics,
    Caller,
    Publisher,
    Admin,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Metrics => "metrics",
            Role::Caller => "caller",
            Role::Publisher => "publisher",
            Role::Admin => "admin",
        }
    }
}

/// One person as the tokens file names them.
pub(super) struct Person {
    pub(super) name: String,
    pub(super) role: Role,
    /// The SHA-256 of their token.
    pub(super) digest: [u8; 32],
    /// The plugins they see (`sets.rs`).
    pub(super) tools: crate::registry::view::View,
}

/// A person's name: what a namespace and the logs will carry.
pub(crate) fn is_valid_person(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}
