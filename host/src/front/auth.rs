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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::front::oauth::{OAuth, scope_of};

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
        match grant.role {
            Some(role) if role >= needs => Ok(Some(Identity {
                name: grant.name,
                role,
            })),
            _ => Err(Refusal::NotAllowed {
                name: grant.name,
                needs,
            }),
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

/// The tokens file's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    secret: Option<String>,
    sha256: Option<String>,
    role: Role,
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

/// Reads and checks a tokens file.
fn read_tokens(file: &Path) -> anyhow::Result<Vec<Person>> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read the tokens file {}: {e}", file.display()))?;
    let parsed: TokensFile = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the tokens file {} is not valid: {e}", file.display()))?;
    let mut people = Vec::with_capacity(parsed.token.len());
    for entry in parsed.token {
        let bad = |why: &str| {
            anyhow::anyhow!(
                "the tokens file {}: token {:?}: {why}",
                file.display(),
                entry.name
            )
        };
        if !is_valid_person(&entry.name) {
            return Err(bad(
                "a name is 1 to 64 letters, digits, `_` or `-`, starting with a letter",
            ));
        }
        if people
            .iter()
            .any(|person: &Person| person.name == entry.name)
        {
            return Err(bad("the name is given twice"));
        }
        let digest: [u8; 32] = match (&entry.secret, &entry.sha256) {
            (Some(secret), None) if secret.len() >= 16 => Sha256::digest(secret.as_bytes()).into(),
            (Some(_), None) => return Err(bad("a secret needs at least 16 characters")),
            (None, Some(hex)) => {
                decode_digest(hex).ok_or_else(|| bad("sha256 must be 64 hexadecimal digits"))?
            }
            _ => return Err(bad("give exactly one of secret and sha256")),
        };
        if people.iter().any(|person: &Person| person.digest == digest) {
            return Err(bad("two people hold the same token"));
        }
        people.push(Person {
            name: entry.name,
            role: entry.role,
            digest,
        });
    }
    Ok(people)
}

/// A person's name: what a namespace and the logs will carry.
pub(crate) fn is_valid_person(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

fn decode_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// Watches the tokens file's folder (editors and `mv` replace the file)
/// and reloads it on change; a file that fails keeps the people in force.
fn watch_file(
    file: PathBuf,
    people: Arc<ArcSwap<Option<Vec<Person>>>>,
    read: impl Fn(&Path) -> anyhow::Result<Vec<Person>> + Send + 'static,
) -> anyhow::Result<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let name = file.file_name().map(|name| name.to_os_string());
    let watched = file.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let ours = event
            .paths
            .iter()
            .any(|path| path.file_name().map(|n| n.to_os_string()) == name);
        let changes = matches!(
            event.kind,
            notify::EventKind::Create(_)
                | notify::EventKind::Modify(_)
                | notify::EventKind::Access(notify::event::AccessKind::Close(
                    notify::event::AccessMode::Write
                ))
        );
        if !(ours && changes) {
            return;
        }
        match read(&watched) {
            Ok(next) => {
                tracing::info!(file = %watched.display(), people = next.len(), "tokens file reloaded");
                people.store(Arc::new(Some(next)));
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "tokens file refused; the people already known stay in force");
            }
        }
    })?;
    let folder = file
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    watcher.watch(folder, notify::RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn people(text: &str) -> anyhow::Result<Vec<Person>> {
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
    fn a_bad_file_says_why() {
        let cases = [
            (
                "[[token]]\nname = \"a\"\nrole = \"caller\"\n",
                "exactly one",
            ),
            (
                "[[token]]\nname = \"a\"\nsecret = \"short\"\nrole = \"caller\"\n",
                "16 characters",
            ),
            (
                "[[token]]\nname = \"../x\"\nsecret = \"0123456789abcdefg\"\nrole = \"caller\"\n",
                "a name is",
            ),
            (
                "[[token]]\nname = \"a\"\nsecret = \"0123456789abcdefg\"\nrole = \"root\"\n",
                "not valid",
            ),
            (
                "[[token]]\nname = \"a\"\nsha256 = \"zz\"\nrole = \"caller\"\n",
                "64 hexadecimal",
            ),
        ];
        for (text, why) in cases {
            let error = format!("{:#}", people(text).err().unwrap());
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
