//! The people of `--token` and `--tokens FILE`: who holds which token (by
//! its SHA-256, compared in constant time against everyone's), their role
//! and their tool set, as the tokens file says now (reloaded on change by
//! `file.rs`); and an access token's claimed groups resolved against the
//! file's groups (`sets.rs`).

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::file::{Roster, read_tokens, watch_file};
use super::identity::{Identity, Refusal, bearer};
use super::person::{Person, Role};
use super::sets;
use crate::registry::view::View;

/// Everyone who may use the server; `None` inside means open.
pub(crate) struct People {
    /// Shared with the tokens file's watcher, which swaps in each reload.
    pub(super) roster: Arc<ArcSwap<Option<Roster>>>,
    /// Bumped by the watcher on each reload taken.
    pub(super) changes: Arc<tokio::sync::watch::Sender<u64>>,
    /// Kept alive for hot reload of the tokens file.
    pub(super) _watch: Option<notify::RecommendedWatcher>,
}

impl People {
    /// The people of `--token` (one admin) and `--tokens FILE` (watched
    /// and reloaded on change); open when both are absent. With OAuth,
    /// `reserved_prefix` is its namespace prefix: the file may name nobody
    /// whose name starts with it.
    pub(crate) fn load(
        token: Option<&str>,
        file: Option<&Path>,
        reserved_prefix: Option<&str>,
    ) -> anyhow::Result<Arc<People>> {
        let shortcut = |token: &str| Person {
            name: "admin".into(),
            role: Role::Admin,
            digest: Sha256::digest(token.as_bytes()).into(),
            tools: View::all(),
        };
        let changes = Arc::new(tokio::sync::watch::Sender::new(0));
        let Some(file) = file else {
            let roster = token.map(|token| Roster {
                people: vec![shortcut(token)],
                groups: Default::default(),
            });
            return Ok(Arc::new(People {
                roster: Arc::new(ArcSwap::from_pointee(roster)),
                changes,
                _watch: None,
            }));
        };
        let admin = token.map(str::to_string);
        let reserved = reserved_prefix.map(str::to_string);
        let read = move |file: &Path| -> anyhow::Result<Roster> {
            let mut roster = read_tokens(file, reserved.as_deref())?;
            if let Some(token) = &admin {
                roster.people.push(shortcut(token));
            }
            Ok(roster)
        };
        let roster = Arc::new(ArcSwap::from_pointee(Some(read(file)?)));
        let watch = watch_file(file.to_path_buf(), roster.clone(), changes.clone(), read)?;
        Ok(Arc::new(People {
            roster,
            changes,
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
        if self.roster.load().is_none() {
            return Ok(None);
        }
        let presented = bearer(authorization).ok_or(Refusal::Unauthenticated)?;
        self.find(presented)
            .ok_or(Refusal::Unauthenticated)?
            .allowed(needs)
    }

    /// The person who holds `presented`, if anyone does.
    pub(super) fn find(&self, presented: &str) -> Option<Identity> {
        let roster = self.roster.load();
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // Every entry is compared, match or not: the time taken does not
        // depend on which one matched.
        let mut found: Option<&Person> = None;
        for person in roster
            .as_ref()
            .iter()
            .flat_map(|roster| roster.people.iter())
        {
            if bool::from(person.digest.ct_eq(&digest)) && found.is_none() {
                found = Some(person);
            }
        }
        found.map(|person| Identity {
            name: person.name.clone(),
            role: person.role,
            namespace: Some(person.name.clone()),
            token: digest,
            expires: None,
            tools: person.tools.clone(),
            claimed: None,
        })
    }

    /// The view of an access token whose claim names `claimed` (`None`:
    /// no claim configured), with the groups in force.
    pub(super) fn claimed_view(&self, claimed: Option<&[String]>, namespace: Option<&str>) -> View {
        let roster = self.roster.load();
        let no_groups = sets::Groups::new();
        let groups = roster
            .as_ref()
            .as_ref()
            .map_or(&no_groups, |roster| &roster.groups);
        sets::of_claim(claimed, groups, namespace)
    }

    /// Each person of the tokens file by name, with their role and set,
    /// and each group as `@name` with its patterns (never a secret): what
    /// the audit log compares across reloads.
    pub(crate) fn summary(&self) -> std::collections::BTreeMap<String, String> {
        let roster = self.roster.load();
        let groups = roster
            .as_ref()
            .iter()
            .flat_map(|roster| roster.groups.iter())
            .map(|(name, patterns)| {
                (
                    format!("@{name}"),
                    format!("group; {}", patterns.join(", ")),
                )
            });
        roster
            .as_ref()
            .iter()
            .flat_map(|roster| roster.people.iter())
            .map(|person| {
                let tools = person
                    .tools
                    .key()
                    .map_or_else(|| "every tool".to_string(), |key| key.replace('\n', ", "));
                (
                    person.name.clone(),
                    format!("{}; {tools}", person.role.as_str()),
                )
            })
            .chain(groups)
            .collect()
    }

    /// The tokens file's publishers whose set leaves plugin `id` out: a
    /// top-level plugin the room's group cannot see is worth telling the
    /// instructor. (A caller's narrow set, an agent's, is its purpose.)
    pub(crate) fn unseen_by(&self, id: &str) -> Vec<String> {
        self.roster
            .load()
            .as_ref()
            .iter()
            .flat_map(|roster| roster.people.iter())
            .filter(|person| person.role == Role::Publisher && !person.tools.sees(id))
            .map(|person| person.name.clone())
            .collect()
    }

    /// Whether a tokens-file person still holds `identity`'s token.
    pub(super) fn holds(&self, identity: &Identity) -> bool {
        self.set_of(identity).is_some()
    }

    /// The set of the tokens-file person who holds `identity`'s token now
    /// (`None`: nobody does any more).
    pub(super) fn set_of(&self, identity: &Identity) -> Option<View> {
        self.roster
            .load()
            .as_ref()
            .iter()
            .flat_map(|roster| roster.people.iter())
            .find(|person| {
                bool::from(person.digest.ct_eq(&identity.token)) && person.name == identity.name
            })
            .map(|person| person.tools.clone())
    }
}
