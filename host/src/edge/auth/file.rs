//! The tokens file (`--tokens FILE`): its TOML shape, how it is read and
//! checked (names, secrets of 16 characters or more, or their SHA-256, no
//! two people with one token, at least one person, no name with the OAuth
//! namespace prefix, tool sets and groups that resolve), and the watcher
//! that reloads it when it changes.
//!
//! A reload is atomic in effect: the file is read once it has been quiet
//! for [`SETTLE`] (`cp` and many editors truncate, then write), and a
//! version that cannot be read, is empty or is invalid keeps the people in
//! force, is logged with its reason and is read again every [`RETRY`] until
//! it can be taken (or the next change comes). Operators should still
//! write it by rename (`mv new tokens.toml`), which is atomic.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::person::{Person, Role, is_valid_person};
use super::sets::{Groups, check_groups, resolve};

/// The tokens file's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
    #[serde(default)]
    group: Vec<GroupEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    secret: Option<String>,
    sha256: Option<String>,
    role: Role,
    /// The plugins this person sees (`sets.rs`); absent: every one.
    tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupEntry {
    name: String,
    tools: Vec<String>,
}

/// What one version of the tokens file says: its people and its groups.
pub(super) struct Roster {
    pub(super) people: Vec<Person>,
    pub(super) groups: Groups,
}

/// How long the file must be quiet before it is read.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(100);
/// How often a refused version is read again, and how many times before
/// only the next change is waited for (a file left broken is not polled
/// for ever).
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);
const RETRIES: u32 = 60;

/// Reads and checks a tokens file. With OAuth, `reserved_prefix` is its
/// namespace prefix, which no person's name may start with.
pub(super) fn read_tokens(file: &Path, reserved_prefix: Option<&str>) -> anyhow::Result<Roster> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read the tokens file {}: {e}", file.display()))?;
    let parsed: TokensFile = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the tokens file {} is not valid: {e}", file.display()))?;
    let mut groups = Groups::new();
    for group in parsed.group {
        anyhow::ensure!(
            !groups.contains_key(&group.name),
            "the tokens file {}: group {:?} is given twice",
            file.display(),
            group.name
        );
        groups.insert(group.name, group.tools);
    }
    check_groups(&groups)
        .map_err(|why| anyhow::anyhow!("the tokens file {}: {why}", file.display()))?;
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
        if let Some(prefix) = reserved_prefix
            && entry.name.starts_with(prefix)
        {
            return Err(bad(&format!(
                "names starting with {prefix:?} are access-token holders' (--auth-namespace-prefix)"
            )));
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
        let tools = resolve(entry.tools.as_deref(), &groups, Some(&entry.name))
            .map_err(|why| bad(&format!("tools: {why}")))?;
        people.push(Person {
            name: entry.name,
            role: entry.role,
            digest,
            tools,
        });
    }
    anyhow::ensure!(
        !people.is_empty() || !groups.is_empty(),
        "the tokens file {} names nobody: it needs at least one [[token]] (a file being \
         rewritten in place looks like this; write it elsewhere and rename it over)",
        file.display()
    );
    Ok(Roster { people, groups })
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
/// and reloads it once it has settled; a version that fails keeps the
/// people in force and is read again every [`RETRY`]. Each reload taken
/// bumps `changes`.
pub(super) fn watch_file(
    file: PathBuf,
    people: Arc<ArcSwap<Option<Roster>>>,
    changes: Arc<tokio::sync::watch::Sender<u64>>,
    read: impl Fn(&Path) -> anyhow::Result<Roster> + Send + 'static,
) -> anyhow::Result<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let name = file.file_name().map(|name| name.to_os_string());
    let (touched, touches) = std::sync::mpsc::channel::<()>();
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
                | notify::EventKind::Remove(_)
                | notify::EventKind::Access(notify::event::AccessKind::Close(
                    notify::event::AccessMode::Write
                ))
        );
        if ours && changes {
            let _ = touched.send(());
        }
    })?;
    let folder = file
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    watcher.watch(&folder, notify::RecursiveMode::NonRecursive)?;
    // The watcher's sender lives in the watcher: once it is dropped (the
    // server stops) the channel closes and this thread ends.
    std::thread::Builder::new()
        .name("tokens-file".into())
        .spawn(move || reload_on_change(&file, &touches, &people, &changes, read))?;
    Ok(watcher)
}

/// The reloading loop: wait for a change, let the file settle, take it or
/// keep what is in force and try again.
fn reload_on_change(
    file: &Path,
    touches: &std::sync::mpsc::Receiver<()>,
    people: &ArcSwap<Option<Roster>>,
    changes: &tokio::sync::watch::Sender<u64>,
    read: impl Fn(&Path) -> anyhow::Result<Roster>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut retries = 0;
    // The reason last logged: each new one is said once, a repeat is not.
    let mut said = String::new();
    loop {
        let next = if retries > 0 {
            touches.recv_timeout(RETRY)
        } else {
            touches.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        if next == Err(RecvTimeoutError::Disconnected) {
            return;
        }
        // Settle: a burst of writes (truncate, then write) is read once.
        loop {
            match touches.recv_timeout(SETTLE) {
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        match read(file) {
            Ok(next) => {
                tracing::info!(file = %file.display(), people = next.people.len(), groups = next.groups.len(), "tokens file reloaded");
                people.store(Arc::new(Some(next)));
                changes.send_modify(|version| *version += 1);
                retries = 0;
                said.clear();
            }
            Err(error) => {
                let reason = format!("{error:#}");
                if reason != said {
                    tracing::warn!(error = %reason, "tokens file refused; the people already known stay in force, and it is read again every second for a minute");
                    said = reason;
                }
                retries = if next.is_ok() { RETRIES } else { retries - 1 };
            }
        }
    }
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
            ("# nobody\n", "names nobody"),
            (
                "[[token]]\nname = \"a\"\nsecret = \"0123456789abcdefg\"\nrole = \"caller\"\ntools = [\"@room\"]\n",
                "no [[group]] is named",
            ),
            (
                "[[group]]\nname = \"room\"\ntools = [\"a/b/c\"]\n[[token]]\nname = \"a\"\nsecret = \"0123456789abcdefg\"\nrole = \"caller\"\n",
                "not a glob",
            ),
            (
                "[[token]]\nname = \"oauth-ada\"\nsecret = \"0123456789abcdefg\"\nrole = \"caller\"\n",
                "access-token holders'",
            ),
        ];
        for (text, why) in cases {
            let error = format!("{:#}", people(text).err().unwrap());
            assert!(error.contains(why), "{text}: {error}");
        }
        // Groups alone (an OAuth-only server's `--auth-tools-claim`) are a file.
        let groups = people("[[group]]\nname = \"support\"\ntools = [\"support/*\"]\n").unwrap();
        assert!(groups.people.is_empty() && groups.groups.contains_key("support"));
    }
}
