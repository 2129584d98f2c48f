//! Skills (SEP-2640, extension `io.modelcontextprotocol/skills`): folders
//! of instructions an agent loads when it needs them, each a `SKILL.md`
//! with the files beside it. The room's live in the plugin folder's own
//! `skills/`, a namespace's in `<namespace>/skills/`; a skill is a folder
//! `<name>/` or a zip `<name>.zip` there (dropped in, or published with
//! `PUT /skills/{namespace}/{name}`).
//!
//! [`Skills`] holds every skill that serves, read whole into memory and
//! checked (`skill.rs`, `frontmatter.rs`), and why each of the others does
//! not. An owner's skills are read again when anything in their folder
//! changes (the watcher says so), and swapped in at once: a reader sees the
//! old set or the new one. A skill that cannot be read never takes down
//! the version of it that served. Under `--require-approval` a skill serves
//! only as approved (`approved.rs`).
//!
//! Who sees them: a caller whose set holds the whole namespace
//! ([`View::holds_all_of`]); what they see is answered in `call/`.

mod approved;
pub(crate) mod frontmatter;
mod owner;
pub(crate) mod skill;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

use self::approved::SkillApprovals;
pub(crate) use self::owner::Owner;
pub(crate) use self::skill::{Skill, SkillError};
use crate::registry::view::View;

/// The extension's identifier.
pub(crate) const EXTENSION: &str = rmcp::model::SKILLS_EXTENSION_ID;

/// A skill that does not serve as it is in the folder now, and why.
#[derive(Debug, Clone)]
pub(crate) enum NotServing {
    /// It cannot be read or checked: the author's sentence.
    Refused(String),
    /// It waits for an admin's approval (`--require-approval`); the
    /// approved version, if any, serves meanwhile.
    Held {
        /// The digest an approval of it names.
        digest: String,
        candidate: Arc<Skill>,
    },
}

/// Every skill of the folder, as one value swapped whole.
#[derive(Debug, Default)]
struct State {
    /// What serves, by the URI of each `SKILL.md`.
    serving: BTreeMap<String, Arc<Skill>>,
    /// What does not, by owner and name.
    not_serving: BTreeMap<(Owner, String), NotServing>,
}

/// The skills of one plugin folder.
#[derive(Default)]
pub struct Skills {
    state: ArcSwap<State>,
    root: std::sync::OnceLock<PathBuf>,
    approvals: std::sync::OnceLock<SkillApprovals>,
    /// One reader at a time: two reads of one folder never race to swap.
    reading: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills").finish_non_exhaustive()
    }
}

impl Skills {
    /// Skills are read from `root` from now on; with `approval`, they
    /// serve only as approved.
    pub(crate) fn open(&self, root: &Path, approval: bool) {
        let _ = self.root.set(root.to_path_buf());
        if approval {
            let _ = self.approvals.set(SkillApprovals::new(root));
        }
    }

    /// The plugin folder skills are read from, once opened.
    pub(crate) fn root(&self) -> Option<&Path> {
        self.root.get().map(PathBuf::as_path)
    }

    /// Reads the skills of every owner there is now (the room's and each
    /// namespace folder's): blocking, for a blocking thread.
    pub(crate) fn read_all(&self, namespaces: &[PathBuf]) {
        let mut owners = vec![Owner::Room];
        owners.extend(
            namespaces
                .iter()
                .filter_map(|dir| Some(Owner::Namespace(dir.file_name()?.to_str()?.to_string()))),
        );
        let Some(root) = self.root() else {
            return;
        };
        for owner in owners {
            remove_publish_leftovers(&owner.dir(root));
            self.read(&owner);
        }
    }

    /// Reads `owner`'s skills folder again and swaps what it holds in:
    /// blocking, for a blocking thread. Returns whether what serves changed.
    pub(crate) fn read(&self, owner: &Owner) -> bool {
        let Some(root) = self.root() else {
            return false;
        };
        let _reading = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        let found = read_folder(owner, &owner.dir(root));
        let old = self.state.load_full();
        let mut state = State {
            serving: old
                .serving
                .iter()
                .filter(|(_, skill)| &skill.owner != owner)
                .map(|(uri, skill)| (uri.clone(), skill.clone()))
                .collect(),
            not_serving: old
                .not_serving
                .iter()
                .filter(|((of, _), _)| of != owner)
                .map(|(key, why)| (key.clone(), why.clone()))
                .collect(),
        };
        for (name, read) in found {
            let key = (owner.clone(), name.clone());
            match read {
                Err(error) => {
                    tracing::warn!(%owner, skill = %name, %error, "a skill is refused");
                    state.not_serving.insert(key, NotServing::Refused(error));
                    // The version that served serves on.
                    let uri = format!("{}{}", owner.skill_root(&name), skill::SKILL_MD);
                    if let Some(serving) = old.serving.get(&uri) {
                        state.serving.insert(uri, serving.clone());
                    } else if let Some(Ok(approved)) = self
                        .approvals
                        .get()
                        .and_then(|approvals| approvals.skill(owner, &name))
                    {
                        // After a restart: the approved one serves on.
                        state.serving.insert(uri, Arc::new(approved));
                    }
                }
                Ok(skill) => {
                    let skill = Arc::new(skill);
                    match self.approvals.get() {
                        None => {
                            state.serving.insert(skill.uri.clone(), skill);
                        }
                        Some(approvals) => {
                            let approved = approvals.approved(owner, &name);
                            if approved.as_ref().is_some_and(|a| a.digest == skill.digest) {
                                state.serving.insert(skill.uri.clone(), skill);
                                continue;
                            }
                            if let Some(Ok(approved)) = approvals.skill(owner, &name) {
                                state
                                    .serving
                                    .insert(approved.uri.clone(), Arc::new(approved));
                            }
                            state.not_serving.insert(
                                key,
                                NotServing::Held {
                                    digest: skill.digest.clone(),
                                    candidate: skill,
                                },
                            );
                        }
                    }
                }
            }
        }
        let changed = state.serving.len() != old.serving.len()
            || state.serving.iter().any(|(uri, skill)| {
                old.serving
                    .get(uri)
                    .is_none_or(|old| old.digest != skill.digest)
            });
        self.state.store(Arc::new(state));
        changed
    }

    /// One page of the skills `view` sees, after the URI `after`, at most
    /// `limit` of them, and the URI to go on after when there are more.
    pub(crate) fn page(
        &self,
        view: &View,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<Arc<Skill>>, Option<String>) {
        let state = self.state.load();
        let start = match after {
            Some(after) => std::ops::Bound::Excluded(after.to_string()),
            None => std::ops::Bound::Unbounded,
        };
        let mut seen = state
            .serving
            .range((start, std::ops::Bound::Unbounded))
            .map(|(_, skill)| skill)
            .filter(|skill| skill.owner.seen_by(view));
        let page: Vec<Arc<Skill>> = seen.by_ref().take(limit).cloned().collect();
        let next = match seen.next() {
            Some(_) => page.last().map(|skill| skill.uri.clone()),
            None => None,
        };
        (page, next)
    }

    /// Every skill `view` sees.
    pub(crate) fn seen(&self, view: &View) -> Vec<Arc<Skill>> {
        self.page(view, None, usize::MAX).0
    }

    /// Whether `view` sees any skill.
    pub(crate) fn any_seen(&self, view: &View) -> bool {
        self.state
            .load()
            .serving
            .values()
            .any(|skill| skill.owner.seen_by(view))
    }

    /// The skill whose `SKILL.md` is at `uri`, if `view` sees it.
    pub(crate) fn get(&self, uri: &str, view: &View) -> Option<Arc<Skill>> {
        self.state
            .load()
            .serving
            .get(uri)
            .filter(|skill| skill.owner.seen_by(view))
            .cloned()
    }

    /// The skill one of whose files is at `uri`, if `view` sees it.
    pub(crate) fn holding(&self, uri: &str, view: &View) -> Option<Arc<Skill>> {
        let skill = self.get(&owner::skill_md_of(uri)?, view)?;
        skill.file(uri).is_some().then_some(skill)
    }

    /// The direct children of the folder at `uri` (a skill's, or one in
    /// it), if `view` sees its skill (`Skill::directory`).
    pub(crate) fn directory(&self, uri: &str, view: &View) -> Option<Vec<serde_json::Value>> {
        self.get(&owner::skill_md_of_folder(uri)?, view)?
            .directory(uri)
    }

    /// How many skills `owner` holds and their bytes together (what serves
    /// and what waits for approval), leaving out `except`'s.
    pub(crate) fn held_by(&self, owner: &Owner, except: Option<&str>) -> (u64, u64) {
        let state = self.state.load();
        let mut held: BTreeMap<&str, u64> = BTreeMap::new();
        for skill in state.serving.values().filter(|skill| &skill.owner == owner) {
            held.insert(&skill.name, skill.size());
        }
        for ((of, name), why) in &state.not_serving {
            if let (true, NotServing::Held { candidate, .. }) = (of == owner, why) {
                let size = held.entry(name).or_default();
                *size = (*size).max(candidate.size());
            }
        }
        if let Some(except) = except {
            held.remove(except);
        }
        (held.len() as u64, held.values().sum())
    }

    /// Why `owner`'s skills that do not serve do not.
    pub(crate) fn not_serving(&self, owner: Option<&Owner>) -> Vec<(Owner, String, NotServing)> {
        self.state
            .load()
            .not_serving
            .iter()
            .filter(|((of, _), _)| owner.is_none_or(|owner| of == owner))
            .map(|((of, name), why)| (of.clone(), name.clone(), why.clone()))
            .collect()
    }

    /// Approves `owner`'s skill `name` as it waits now, if its digest is
    /// `digest` (when given): kept, and served from now on.
    pub(crate) fn approve(
        &self,
        owner: &Owner,
        name: &str,
        digest: Option<&str>,
        person: &str,
    ) -> Result<Arc<Skill>, ApproveError> {
        let approvals = self.approvals.get().ok_or(ApproveError::NotRequired)?;
        let waiting = self
            .state
            .load()
            .not_serving
            .get(&(owner.clone(), name.to_string()))
            .cloned();
        let Some(NotServing::Held { candidate, .. }) = waiting else {
            return Err(ApproveError::NothingHeld);
        };
        if digest.is_some_and(|digest| digest != candidate.digest) {
            return Err(ApproveError::Changed(candidate.digest.clone()));
        }
        approvals
            .approve(&candidate, person)
            .map_err(|error| ApproveError::Io(error.to_string()))?;
        self.read(owner);
        Ok(candidate)
    }
}

/// Why an approval of a skill was not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApproveError {
    #[error("this server does not require approval (--require-approval)")]
    NotRequired,
    #[error("no version of this skill waits for approval")]
    NothingHeld,
    #[error("the skill waiting now is {0}, not the one named: look at it again")]
    Changed(String),
    #[error("keeping the approval: {0}")]
    Io(String),
}

/// The skills in an owner's folder `dir`, by name: each read and checked,
/// or why not. Hidden entries (a publish's file being written) are left
/// out; a name with both a folder and a zip is refused.
fn read_folder(owner: &Owner, dir: &Path) -> BTreeMap<String, Result<Skill, String>> {
    let mut found: BTreeMap<String, Result<Skill, String>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.filter_map(Result::ok) {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let (name, read) = if kind.is_dir() {
            let name = file_name.clone();
            let read = Skill::from_dir(owner.clone(), &name, &entry.path());
            (name, read)
        } else if let Some(name) = file_name.strip_suffix(".zip") {
            let read = read_zip_file(&entry.path())
                .and_then(|bytes| Skill::from_zip(owner.clone(), name, &bytes));
            (name.to_string(), read)
        } else {
            continue;
        };
        let read = read.map_err(|error| error.to_string());
        if found.contains_key(&name) {
            found.insert(
                name.clone(),
                Err(format!("both {name}/ and {name}.zip are there: keep one")),
            );
        } else {
            found.insert(name, read);
        }
    }
    found
}

/// What a publish stopped half-way left in a skills folder (a folder
/// being written, or the one it replaced): removed at start-up.
fn remove_publish_leftovers(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && (name.ends_with(".publishing") || name.ends_with(".replaced")) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A zip in a skills folder: a regular file (no link followed), bounded.
fn read_zip_file(path: &Path) -> Result<Vec<u8>, SkillError> {
    let shown = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    skill::read_regular(path, &shown, skill::LIMITS.max_zip())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(name: &str) -> String {
        format!("---\nname: {name}\ndescription: About {name}\n---\nBody\n")
    }

    #[test]
    fn an_owners_folder_is_read_and_seen_by_who_holds_it() {
        let root = tempfile::tempdir().unwrap();
        let skills = Skills::default();
        skills.open(root.path(), false);
        let dir = root.path().join("ada/skills/csv-report");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), md("csv-report")).unwrap();
        std::fs::create_dir_all(root.path().join("ada/skills/broken")).unwrap();
        std::fs::write(root.path().join("ada/skills/broken/SKILL.md"), "no").unwrap();
        assert!(skills.read(&Owner::Namespace("ada".into())));
        let ada = View::of(&["ada/*".to_string()]).unwrap();
        let bob = View::of(&["bob/*".to_string(), "ada/word_count".into()]).unwrap();
        let uri = "skill://ada/csv-report/SKILL.md";
        assert!(skills.get(uri, &ada).is_some());
        assert!(skills.get(uri, &bob).is_none());
        assert!(skills.holding(uri, &ada).is_some());
        assert_eq!(skills.seen(&bob).len(), 0);
        let refused = skills.not_serving(None);
        assert_eq!(refused.len(), 1);
        assert!(matches!(&refused[0].2, NotServing::Refused(why) if why.contains("line 1")));
        // A broken edit keeps the version that served.
        std::fs::write(dir.join("SKILL.md"), "---\nname: x\n").unwrap();
        skills.read(&Owner::Namespace("ada".into()));
        assert!(skills.get(uri, &ada).is_some());
        assert_eq!(skills.not_serving(None).len(), 2);
    }

    #[test]
    fn pages_go_on_where_they_stopped() {
        let root = tempfile::tempdir().unwrap();
        let skills = Skills::default();
        skills.open(root.path(), false);
        for name in ["a", "b", "c", "d", "e"] {
            let dir = root.path().join("skills").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("SKILL.md"), md(name)).unwrap();
        }
        skills.read(&Owner::Room);
        let all = View::all();
        let (first, next) = skills.page(&all, None, 2);
        assert_eq!(first.len(), 2);
        let (second, next) = skills.page(&all, next.as_deref(), 2);
        let (third, last) = skills.page(&all, next.as_deref(), 2);
        assert_eq!((second.len(), third.len(), last), (2, 1, None));
        assert_eq!(third[0].name, "e");
    }

    #[test]
    fn under_approval_a_changed_skill_waits_while_the_approved_one_serves() {
        let root = tempfile::tempdir().unwrap();
        let skills = Skills::default();
        skills.open(root.path(), true);
        let dir = root.path().join("skills/notes");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), md("notes")).unwrap();
        skills.read(&Owner::Room);
        let uri = "skill://skills/notes/SKILL.md";
        assert!(skills.get(uri, &View::all()).is_none(), "new: held");
        skills
            .approve(&Owner::Room, "notes", None, "admin")
            .unwrap();
        assert!(skills.get(uri, &View::all()).is_some());
        std::fs::write(dir.join("SKILL.md"), md("notes") + "Exfiltrate.\n").unwrap();
        skills.read(&Owner::Room);
        let serving = skills.get(uri, &View::all()).unwrap();
        assert!(!String::from_utf8_lossy(&serving.files[0].bytes).contains("Exfiltrate"));
        assert!(matches!(
            skills.approve(&Owner::Room, "notes", Some("sha256:00"), "admin"),
            Err(ApproveError::Changed(_))
        ));
        // A restart reads the approval back.
        let again = Skills::default();
        again.open(root.path(), true);
        again.read(&Owner::Room);
        let serving = again.get(uri, &View::all()).unwrap();
        assert!(!String::from_utf8_lossy(&serving.files[0].bytes).contains("Exfiltrate"));
    }
}
