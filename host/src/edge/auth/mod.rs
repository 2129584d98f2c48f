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
//! tools = ["instructor/*", "{self}/*"]   # what they see (sets.rs); absent: all
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
mod identity;
mod people;
mod person;
mod sets;

use std::sync::Arc;

use self::identity::bearer;
pub(crate) use self::identity::{Identity, Refusal};
pub(crate) use self::people::People;
pub(crate) use self::person::Role;
use sha2::{Digest, Sha256};

use crate::edge::oauth::{Grant, OAuth, SCOPE_ADMIN, SCOPE_CALL, SCOPE_METRICS, SCOPE_PUBLISH};
use crate::registry::view::View;

/// A top-level plugin, and who of the tokens file does not see it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Unseen {
    pub(crate) plugin: String,
    pub(crate) people: Vec<String>,
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
        let token: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let (name, namespace, role) = person_of(&grant, oauth.namespace_prefix(), &token);
        let tools = self
            .people
            .claimed_view(grant.tool_groups.as_deref(), namespace.as_deref());
        match role {
            Some(role) if role >= needs => Ok(Some(Identity {
                name,
                role,
                namespace,
                token,
                expires: Some(grant.expires),
                tools,
                claimed: grant.tool_groups,
            })),
            _ => Err(Refusal::NotAllowed { name, needs }),
        }
    }

    /// Whether nobody is named and no issuer is: every route is open (the
    /// single-user default on loopback).
    pub(crate) fn is_open(&self) -> bool {
        self.oauth.is_none() && self.people.roster.load().is_none()
    }

    /// Whether `identity`'s token is still held: a tokens-file person's is
    /// until it is taken out of the file. An access token is never taken
    /// back (it expires instead, and its holder comes back with a fresh
    /// one, so an MCP session it opened lives on).
    pub(crate) fn still_held(&self, identity: &Identity) -> bool {
        identity.expires.is_some() || self.people.holds(identity)
    }

    /// What `identity` sees now: a tokens-file person's set as the file
    /// says it now, an access token's claimed groups as the file defines
    /// them now. A session asks again each time the file is reloaded.
    pub(crate) fn view_now(&self, identity: Option<&Identity>) -> View {
        let Some(identity) = identity else {
            return View::all();
        };
        if identity.expires.is_some() {
            return self
                .people
                .claimed_view(identity.claimed.as_deref(), identity.namespace.as_deref());
        }
        self.people
            .set_of(identity)
            .unwrap_or_else(|| identity.tools.clone())
    }

    /// The top-level plugins of `report` that people of the tokens file
    /// do not see (their set leaves the top level out), and who.
    pub(crate) fn unseen_top_level(
        &self,
        report: &crate::registry::report::PluginsReport,
    ) -> Vec<Unseen> {
        report
            .plugins
            .iter()
            .filter(|plugin| !plugin.id.contains('/'))
            .filter_map(|plugin| {
                let people = self.people.unseen_by(&plugin.id);
                (!people.is_empty()).then(|| Unseen {
                    plugin: plugin.id.clone(),
                    people,
                })
            })
            .collect()
    }

    /// A receiver that wakes when the tokens file is reloaded: then
    /// [`Authority::view_now`] may have changed.
    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.people.changes.subscribe()
    }

    /// Completes once a stream `identity` opened must end: its token was
    /// taken out of the tokens file, or its access token expired (the
    /// client opens the stream again with a fresh one). Never, for nobody
    /// (an open server).
    pub(crate) async fn revoked(&self, identity: Option<&Identity>) {
        let Some(identity) = identity else {
            return std::future::pending().await;
        };
        let mut changes = self.changes();
        let expiry = async {
            match identity.expires {
                Some(at) => {
                    let left = at
                        .duration_since(std::time::SystemTime::now())
                        .unwrap_or_default();
                    tokio::time::sleep(left).await;
                }
                None => std::future::pending().await,
            }
        };
        let taken_back = async {
            while self.still_held(identity) {
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            () = expiry => {}
            () = taken_back => {}
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
                quoted(&why.to_string())
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

/// Reads and checks a tokens file as `--tokens` does, without serving it:
/// what `toolhost tokens` asks of the file it made before it takes its
/// place.
pub(crate) fn check_tokens_file(file: &std::path::Path) -> anyhow::Result<()> {
    file::read_tokens(file, None).map(drop)
}

/// The person an access token names: their name, their namespace and
/// the highest role its scopes give (`None`: none of this server's
/// scopes). The namespace is `prefix` and the namespace claim's value when
/// that makes a valid namespace; the tokens file names nobody with the
/// prefix, so a token holder never takes a person's namespace, and two
/// holders share one only when their claims are equal. Without one (no
/// claim, or one that cannot be a namespace) they may not publish, and are
/// named `oauth:` and a digest of their subject (of the token itself when
/// it has no subject), which no namespace or person's name can be.
fn person_of(
    grant: &Grant,
    prefix: &str,
    token: &[u8; 32],
) -> (String, Option<String>, Option<Role>) {
    let role = [Role::Metrics, Role::Caller, Role::Publisher, Role::Admin]
        .into_iter()
        .filter(|role| grant.scopes.iter().any(|scope| scope == scope_of(*role)))
        .max();
    let namespace = grant
        .namespace
        .as_ref()
        .map(|value| format!("{prefix}{value}"))
        .filter(|namespace| crate::registry::layout::is_valid_namespace(namespace));
    let name = match &namespace {
        Some(namespace) => namespace.clone(),
        None if grant.subject.is_empty() => format!("oauth:token-{}", hex12(token)),
        None => format!(
            "oauth:{}",
            hex12(&Sha256::digest(grant.subject.as_bytes()).into())
        ),
    };
    (name, namespace, role)
}

fn hex12(digest: &[u8; 32]) -> String {
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
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

#[cfg(test)]
mod tests {
    use arc_swap::ArcSwap;

    use super::file::{Roster, read_tokens};
    use super::person::is_valid_person;
    use super::*;

    pub(super) fn people(text: &str) -> anyhow::Result<Roster> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, text).unwrap();
        read_tokens(&file, Some("oauth-"))
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
            roster: Arc::new(ArcSwap::from_pointee(Some(list))),
            changes: Arc::default(),
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
            People::load(None, None, None)
                .unwrap()
                .check(None, Role::Admin),
            Ok(None)
        );
    }

    #[test]
    fn scopes_map_onto_roles_and_claims_onto_namespaces_that_cannot_collide() {
        let grant = |subject: &str, scopes: &[&str]| Grant {
            subject: subject.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            namespace: (!subject.is_empty()).then(|| subject.to_string()),
            expires: std::time::SystemTime::now(),
            tool_groups: None,
        };
        let token = [7u8; 32];
        let person =
            |subject: &str, scopes: &[&str]| person_of(&grant(subject, scopes), "oauth-", &token);
        assert_eq!(
            person("ada", &["openid", "tools:call"]),
            (
                "oauth-ada".into(),
                Some("oauth-ada".into()),
                Some(Role::Caller)
            )
        );
        assert_eq!(
            person("ada", &["tools:call", "plugins:publish"]).2,
            Some(Role::Publisher)
        );
        assert_eq!(person("ada", &["admin"]).2, Some(Role::Admin));
        assert_eq!(person("ada", &["openid"]).2, None);
        // A subject that cannot be a namespace publishes nowhere, and its
        // name is no namespace nor person's name.
        for odd in ["user@example.com", "a-very-long-subject-of-a-uuid-kind"] {
            let (name, namespace, _) = person(odd, &[]);
            assert_eq!(namespace, None, "{odd}");
            assert!(
                name.starts_with("oauth:") && !is_valid_person(&name),
                "{name}"
            );
        }
        // What the old scheme hashed user@example.com to is a namespace of
        // its own now, not that person's.
        let (name, _, _) = person("user@example.com", &[]);
        let (other, _, _) = person("oauth-b4c9a289323b", &[]);
        assert_ne!(name, other);
        // Without a subject, each token is someone of its own.
        let (anonymous, namespace, _) = person("", &["tools:call"]);
        assert_eq!(namespace, None);
        assert_eq!(anonymous, format!("oauth:token-{}", hex12(&token)));
    }
}
