//! Who is asking, and what they may do: the one place a bearer token is
//! checked, for every HTTP front (the guard asks it; no front checks a
//! token by itself).
//!
//! People come from `--tokens FILE`, a TOML file with one `[[token]]`
//! table per person, hot-reloaded when it changes:
//!
//! ```toml
//! [[token]]
//! name = "ada"            # who: logs and reports name them
//! secret = "…"            # the bearer token itself, or:
//! # sha256 = "hex…"       # its SHA-256, so the file holds no secret
//! role = "publisher"      # admin | publisher | caller | metrics
//! ```
//!
//! and from `--token T`, the one-admin shortcut (named `admin`). With
//! neither, the server is open: every route answers without a token (the
//! single-user default on loopback; the Host/Origin checks still keep
//! other sites' pages out).
//!
//! Roles:
//! - `admin`: everything;
//! - `publisher`: what a caller may, and (with publishing) their own
//!   namespace;
//! - `caller`: list and call tools;
//! - `metrics`: read `GET /metrics` only (a scrape token for Prometheus;
//!   `--metrics-role` sets the least role that may read it, `metrics` by
//!   default, so every role above may too).
//!
//! A token is compared by its SHA-256 digest, in constant time against
//! every person's digest (`subtle`), so neither its value nor which entry
//! it matched can be read from response times. A file that fails to parse
//! is refused with its reason and the people already known stay in force.
//!
//! With `--auth-issuer`, a JWT access token that no person holds is
//! validated as OAuth 2.1 asks (`oauth.rs`), its scopes giving its role;
//! tokens files and OAuth combine. [`Authority`] is what the guard asks.

mod file;

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;

use self::file::{read_tokens, watch_file};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::front::oauth::{Grant, OAuth, SCOPE_ADMIN, SCOPE_CALL, SCOPE_METRICS, SCOPE_PUBLISH};

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

/// The person behind a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) name: String,
    pub(crate) role: Role,
}

/// One person as the tokens file names them.
struct Person {
    name: String,
    role: Role,
    /// The SHA-256 of their token.
    digest: [u8; 32],
}

/// Why a request was not let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or one nobody holds: 401.
    Unauthenticated,
    /// An OAuth access token that is not valid, and why: 401.
    InvalidToken(String),
    /// A known person without the role the route needs: 403.
    NotAllowed { name: String, needs: Role },
}

/// Who may use the server: the people of the tokens file and, with
/// `--auth-issuer`, the holders of its access tokens.
pub(crate) struct Authority {
    pub(crate) people: Arc<People>,
    pub(crate) oauth: Option<Arc<OAuth>>,
}

impl Authority {
    /// Who presents `authorization` (the header's value), and whether they
    /// hold at least `needs`. `Ok(None)` on an open server (no tokens and
    /// no issuer).
    pub(crate) async fn check(
        &self,
        authorization: Option<&str>,
        needs: Role,
    ) -> Result<Option<Identity>, Refusal> {
        let Some(oauth) = &self.oauth else {
            return self.people.check(authorization, needs);
        };
        let presented = bearer(authorization).ok_or(Refusal::Unauthenticated)?;
        if let Some(person) = self.people.find(presented) {
            return person.allowed(needs);
        }
        if !OAuth::looks_like_jwt(presented) {
            return Err(Refusal::Unauthenticated);
        }
        let grant = oauth
            .validate(presented)
            .await
            .map_err(Refusal::InvalidToken)?;
        let (name, role) = person_of(&grant);
        match role {
            Some(role) if role >= needs => Ok(Some(Identity { name, role })),
            _ => Err(Refusal::NotAllowed { name, needs }),
        }
    }

    /// The `WWW-Authenticate` challenge of a refusal, for a request to
    /// `host`: RFC 6750's, with RFC 9728's `resource_metadata` when OAuth
    /// is on. `None` for a refusal a token with more scope would not cure
    /// (a tokens-file person's role).
    pub(crate) fn challenge(&self, refusal: &Refusal, host: &str) -> Option<String> {
        let Some(oauth) = &self.oauth else {
            return matches!(refusal, Refusal::Unauthenticated).then(|| "Bearer".to_string());
        };
        let metadata = oauth.metadata_url(host);
        Some(match refusal {
            Refusal::Unauthenticated => format!("Bearer resource_metadata=\"{metadata}\""),
            Refusal::InvalidToken(why) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(why)
            ),
            Refusal::NotAllowed { needs, .. } => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                scope_of(*needs)
            ),
        })
    }
}

/// The scope that grants `role` (with OAuth).
pub(crate) fn scope_of(role: Role) -> &'static str {
    match role {
        Role::Admin => SCOPE_ADMIN,
        Role::Publisher => SCOPE_PUBLISH,
        Role::Caller => SCOPE_CALL,
        Role::Metrics => SCOPE_METRICS,
    }
}

/// The person an access token names and the highest role its scopes give
/// (`None`: none of this server's scopes). The name is the subject when it
/// is a valid person's name (it is then their namespace), else `oauth-`
/// and 12 hex digits of its SHA-256.
fn person_of(grant: &Grant) -> (String, Option<Role>) {
    let role = [Role::Metrics, Role::Caller, Role::Publisher, Role::Admin]
        .into_iter()
        .filter(|role| grant.scopes.iter().any(|scope| scope == scope_of(*role)))
        .max();
    let name = if is_valid_person(&grant.subject) {
        grant.subject.clone()
    } else {
        let digest = Sha256::digest(grant.subject.as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        format!("oauth-{hex}")
    };
    (name, role)
}

/// A quoted-string's content: no quotes or backslashes, printable ASCII.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_ascii_graphic() || c == ' ' => c,
            _ => '?',
        })
        .collect()
}

/// The token of an `Authorization: Bearer` header.
fn bearer(authorization: Option<&str>) -> Option<&str> {
    authorization.and_then(|value| value.strip_prefix("Bearer "))
}

/// Everyone who may use the server; `None` inside means open.
pub(crate) struct People {
    /// Shared with the tokens file's watcher, which swaps in each reload.
    people: Arc<ArcSwap<Option<Vec<Person>>>>,
    /// Kept alive for hot reload of the tokens file.
    _watch: Option<notify::RecommendedWatcher>,
}

impl People {
    /// The people of `--token` (one admin) and `--tokens FILE` (watched
    /// and reloaded on change); open when both are absent.
    pub(crate) fn load(token: Option<&str>, file: Option<&Path>) -> anyhow::Result<Arc<People>> {
        let shortcut = token.map(|token| Person {
            name: "admin".into(),
            role: Role::Admin,
            digest: Sha256::digest(token.as_bytes()).into(),
        });
        let Some(file) = file else {
            return Ok(Arc::new(People {
                people: Arc::new(ArcSwap::from_pointee(shortcut.map(|person| vec![person]))),
                _watch: None,
            }));
        };
        let admin = token.map(str::to_string);
        let read = move |file: &Path| -> anyhow::Result<Vec<Person>> {
            let mut people = read_tokens(file)?;
            if let Some(token) = &admin {
                people.push(Person {
                    name: "admin".into(),
                    role: Role::Admin,
                    digest: Sha256::digest(token.as_bytes()).into(),
                });
            }
            Ok(people)
        };
        let people = Arc::new(ArcSwap::from_pointee(Some(read(file)?)));
        let watch = watch_file(file.to_path_buf(), people.clone(), read)?;
        Ok(Arc::new(People {
            people,
            _watch: Some(watch),
        }))
    }

    /// Who presents `authorization` (the header's value), and whether they
    /// hold at least `needs`. `Ok(None)` on an open server.
    pub(crate) fn check(
        &self,
        authorization: Option<&str>,
        needs: Role,
    ) -> Result<Option<Identity>, Refusal> {
        if self.people.load().is_none() {
            return Ok(None);
        }
        let presented = bearer(authorization).ok_or(Refusal::Unauthenticated)?;
        self.find(presented)
            .ok_or(Refusal::Unauthenticated)?
            .allowed(needs)
    }

    /// The person who holds `presented`, if anyone does.
    fn find(&self, presented: &str) -> Option<Identity> {
        let people = self.people.load();
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // Every entry is compared, match or not: the time taken does not
        // depend on which one matched.
        let mut found: Option<&Person> = None;
        for person in people.as_ref().iter().flat_map(|people| people.iter()) {
            if bool::from(person.digest.ct_eq(&digest)) && found.is_none() {
                found = Some(person);
            }
        }
        found.map(|person| Identity {
            name: person.name.clone(),
            role: person.role,
        })
    }
}

impl Identity {
    /// This person, if they hold at least `needs`.
    fn allowed(self, needs: Role) -> Result<Option<Identity>, Refusal> {
        if self.role < needs {
            return Err(Refusal::NotAllowed {
                name: self.name,
                needs,
            });
        }
        Ok(Some(self))
    }
}

/// A person's name: what a namespace and the logs will carry.
pub(crate) fn is_valid_person(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn people(text: &str) -> anyhow::Result<Vec<Person>> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, text).unwrap();
        read_tokens(&file)
    }

    #[test]
    fn roles_order_and_refusals() {
        let digest = format!("{:x}", Sha256::digest(b"bob-secret-0123456789"));
        let list = people(&format!(
            "[[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789\"\nrole = \"caller\"\n\
             [[token]]\nname = \"bob\"\nsha256 = \"{digest}\"\nrole = \"admin\"\n"
        ))
        .unwrap();
        let people = People {
            people: Arc::new(ArcSwap::from_pointee(Some(list))),
            _watch: None,
        };
        let ada = people.check(Some("Bearer ada-secret-0123456789"), Role::Caller);
        assert_eq!(ada.unwrap().unwrap().name, "ada");
        assert_eq!(
            people.check(Some("Bearer ada-secret-0123456789"), Role::Publisher),
            Err(Refusal::NotAllowed {
                name: "ada".into(),
                needs: Role::Publisher
            })
        );
        let bob = people.check(Some("Bearer bob-secret-0123456789"), Role::Admin);
        assert_eq!(bob.unwrap().unwrap().role, Role::Admin);
        for wrong in [None, Some("Bearer nope"), Some("ada-secret-0123456789")] {
            assert_eq!(
                people.check(wrong, Role::Caller),
                Err(Refusal::Unauthenticated),
                "{wrong:?}"
            );
        }
        assert_eq!(
            People::load(None, None).unwrap().check(None, Role::Admin),
            Ok(None)
        );
    }

    #[test]
    fn scopes_map_onto_roles_and_subjects_onto_names() {
        let grant = |subject: &str, scopes: &[&str]| Grant {
            subject: subject.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(
            person_of(&grant("ada", &["openid", "tools:call"])),
            ("ada".into(), Some(Role::Caller))
        );
        assert_eq!(
            person_of(&grant("ada", &["tools:call", "plugins:publish"])).1,
            Some(Role::Publisher)
        );
        assert_eq!(person_of(&grant("ada", &["admin"])).1, Some(Role::Admin));
        assert_eq!(person_of(&grant("ada", &["openid"])).1, None);
        let (odd, _) = person_of(&grant("user@example.com/../x", &[]));
        assert!(odd.starts_with("oauth-") && is_valid_person(&odd), "{odd}");
    }
}
