//! A skill published or removed over HTTP (`PUT`, `DELETE /skills/…`), or
//! approved by an admin: checked whole before anything is written (its
//! `SKILL.md` and files as the server will serve them, and the
//! namespace's share of skills), written into the owner's skills folder by
//! rename (a `SKILL.md` alone as `<name>/SKILL.md`, a zip as
//! `<name>.zip`; the other form removed), read at once, and recorded in
//! the audit log. The namespace's publish lock is held throughout, so two
//! publishes of one namespace never interleave.

use std::sync::Arc;

use serde_json::json;

use super::audit::Action;
use super::publish::Publishing;
use crate::registry::skills::{ApproveError, NotServing, Owner, Skill, SkillError};

/// What is sent: a `SKILL.md` alone, or a zip of the skill's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SkillForm {
    Markdown,
    Zip,
}

/// How a publish of a skill ended.
#[derive(Debug)]
pub(crate) enum SkillPublished {
    /// It serves, new (`replaced: false`) or in place of the one before.
    Serving { skill: Arc<Skill>, replaced: bool },
    /// It waits for an admin's approval (`--require-approval`).
    Held { digest: String },
}

/// Why a skill was not published: nothing was written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillPublishError {
    #[error(transparent)]
    Refused(#[from] SkillError),
    #[error(
        "namespace {namespace:?} would hold {would} {what} of skills, over its share of {limit}"
    )]
    OverShare {
        namespace: String,
        what: &'static str,
        would: u64,
        limit: u64,
    },
    #[error("no skill {0:?} is there")]
    NotThere(String),
    #[error("writing it: {0}")]
    Io(String),
}

impl Publishing {
    /// Publishes `owner`'s skill `name` from `bytes` sent as `form`.
    #[tracing::instrument(skip(self, bytes), fields(%owner, skill = name, bytes = bytes.len()))]
    pub(crate) async fn publish_skill(
        &self,
        owner: &Owner,
        name: &str,
        form: SkillForm,
        bytes: Vec<u8>,
        by: &str,
    ) -> Result<SkillPublished, SkillPublishError> {
        // Unpacked, hashed and parsed off the async workers.
        let (checked_owner, checked_name) = (owner.clone(), name.to_string());
        let (skill, bytes) = tokio::task::spawn_blocking(move || {
            let skill = match form {
                SkillForm::Zip => Skill::from_zip(checked_owner, &checked_name, &bytes),
                SkillForm::Markdown => Skill::new(
                    checked_owner,
                    &checked_name,
                    vec![("SKILL.md".into(), bytes.clone())],
                ),
            };
            skill.map(|skill| (skill, bytes))
        })
        .await
        .map_err(|error| SkillPublishError::Io(error.to_string()))??;
        // What it takes on disk: the zip as sent, or its files.
        let stored = (bytes.len() as u64).max(skill.size());
        let skills = self.registry().skills();
        let root = skills
            .root()
            .ok_or_else(|| SkillPublishError::Io("the plugin folder is not open yet".into()))?
            .to_path_buf();
        let lock = self.publish_lock(&lock_key(owner));
        let _held = lock.lock().await;
        if let Owner::Namespace(namespace) = owner {
            // As many skills as plugins, and as many bytes: a share of
            // its own beside the plugins'.
            let (others, bytes) = skills.held_by(owner, Some(name));
            self.shares()
                .check(namespace, others + 1, bytes + stored)
                .map_err(|over| SkillPublishError::OverShare {
                    namespace: over.namespace,
                    what: if over.what == "plugins" {
                        "a count"
                    } else {
                        "bytes"
                    },
                    would: over.would,
                    limit: over.limit,
                })?;
        }
        let replaced = skills
            .get(&skill.uri, &crate::registry::view::View::all())
            .is_some();
        let (dir, name_owned) = (owner.dir(&root), name.to_string());
        let write = move || -> std::io::Result<()> {
            let name = name_owned.as_str();
            std::fs::create_dir_all(&dir)?;
            let folder = dir.join(name);
            let zip = dir.join(format!("{name}.zip"));
            match form {
                SkillForm::Zip => {
                    crate::registry::layout::write_by_rename(&zip, &bytes)?;
                    remove_path(&folder)?;
                }
                SkillForm::Markdown => {
                    // The folder is written whole beside, the old one
                    // moved aside, the new one renamed in, the old removed.
                    let making = dir.join(format!(".{name}.publishing"));
                    let old = dir.join(format!(".{name}.replaced"));
                    remove_path(&making)?;
                    remove_path(&old)?;
                    std::fs::create_dir_all(&making)?;
                    std::fs::write(making.join("SKILL.md"), &bytes)?;
                    if std::fs::symlink_metadata(&folder).is_ok() {
                        std::fs::rename(&folder, &old)?;
                    }
                    std::fs::rename(&making, &folder)?;
                    remove_path(&old)?;
                    remove_path(&zip)?;
                }
            }
            Ok(())
        };
        tokio::task::spawn_blocking(write)
            .await
            .map_err(|error| SkillPublishError::Io(error.to_string()))?
            .map_err(|error| SkillPublishError::Io(error.to_string()))?;
        self.registry().reload_skills(owner.clone()).await;
        let held = skills
            .not_serving(Some(owner))
            .into_iter()
            .find_map(|(_, of, why)| match why {
                NotServing::Held { digest, .. } if of == name => Some(digest),
                _ => None,
            });
        let (action, outcome) = match held {
            Some(digest) => (Action::PublishHeld, SkillPublished::Held { digest }),
            None => {
                let serving = skills
                    .get(&skill.uri, &crate::registry::view::View::all())
                    .ok_or_else(|| {
                        SkillPublishError::Io("it was written but does not serve".into())
                    })?;
                (
                    Action::Publish,
                    SkillPublished::Serving {
                        skill: serving,
                        replaced,
                    },
                )
            }
        };
        if let Some(audit) = self.audit() {
            audit.record(
                action,
                by,
                Some(&audit_name(owner, name)),
                json!({ "skill": skill.uri, "digest": skill.digest, "files": skill.files.len() }),
            );
        }
        Ok(outcome)
    }

    /// Removes `owner`'s skill `name` (its folder or its zip).
    #[tracing::instrument(skip(self), fields(%owner, skill = name))]
    pub(crate) async fn remove_skill(
        &self,
        owner: &Owner,
        name: &str,
        by: &str,
    ) -> Result<(), SkillPublishError> {
        let skills = self.registry().skills();
        let root = skills
            .root()
            .ok_or_else(|| SkillPublishError::NotThere(name.to_string()))?
            .to_path_buf();
        let lock = self.publish_lock(&lock_key(owner));
        let _held = lock.lock().await;
        let dir = owner.dir(&root);
        let (folder, zip) = (dir.join(name), dir.join(format!("{name}.zip")));
        let there =
            std::fs::symlink_metadata(&folder).is_ok() || std::fs::symlink_metadata(&zip).is_ok();
        if !crate::registry::skills::frontmatter::is_skill_name(name) || !there {
            return Err(SkillPublishError::NotThere(name.to_string()));
        }
        tokio::task::spawn_blocking(move || {
            remove_path(&folder)?;
            remove_path(&zip)
        })
        .await
        .map_err(|error| SkillPublishError::Io(error.to_string()))?
        .map_err(|error| SkillPublishError::Io(error.to_string()))?;
        self.registry().reload_skills(owner.clone()).await;
        if let Some(audit) = self.audit() {
            audit.record(
                Action::Remove,
                by,
                Some(&audit_name(owner, name)),
                json!({}),
            );
        }
        Ok(())
    }

    /// An admin approves `owner`'s skill `name` as it waits now (if its
    /// digest is `digest`, when given).
    pub(crate) async fn approve_skill(
        &self,
        owner: &Owner,
        name: &str,
        digest: Option<String>,
        by: &str,
    ) -> Result<Arc<Skill>, ApproveError> {
        let registry = self.registry().clone();
        let (owner_moved, name_moved, by_moved) = (owner.clone(), name.to_string(), by.to_string());
        let approved = tokio::task::spawn_blocking(move || {
            registry
                .skills()
                .approve(&owner_moved, &name_moved, digest.as_deref(), &by_moved)
        })
        .await
        .map_err(|error| ApproveError::Io(error.to_string()))??;
        // Sessions hear of the list that changed.
        self.registry().reload_skills(owner.clone()).await;
        if let Some(audit) = self.audit() {
            audit.record(
                Action::Approve,
                by,
                Some(&audit_name(owner, name)),
                json!({ "skill": approved.uri, "digest": approved.digest }),
            );
        }
        Ok(approved)
    }
}

/// What the audit log names a skill: `skill:ns/name`, `skill:name`.
fn audit_name(owner: &Owner, name: &str) -> String {
    match owner.namespace() {
        Some(namespace) => format!("skill:{namespace}/{name}"),
        None => format!("skill:{name}"),
    }
}

/// The publish lock a skill of `owner` takes: its namespace's (the one its
/// plugins take), or the room's skills' own.
fn lock_key(owner: &Owner) -> String {
    match owner.namespace() {
        Some(namespace) => format!("{namespace}/skills"),
        None => "skills".to_string(),
    }
}

/// Removes what is at `path` (a folder whole, a file, or a link itself),
/// if anything is.
fn remove_path(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}
