//! Where builds write on the host, and the one way the server reads what a
//! build made.
//!
//! - **The server's folder** ([`Scratch`]): `toolhost-builds-*` in the
//!   system's temporary folder, mode 0700, made at start-up, holding one
//!   folder per build (0700 too, so no other local user reads an
//!   attendee's source while it builds). A lock on its `.lock` file is held
//!   while the server lives; a folder whose lock anyone can take was left
//!   by a server that was killed, and is removed at the next start.
//! - **A build's folders** ([`BuildFolders`]): `src`, the sources the
//!   server writes, and `out`, where the toolchain writes the component.
//!   A contained build sees `src` read-only and copies it into a size-bound
//!   tmpfs of its own; `out` is never handed to the author's code (the
//!   toolchain preopens only the module search paths into its wasm
//!   interpreter), so no link the code makes can stand where the server
//!   reads.
//! - **Reading what a build made** ([`read_output`]): every file the
//!   server reads from a place a build could write is opened here, the same
//!   way: no link followed (`O_NOFOLLOW`), no wait on a FIFO or a device
//!   (`O_NONBLOCK`), the descriptor's own `fstat` asked for a regular file
//!   with one name, and at most the limit plus one byte read, off the async
//!   workers. A link or special file left in a build's folders refuses the
//!   build ([`left_behind`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The prefix of each server's folder in the temporary folder.
const PREFIX: &str = "toolhost-builds-";
/// The file whose lock says the folder's server is alive.
const LOCK: &str = ".lock";

/// The server's folder for builds, locked while the server lives.
#[derive(Debug)]
pub(crate) struct Scratch {
    root: PathBuf,
    /// Held (its lock with it) until the server ends.
    _lock: File,
}

/// One build's folders, removed when dropped.
pub(crate) struct BuildFolders {
    dir: tempfile::TempDir,
}

/// Why what a build made was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputRefused {
    /// Nothing there.
    #[error("the build exited without writing its component")]
    Missing,
    /// A link, a FIFO, a device, a folder, or a file with other names.
    #[error("the build left {0} where its component should be, which is never read")]
    NotAFile(&'static str),
    /// Larger than a plugin may be: its size as the file says.
    #[error("the component is {size} bytes, over the {limit} allowed")]
    TooLarge { size: u64, limit: u64 },
    #[error(transparent)]
    Io(std::io::Error),
}

impl Scratch {
    /// Makes this server's folder in the temporary folder, after removing
    /// any a killed server left there.
    pub(crate) fn open() -> std::io::Result<Scratch> {
        Self::open_in(&std::env::temp_dir())
    }

    fn open_in(parent: &Path) -> std::io::Result<Scratch> {
        let removed = sweep(parent);
        if removed > 0 {
            tracing::info!(
                removed,
                "removed build folders left by a server that was killed"
            );
        }
        // Made under another name, locked, then renamed: no other server's
        // sweep ever sees it unlocked.
        let making = tempfile::Builder::new()
            .prefix(".toolhost-builds-making-")
            .permissions(private())
            .tempdir_in(parent)?;
        let lock = open_lock(&making.path().join(LOCK), true)?;
        if !try_lock(&lock) {
            return Err(std::io::Error::other(
                "the new build folder's lock is held by another process",
            ));
        }
        let suffix = making
            .path()
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_prefix(".toolhost-builds-making-"))
            .unwrap_or("0")
            .to_string();
        let root = parent.join(format!("{PREFIX}{suffix}"));
        std::fs::rename(making.path(), &root)?;
        // Renamed away: nothing left for the guard to remove.
        let _ = making.keep();
        Ok(Scratch { root, _lock: lock })
    }

    /// The server's folder.
    #[cfg(test)]
    fn root(&self) -> &Path {
        &self.root
    }

    /// A new build's folders: `src` and `out`, each 0700.
    pub(crate) fn build(&self) -> std::io::Result<BuildFolders> {
        let dir = tempfile::Builder::new()
            .prefix("build-")
            .permissions(private())
            .tempdir_in(&self.root)?;
        for name in ["src", "out"] {
            let mut folder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
            folder.create(dir.path().join(name))?;
        }
        Ok(BuildFolders { dir })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl BuildFolders {
    /// Where the server writes the sources (and, uncontained, where the
    /// build runs and writes).
    pub(crate) fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }

    /// Where the toolchain writes the component.
    pub(crate) fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }
}

/// Read, write and search for the server's user alone.
pub(crate) fn private() -> std::fs::Permissions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::Permissions::from_mode(0o700)
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(std::env::temp_dir())
            .map(|m| m.permissions())
            .expect("the temporary folder exists")
    }
}

/// Removes the server folders in `parent` whose lock anyone can take (their
/// server is gone); how many it removed. Links and other people's folders
/// are left alone.
fn sweep(parent: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(metadata) = path.symlink_metadata() else {
            continue;
        };
        if !metadata.is_dir() || !owned_by_us(&metadata) {
            continue;
        }
        // A folder with no lock file was being made, or is not ours to
        // judge: left alone.
        let Ok(lock) = open_lock(&path.join(LOCK), false) else {
            continue;
        };
        if try_lock(&lock) && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(unix)]
fn owned_by_us(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    metadata.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owned_by_us(_metadata: &std::fs::Metadata) -> bool {
    true
}

/// Opens a lock file, never through a link; made when `create`.
fn open_lock(path: &Path, create: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(create);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW).mode(0o600);
    }
    options.open(path)
}

/// Takes `file`'s exclusive lock if no one holds it (released when the
/// process ends, however it ends).
fn try_lock(file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on a descriptor this function borrows.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        true
    }
}

/// Reads the regular file at `path`, at most `limit` bytes: no link
/// followed, no FIFO or device waited on, a file with other names (hard
/// links) refused. Blocking: call it off the async workers.
pub(crate) fn read_output(path: &Path, limit: u64) -> Result<Vec<u8>, OutputRefused> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(OutputRefused::Missing);
        }
        // A link, with O_NOFOLLOW.
        #[cfg(unix)]
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(OutputRefused::NotAFile(Entry::Link.words()));
        }
        Err(error) => return Err(OutputRefused::Io(error)),
    };
    let metadata = file.metadata().map_err(OutputRefused::Io)?;
    if let Some(kind) = not_a_plain_file(&metadata) {
        return Err(OutputRefused::NotAFile(kind));
    }
    if metadata.len() > limit {
        return Err(OutputRefused::TooLarge {
            size: metadata.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(OutputRefused::Io)?;
    if bytes.len() as u64 > limit {
        return Err(OutputRefused::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// What a directory entry is, not following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    File,
    Folder,
    Link,
    Fifo,
    Device,
    Socket,
    Special,
}

impl Entry {
    fn of(metadata: &std::fs::Metadata) -> Entry {
        let kind = metadata.file_type();
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if kind.is_fifo() {
                return Entry::Fifo;
            }
            if kind.is_char_device() || kind.is_block_device() {
                return Entry::Device;
            }
            if kind.is_socket() {
                return Entry::Socket;
            }
        }
        if kind.is_symlink() {
            Entry::Link
        } else if kind.is_dir() {
            Entry::Folder
        } else if kind.is_file() {
            Entry::File
        } else {
            Entry::Special
        }
    }

    /// The words a refusal says it with.
    fn words(self) -> &'static str {
        match self {
            Entry::File => "a file",
            Entry::Folder => "a folder",
            Entry::Link => "a symbolic link",
            Entry::Fifo => "a FIFO",
            Entry::Device => "a device",
            Entry::Socket => "a socket",
            Entry::Special => "a special file",
        }
    }
}

/// What `metadata` is when it is not a regular file with one name.
fn not_a_plain_file(metadata: &std::fs::Metadata) -> Option<&'static str> {
    let entry = Entry::of(metadata);
    if entry != Entry::File {
        return Some(entry.words());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if metadata.nlink() != 1 {
            return Some("a file with other names (a hard link)");
        }
    }
    None
}

/// The first link or special file under `dir` (links not followed), with
/// what it is: a build that leaves one is refused, whatever it made.
/// Blocking: call it off the async workers.
pub(crate) fn left_behind(dir: &Path) -> Option<(PathBuf, &'static str)> {
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(metadata) = path.symlink_metadata() else {
                continue;
            };
            match Entry::of(&metadata) {
                Entry::Folder => folders.push(path),
                Entry::File => {}
                other => {
                    let shown = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                    return Some((shown, other.words()));
                }
            }
        }
    }
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn the_output_is_a_regular_file_read_to_its_limit_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("plugin.wasm"), b"\0asm").unwrap();
        assert_eq!(read_output(&path("plugin.wasm"), 4).unwrap(), b"\0asm");
        assert!(matches!(
            read_output(&path("plugin.wasm"), 3),
            Err(OutputRefused::TooLarge { size: 4, limit: 3 })
        ));
        assert!(matches!(
            read_output(&path("none.wasm"), 4),
            Err(OutputRefused::Missing)
        ));

        // Another person's plugin, through a link or a second name.
        std::fs::write(path("ada.wasm"), b"ada's").unwrap();
        symlink("ada.wasm", path("linked.wasm")).unwrap();
        assert!(matches!(
            read_output(&path("linked.wasm"), 1 << 20),
            Err(OutputRefused::NotAFile("a symbolic link"))
        ));
        std::fs::hard_link(path("ada.wasm"), path("named.wasm")).unwrap();
        assert!(matches!(
            read_output(&path("named.wasm"), 1 << 20),
            Err(OutputRefused::NotAFile(kind)) if kind.contains("hard link")
        ));

        // A link to the server's stdin, its stderr, /dev/zero or /dev/null:
        // refused before a byte is read.
        for device in ["/dev/stdin", "/dev/stderr", "/dev/zero", "/dev/null"] {
            let link = path(&format!("to{}", device.replace('/', "_")));
            symlink(device, &link).unwrap();
            assert!(
                matches!(read_output(&link, 1 << 20), Err(OutputRefused::NotAFile(_))),
                "{device}"
            );
        }
        // The devices themselves: refused, nothing read, no wait.
        for device in ["/dev/zero", "/dev/null"] {
            assert!(
                matches!(
                    read_output(Path::new(device), 1 << 20),
                    Err(OutputRefused::NotAFile("a device"))
                ),
                "{device}"
            );
        }
    }

    #[test]
    fn a_fifo_with_no_writer_or_a_writer_without_end_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("plugin.wasm");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(matches!(
            read_output(&fifo, 1 << 20),
            Err(OutputRefused::NotAFile("a FIFO"))
        ));
        // A writer feeding it without end: still refused, nothing read.
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            move || {
                let mut options = std::fs::OpenOptions::new();
                std::os::unix::fs::OpenOptionsExt::custom_flags(
                    options.write(true),
                    libc::O_NONBLOCK,
                );
                // No reader: the open fails (ENXIO), as it should.
                options.open(&fifo).is_err()
            }
        });
        assert!(writer.join().unwrap());
        assert!(matches!(
            read_output(&fifo, 1 << 20),
            Err(OutputRefused::NotAFile("a FIFO"))
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_link_or_special_file_left_in_a_build_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/app.py"), "").unwrap();
        assert_eq!(left_behind(dir.path()), None);
        symlink("../../../../dev/stdin", dir.path().join("a/b/plugin.wasm")).unwrap();
        assert_eq!(
            left_behind(dir.path()),
            Some((PathBuf::from("a/b/plugin.wasm"), "a symbolic link"))
        );
    }

    #[test]
    fn folders_are_private_and_a_killed_servers_are_removed_at_the_next_start() {
        let parent = tempfile::tempdir().unwrap();
        let first = Scratch::open_in(parent.path()).unwrap();
        let build = first.build().unwrap();
        for dir in [first.root().to_path_buf(), build.src(), build.out()] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
        // A killed server's folder: its lock file held by no one.
        let left = parent.path().join(format!("{PREFIX}killed"));
        std::fs::create_dir_all(left.join("build-1/src")).unwrap();
        std::fs::write(left.join("build-1/src/app.py"), "secret").unwrap();
        std::fs::write(left.join(LOCK), "").unwrap();
        // A second server beside a live one leaves the live one's alone.
        let second = Scratch::open_in(parent.path()).unwrap();
        assert!(first.root().exists());
        assert!(!left.exists(), "the killed server's folder stayed");
        assert!(second.root().exists());
        drop(build);
        drop(first);
    }
}
