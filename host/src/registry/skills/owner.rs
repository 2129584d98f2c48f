//! Whose a skill is: the room's (the plugin folder's own `skills/`) or a
//! namespace's (`<namespace>/skills/`); where its skills live, the URIs
//! they are served under (`skill://<namespace>/<name>/…`, the room's
//! `skill://skills/<name>/…`), and who sees them.

use std::path::{Path, PathBuf};

use crate::registry::view::View;

use crate::registry::layout::SKILLS_DIR;

/// Whose a skill is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Owner {
    /// The room's: `skills/` at the top of the plugin folder.
    Room,
    /// A namespace's: `<namespace>/skills/`.
    Namespace(String),
}

impl Owner {
    /// The owner whose skills folder holds `path` (anything below it), if
    /// one does.
    pub(crate) fn of_path(root: &Path, path: &Path) -> Option<Owner> {
        let relative = path.strip_prefix(root).ok()?;
        let mut parts = relative.components().map(|part| part.as_os_str().to_str());
        match (parts.next()??, parts.next()) {
            (SKILLS_DIR, _) => Some(Owner::Room),
            (namespace, Some(Some(SKILLS_DIR)))
                if crate::registry::layout::is_valid_namespace(namespace) =>
            {
                Some(Owner::Namespace(namespace.to_string()))
            }
            _ => None,
        }
    }

    /// Its skills folder in the plugin folder `root`.
    pub(crate) fn dir(&self, root: &Path) -> PathBuf {
        match self {
            Owner::Room => root.join(SKILLS_DIR),
            Owner::Namespace(namespace) => root.join(namespace).join(SKILLS_DIR),
        }
    }

    /// The URI of the folder of its skill `name`, ending in `/`: under the
    /// namespace's authority, or `skills` for the room's (a name no
    /// namespace may take), so that no two skills' files share a URI.
    pub(crate) fn skill_root(&self, name: &str) -> String {
        format!("skill://{}/{name}/", self.authority())
    }

    /// The first part of its skills' URIs.
    fn authority(&self) -> &str {
        match self {
            Owner::Room => SKILLS_DIR,
            Owner::Namespace(namespace) => namespace,
        }
    }

    /// Its namespace, `None` for the room.
    pub(crate) fn namespace(&self) -> Option<&str> {
        match self {
            Owner::Room => None,
            Owner::Namespace(namespace) => Some(namespace),
        }
    }

    /// Whether a caller who sees `view` sees its skills: the view holds
    /// every plugin of the namespace (or of the top level, for the room's).
    pub(crate) fn seen_by(&self, view: &View) -> bool {
        view.holds_all_of(self.namespace())
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Room => f.write_str("the room"),
            Owner::Namespace(namespace) => write!(f, "namespace {namespace:?}"),
        }
    }
}

/// The `SKILL.md` URI of the skill a file's `uri` would belong to: its
/// first two parts (the authority and the skill's name), as
/// [`Owner::skill_root`] writes them.
pub(crate) fn skill_md_of(uri: &str) -> Option<String> {
    // A file: a path past the skill's name.
    let in_skill = uri.strip_prefix("skill://")?.splitn(3, '/').count() == 3;
    in_skill.then(|| skill_md_of_folder(uri)).flatten()
}

/// The `SKILL.md` URI of the skill whose folder, or a folder in it, is at
/// `uri` (`skill://<authority>/<name>[/<path>]`, no trailing slash).
pub(crate) fn skill_md_of_folder(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("skill://")?;
    let mut parts = rest.splitn(3, '/');
    let (authority, name) = (parts.next()?, parts.next()?);
    (!authority.is_empty() && !name.is_empty())
        .then(|| format!("skill://{authority}/{name}/SKILL.md"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_owners_share_a_uri_and_a_file_names_its_skill() {
        assert_eq!(Owner::Room.skill_root("pdf"), "skill://skills/pdf/");
        assert_eq!(
            Owner::Namespace("pdf".into()).skill_root("forms"),
            "skill://pdf/forms/"
        );
        assert_eq!(
            skill_md_of("skill://pdf/forms/guide.md").as_deref(),
            Some("skill://pdf/forms/SKILL.md")
        );
        assert_eq!(
            skill_md_of("skill://skills/pdf/a/b.md").as_deref(),
            Some("skill://skills/pdf/SKILL.md")
        );
        assert_eq!(skill_md_of("skill://pdf"), None);
        assert_eq!(skill_md_of("skill://pdf/forms"), None);
        assert_eq!(skill_md_of("ui://pdf/forms/x"), None);
        assert_eq!(
            skill_md_of_folder("skill://pdf/forms").as_deref(),
            Some("skill://pdf/forms/SKILL.md")
        );
        assert_eq!(
            skill_md_of_folder("skill://pdf/forms/references").as_deref(),
            Some("skill://pdf/forms/SKILL.md")
        );
        assert_eq!(skill_md_of_folder("skill://pdf"), None);
        assert_eq!(skill_md_of_folder("skill://pdf/"), None);
    }

    #[test]
    fn a_path_below_a_skills_folder_has_its_owner() {
        let root = Path::new("/p");
        let of = |path: &str| Owner::of_path(root, Path::new(path));
        assert_eq!(of("/p/skills/x/SKILL.md"), Some(Owner::Room));
        assert_eq!(of("/p/skills"), Some(Owner::Room));
        assert_eq!(
            of("/p/ada/skills/x/a/b.md"),
            Some(Owner::Namespace("ada".into()))
        );
        assert_eq!(of("/p/ada/x.wasm"), None);
        assert_eq!(of("/p/.toolhost/skills/x"), None);
        assert_eq!(of("/q/skills/x"), None);
    }
}
