//! Who a request's person is ([`Identity`]) and why one was not let
//! through ([`Refusal`]): what the guard gets back from `Authority`
//! (`mod.rs`), and the bearer token read from a request.

use super::person::Role;
use crate::edge::oauth::TokenError;
use crate::registry::view::View;

/// The person behind a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// Who: logs and reports name them, and an MCP session answers only
    /// to the name that opened it. A tokens-file person's name; a token
    /// holder's namespace, or `oauth:` and a digest when it has none.
    pub(crate) name: String,
    pub(crate) role: Role,
    /// Where they may publish (with the publisher role): a tokens-file
    /// person's name, a token holder's mapped namespace; `None` when the
    /// token's claim cannot name one.
    pub(crate) namespace: Option<String>,
    /// The SHA-256 of the token they presented: revoking it (taking it out
    /// of the tokens file) ends what it opened.
    pub(crate) token: [u8; 32],
    /// When an access token expires; `None` for a tokens-file person.
    pub(crate) expires: Option<std::time::SystemTime>,
    /// What they see, as the tokens file (or their token's claim) says
    /// at the time of the request.
    pub(crate) tools: View,
    /// The groups an access token's claim names (`--auth-tools-claim`),
    /// to resolve again when the tokens file's groups change.
    pub(super) claimed: Option<Vec<String>>,
}

/// Why a request was not let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or one nobody holds: 401.
    Unauthenticated,
    /// An OAuth access token that is not valid, and why: 401.
    InvalidToken(TokenError),
    /// A known person without the role the route needs: 403.
    NotAllowed { name: String, needs: Role },
}

/// The token of an `Authorization: Bearer` header.
pub(super) fn bearer(authorization: Option<&str>) -> Option<&str> {
    authorization.and_then(|value| value.strip_prefix("Bearer "))
}

impl Identity {
    /// A tokens-file person seeing everything, for tests of what reads
    /// identities.
    #[cfg(test)]
    pub(crate) fn named(name: &str, role: Role) -> Identity {
        Identity {
            name: name.into(),
            role,
            namespace: Some(name.into()),
            token: [0; 32],
            expires: None,
            tools: View::all(),
            claimed: None,
        }
    }

    /// This person, if they hold at least `needs`.
    pub(super) fn allowed(self, needs: Role) -> Result<Option<Identity>, Refusal> {
        if self.role < needs {
            return Err(Refusal::NotAllowed {
                name: self.name,
                needs,
            });
        }
        Ok(Some(self))
    }
}
