//! Skills under `--require-approval`: a skill serves only as an admin
//! approved it. The approved skill is kept whole with the folder's
//! approvals (`.toolhost/approvals/skills/<owner>/<name>.json`: its digest,
//! who approved and when, and its files), so a changed skill waits while
//! the approved one serves on, across a restart and on every replica on
//! the folder.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::owner::Owner;
use super::skill::{Skill, SkillError};
use crate::registry::layout::write_by_rename;

/// One approved skill, as kept.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ApprovedSkill {
    pub(crate) digest: String,
    pub(crate) approved_by: String,
    pub(crate) approved_at: String,
    /// Its files: path and base64 bytes.
    files: Vec<(String, String)>,
}

/// The approved skills of one plugin folder.
#[derive(Debug)]
pub(crate) struct SkillApprovals {
    dir: PathBuf,
}

impl SkillApprovals {
    pub(crate) fn new(folder: &Path) -> SkillApprovals {
        SkillApprovals {
            dir: folder.join(".toolhost").join("approvals").join("skills"),
        }
    }

    fn file(&self, owner: &Owner, name: &str) -> PathBuf {
        self.dir
            .join(owner.namespace().unwrap_or("_room"))
            .join(format!("{name}.json"))
    }

    /// What was approved of `owner`'s skill `name`, if anything.
    pub(crate) fn approved(&self, owner: &Owner, name: &str) -> Option<ApprovedSkill> {
        let bytes = std::fs::read(self.file(owner, name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The approved skill itself, rebuilt from what was kept.
    pub(crate) fn skill(&self, owner: &Owner, name: &str) -> Option<Result<Skill, SkillError>> {
        let approved = self.approved(owner, name)?;
        let files = approved
            .files
            .into_iter()
            .map(|(path, data)| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                (path, bytes)
            })
            .collect();
        Some(Skill::new(owner.clone(), name, files))
    }

    /// Keeps `skill` as approved by `person`.
    pub(crate) fn approve(&self, skill: &Skill, person: &str) -> std::io::Result<()> {
        let approved = ApprovedSkill {
            digest: skill.digest.clone(),
            approved_by: person.to_string(),
            approved_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
            files: skill
                .files
                .iter()
                .map(|file| {
                    (
                        file.path.clone(),
                        base64::engine::general_purpose::STANDARD.encode(&file.bytes),
                    )
                })
                .collect(),
        };
        let path = self.file(&skill.owner, &skill.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        write_by_rename(
            &path,
            &serde_json::to_vec(&approved).expect("an approval serialises"),
        )
    }
}
