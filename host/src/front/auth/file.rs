//! The tokens file (`--tokens FILE`): its TOML shape, how it is read and
//! checked (names, secrets of 16 characters or more, or their SHA-256, no
//! two people with one token), and the watcher that reloads it when it
//! changes, keeping the people in force when a new version is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Person, Role, is_valid_person};

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

/// Reads and checks a tokens file.
pub(super) fn read_tokens(file: &Path) -> anyhow::Result<Vec<Person>> {
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
pub(super) fn watch_file(
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
    use super::super::tests::people;

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
