//! One build as a child process under limits: the command
//! [`contain`](super::contain) prepared (what it sees and its environment
//! are decided there) run at a low CPU priority (nice 10), in a session
//! and process group of its own (so that a limit stops the whole of it),
//! with
//!
//! - a wall-clock limit, past which the group is killed;
//! - a memory limit on the group's resident memory, polled, past which the
//!   group is killed (an address-space limit would break the toolchains:
//!   wasmtime reserves far more address space than it uses); where the
//!   scratch folder is in memory (tmpfs), what is written there counts too;
//! - a disk limit on everything it writes, each file counted as at least
//!   [`FILE_COST`]: in a size-bound tmpfs ([`BuildsIn::Tmpfs`]) the kernel
//!   refuses writes past it, and its own figures (files unlinked while
//!   still open included) are polled; elsewhere a walk of the scratch
//!   folder is ([`BuildsIn::Folder`]), and the component's folder always
//!   is ([`Disk`]); past it, the group is killed, and no file
//!   is larger than it. What a tmpfs holds is memory, and counts toward
//!   the memory limit too;
//! - its output (stdout and stderr, as they come) kept to its last
//!   `log_bytes`.
//!
//! It knows nothing of languages or HTTP: a command, its scratch folder and
//! [`Limits`] in; how it ended ([`Ran`]) out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use super::contain::Network;

/// What one build may take.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) wall: Duration,
    pub(crate) memory_bytes: u64,
    /// How much it may write in its scratch folder, in all.
    pub(crate) disk_bytes: u64,
    /// How much of the output is kept (its end).
    pub(crate) log_bytes: usize,
}

/// How a build process ended, and what it printed.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) ended: Ended,
    /// The end of what it printed (stdout and stderr as they came).
    pub(crate) log: String,
    /// How many bytes of output were dropped from the front of `log`.
    pub(crate) dropped: usize,
    pub(crate) took: Duration,
    /// The most resident memory its process group held at one poll.
    pub(crate) peak_memory_bytes: u64,
    /// The most its scratch folder held at one poll.
    pub(crate) peak_disk_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited; `true` when with status 0.
    Exited(bool),
    /// It ran past the wall-clock limit and was killed.
    TimedOut,
    /// Its process group held more than the memory limit and was killed.
    OutOfMemory,
    /// It wrote more than the disk limit in its scratch folder and was
    /// killed.
    OutOfDisk,
}

/// How a build's writes are counted: the place it builds in, and the
/// folder its component is written to (walked either way).
#[derive(Debug, Clone)]
pub(crate) struct Disk {
    pub(crate) builds_in: BuildsIn,
    pub(crate) out: PathBuf,
}

/// Where a build writes besides its component's folder.
#[derive(Debug, Clone)]
pub(crate) enum BuildsIn {
    /// The files under this folder, walked (links not followed).
    Folder(PathBuf),
    /// The size-bound tmpfs a contained build writes in, at
    /// [`contain::INSIDE`](super::contain::INSIDE) as its processes see
    /// it: the kernel's own count of its blocks and files.
    Tmpfs,
}

/// What one file costs of the disk limit at least, however small: so that
/// empty files are not free.
pub(crate) const FILE_COST: u64 = 4096;

/// How often the memory of a build is looked at.
const MEMORY_POLL: Duration = Duration::from_millis(50);

/// How often what a build wrote is counted (every this many memory polls):
/// a walk of its scratch folder, a few thousand files for a Python build.
const DISK_EVERY: u32 = 4;

/// A low CPU priority: the server's calls go first (a nice-0 thread
/// weighs about nine times a nice-10 one), while a build on a busy machine
/// still moves.
const NICENESS: i32 = 10;
/// The lowest, for a build that gave its slot away past its first slice:
/// a build in its first slice weighs about seven times it.
const GAVE_WAY_NICENESS: i32 = 19;

/// In the child, before it runs the program: a session and process group
/// of its own (no controlling terminal), the lowest priority, no core
/// files, no file larger than `max_file`, and the network namespace an
/// uncontained build gets (Linux).
#[cfg(unix)]
fn enter(network: Network, max_file: u64) -> std::io::Result<()> {
    // SAFETY: plain system calls on this process, no memory shared.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::setpriority(libc::PRIO_PROCESS, 0, NICENESS);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        let files = libc::rlimit {
            rlim_cur: max_file,
            rlim_max: max_file,
        };
        libc::setrlimit(libc::RLIMIT_FSIZE, &files);
    }
    super::contain::enter_network(network)
}

/// Sets `command` up to enter its bounds when it starts (Unix).
fn bound(command: &mut tokio::process::Command, network: Network, max_file: u64) {
    #[cfg(unix)]
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        command.pre_exec(move || enter(network, max_file));
    }
    #[cfg(not(unix))]
    let _ = (command, network, max_file);
}

/// Every process of group `group` at [`GAVE_WAY_NICENESS`] (Unix).
fn lower_group(group: i32) {
    #[cfg(unix)]
    if group > 0 {
        // SAFETY: a plain system call on the process group `run` made.
        unsafe {
            libc::setpriority(libc::PRIO_PGRP, group as libc::id_t, GAVE_WAY_NICENESS);
        }
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// Kills what is left of process group `group` (Unix; elsewhere the child
/// alone is killed, by `kill_on_drop`).
fn kill_group(group: i32) {
    #[cfg(unix)]
    if group > 0 {
        // SAFETY: signals the process group `run` made.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// Runs `command` (a build prepared by `contain.rs`, its writes counted as
/// `disk` says) under `limits` until it ends or a limit stops it. An error
/// is a program that could not be started.
///
/// Once `gave_way` is set (its slot given to the next in line), the whole
/// group runs at the lowest CPU priority.
pub(crate) async fn run(
    mut command: tokio::process::Command,
    disk: Disk,
    network: Network,
    limits: &Limits,
    gave_way: &std::sync::atomic::AtomicBool,
) -> std::io::Result<Ran> {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // One byte over: a file that reaches the limit is stopped by the poll,
    // with its name for what happened, rather than by SIGXFSZ.
    bound(
        &mut command,
        network,
        limits.disk_bytes.saturating_add(1 << 20),
    );
    let in_memory = match &disk.builds_in {
        BuildsIn::Folder(scratch) => is_in_memory(scratch),
        BuildsIn::Tmpfs => true,
    };
    let started = Instant::now();
    let mut child = command.spawn()?;
    let group = child.id().unwrap_or_default() as i32;
    let log = Arc::new(Mutex::new(Tail::new(limits.log_bytes)));
    let readers = [
        child.stdout.take().map(|out| read_into(out, log.clone())),
        child.stderr.take().map(|err| read_into(err, log.clone())),
    ];
    let (mut peak, mut peak_disk, mut written, mut polls) = (0u64, 0u64, 0u64, 0u32);
    let mut lowered = false;
    let ended = {
        let deadline = tokio::time::sleep(limits.wall);
        tokio::pin!(deadline);
        let mut poll = tokio::time::interval(MEMORY_POLL);
        loop {
            tokio::select! {
                status = child.wait() => break Ended::Exited(status.is_ok_and(|s| s.success())),
                () = &mut deadline => break Ended::TimedOut,
                _ = poll.tick() => {
                    polls += 1;
                    if !lowered && gave_way.load(std::sync::atomic::Ordering::Relaxed) {
                        lowered = true;
                        lower_group(group);
                    }
                    let count_disk = polls % DISK_EVERY == 0;
                    let measure = disk.clone();
                    // Off the async workers: it reads every /proc/*/stat,
                    // and walks the scratch folder.
                    let (held, disk) = tokio::task::spawn_blocking(move || {
                        let (held, tmpfs) = group_resident_bytes(group);
                        let disk = match measure.builds_in {
                            BuildsIn::Tmpfs => {
                                Some(tmpfs.unwrap_or(0) + bytes_under(&measure.out))
                            }
                            BuildsIn::Folder(folder) => count_disk
                                .then(|| bytes_under(&folder) + bytes_under(&measure.out)),
                        };
                        (held, disk)
                    })
                    .await
                    .unwrap_or((0, None));
                    if let Some(disk) = disk {
                        written = disk;
                        peak_disk = peak_disk.max(disk);
                    }
                    let held = held + if in_memory { written } else { 0 };
                    peak = peak.max(held);
                    if written > limits.disk_bytes {
                        break Ended::OutOfDisk;
                    }
                    if held > limits.memory_bytes {
                        break Ended::OutOfMemory;
                    }
                }
            }
        }
    };
    // Whatever is left of the group goes, whichever way it ended (a
    // toolchain's own children included).
    kill_group(group);
    let _ = child.wait().await;
    for reader in readers.into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    // A build that failed at the disk limit (a file stopped short of it
    // between two polls, or a write the tmpfs refused) is told as such.
    let ended = match (ended, &disk.builds_in) {
        (Ended::Exited(false), BuildsIn::Folder(folder)) => {
            let (folder, out) = (folder.clone(), disk.out.clone());
            let disk =
                tokio::task::spawn_blocking(move || bytes_under(&folder) + bytes_under(&out))
                    .await
                    .unwrap_or(0);
            peak_disk = peak_disk.max(disk);
            if disk >= limits.disk_bytes {
                Ended::OutOfDisk
            } else {
                ended
            }
        }
        (Ended::Exited(false), BuildsIn::Tmpfs)
            if peak_disk + (limits.disk_bytes / 16).max(FILE_COST) >= limits.disk_bytes
                || log
                    .lock()
                    .is_ok_and(|log| log.says(b"No space left on device")) =>
        {
            Ended::OutOfDisk
        }
        (other, _) => other,
    };
    let tail = std::mem::replace(
        &mut *log.lock().unwrap_or_else(|e| e.into_inner()),
        Tail::new(0),
    );
    Ok(Ran {
        ended,
        log: String::from_utf8_lossy(&tail.bytes).into_owned(),
        dropped: tail.dropped,
        took: started.elapsed(),
        peak_memory_bytes: peak,
        peak_disk_bytes: peak_disk,
    })
}

/// The bytes the files and folders under `dir` take (blocks allocated, so
/// a sparse file counts what it holds, and at least [`FILE_COST`] each),
/// links not followed.
pub(crate) fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut folders: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.path().symlink_metadata() else {
                continue;
            };
            total += allocated(&metadata);
            if metadata.is_dir() {
                folders.push(entry.path());
            }
        }
    }
    total
}

#[cfg(unix)]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    (metadata.blocks() * 512).max(FILE_COST)
}

#[cfg(not(unix))]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    metadata.len().max(FILE_COST)
}

/// What the tmpfs at [`contain::INSIDE`](super::contain::INSIDE) holds as
/// process `pid` sees it, by the kernel's count (its blocks, and
/// [`FILE_COST`] a file): `None` where `pid` sees no tmpfs there (bubblewrap
/// itself, or a process not yet in the sandbox).
#[cfg(target_os = "linux")]
fn tmpfs_bytes(pid: &str) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // Only a process in a mount namespace of its own (inside the sandbox):
    // one not yet there sees the host's root.
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    if std::fs::read_link("/proc/self/ns/mnt").ok()? == theirs {
        return None;
    }
    let path = format!("/proc/{pid}/root{}", super::contain::INSIDE);
    let path = std::ffi::CString::new(std::ffi::OsStr::new(&path).as_bytes()).ok()?;
    // SAFETY: a plain C struct, for statfs to fill.
    let mut stats: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct of the right type.
    if unsafe { libc::statfs(path.as_ptr(), &mut stats) } != 0 || stats.f_type as i64 != TMPFS_MAGIC
    {
        return None;
    }
    let blocks = (stats.f_blocks.saturating_sub(stats.f_bfree)) as u64 * stats.f_bsize as u64;
    let files = (stats.f_files.saturating_sub(stats.f_ffree)) as u64;
    Some(blocks + files * FILE_COST)
}

/// Whether `dir` is on a file system held in memory (tmpfs, Linux).
fn is_in_memory(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: a plain C struct, for statfs to fill.
        let mut stats: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a struct of the right type.
        if unsafe { libc::statfs(path.as_ptr(), &mut stats) } == 0 {
            return stats.f_type as i64 == TMPFS_MAGIC;
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

/// The end of a stream of output, at most `keep` bytes of it.
struct Tail {
    bytes: Vec<u8>,
    keep: usize,
    dropped: usize,
}

impl Tail {
    fn new(keep: usize) -> Tail {
        Tail {
            bytes: Vec::new(),
            keep,
            dropped: 0,
        }
    }

    /// Whether what is kept holds `words`.
    fn says(&self, words: &[u8]) -> bool {
        self.bytes.windows(words.len()).any(|w| w == words)
    }

    fn push(&mut self, piece: &[u8]) {
        self.bytes.extend_from_slice(piece);
        if self.bytes.len() > self.keep {
            let over = self.bytes.len() - self.keep;
            self.bytes.drain(..over);
            self.dropped += over;
        }
    }
}

fn read_into(
    mut stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    log: Arc<Mutex<Tail>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 8192];
        while let Ok(read) = stream.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            log.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(&buffer[..read]);
        }
    })
}

/// The resident memory of every process in process group `group`, from
/// `/proc` (Linux), and what the build's tmpfs holds as the first of them
/// that sees one there sees it. Where it cannot be read, 0, and the log
/// says once that the memory limit is not enforced there.
#[cfg(not(target_os = "linux"))]
fn group_resident_bytes(_group: i32) -> (u64, Option<u64>) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!("--build-memory-mib is not enforced on this platform (no /proc)")
    });
    (0, None)
}

#[cfg(target_os = "linux")]
fn group_resident_bytes(group: i32) -> (u64, Option<u64>) {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!("--build-memory-mib is not enforced: /proc is unreadable")
        });
        return (0, None);
    };
    let (mut held, mut tmpfs) = (0, None);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command (which may hold spaces and parens).
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        // state ppid pgrp ...; rss is the 24th field, the 22nd here.
        let (Some(Ok(pgrp)), Some(Ok(rss))) = (
            fields.get(2).map(|f| f.parse::<i32>()),
            fields.get(21).map(|f| f.parse::<u64>()),
        ) else {
            continue;
        };
        if pgrp == group {
            held += rss * page;
            // Not bubblewrap's first process: it sees the host's root.
            if tmpfs.is_none() && pgrp.to_string() != pid {
                tmpfs = tmpfs_bytes(pid);
            }
        }
    }
    (held, tmpfs)
}

#[cfg(test)]
mod tests {
    use super::super::contain::{self, Containment};
    use super::*;

    fn limits() -> Limits {
        Limits {
            wall: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            disk_bytes: 64 << 20,
            log_bytes: 1024,
        }
    }

    /// `script` run by `sh` as a build of sources in `dir`, contained as
    /// this machine allows (bubblewrap where it runs, else as an operator
    /// who opted out of it would).
    async fn sh(script: &str, dir: &Path, limits: &Limits) -> Ran {
        let containment = Containment::find(true);
        contain::prepare(dir).unwrap();
        let out = tempfile::tempdir().unwrap();
        let folders = contain::Folders {
            src: dir,
            out: out.path(),
        };
        let command = containment
            .command(
                Path::new("/bin/sh"),
                &["-c".into(), script.into()],
                folders,
                limits.disk_bytes,
            )
            .unwrap();
        let disk = Disk {
            builds_in: if containment.tmpfs() {
                BuildsIn::Tmpfs
            } else {
                BuildsIn::Folder(dir.to_path_buf())
            },
            out: out.path().to_path_buf(),
        };
        run(
            command,
            disk,
            containment.network(),
            limits,
            &std::sync::atomic::AtomicBool::new(false),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_build_sees_none_of_the_servers_environment_and_no_network() {
        // SAFETY: set before any thread of this test reads it.
        unsafe { std::env::set_var("TOOLHOST_BUILD_TEST_SECRET", "hunter2") };
        let dir = tempfile::tempdir().unwrap();
        let ran = sh(
            "env; echo; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo nice=$(cut -d' ' -f19 /proc/self/stat)",
            dir.path(),
            &limits(),
        )
        .await;
        assert_eq!(ran.ended, Ended::Exited(true), "{}", ran.log);
        assert!(!ran.log.contains("hunter2"), "{}", ran.log);
        assert!(ran.log.contains("PYTHONNOUSERSITE=1"), "{}", ran.log);
        assert!(ran.log.contains("VIRTUAL_ENV="), "{}", ran.log);
        assert!(ran.log.contains("nice=10"), "{}", ran.log);
        let containment = Containment::find(true);
        if matches!(containment, Containment::Sandbox { .. })
            || containment.network() != contain::Network::Shared
        {
            let interfaces: Vec<&str> = ran
                .log
                .lines()
                .skip_while(|line| !line.is_empty())
                .skip(1)
                .take_while(|line| !line.starts_with("nice="))
                .collect();
            assert_eq!(interfaces, ["lo"], "{}", ran.log);
        }
    }

    /// Where bubblewrap runs (Linux, with it installed: CI's machines), a
    /// build writes nowhere but its scratch folder, and sees no more of
    /// the host than the system's programs and its toolchain.
    #[tokio::test]
    async fn a_contained_build_writes_only_its_scratch_folder() {
        let Containment::Sandbox { tmpfs, .. } = Containment::find(false) else {
            assert!(
                !cfg!(target_os = "linux") || std::env::var_os("CI").is_none(),
                "bubblewrap must run on CI's Linux machines"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let script = format!(
            "id -u; for d in / /usr /etc /dev/shm /proc /sources {home} {outside} /tmp \"$HOME\"; do \
             touch \"$d/written\" 2>/dev/null && echo \"wrote $d\"; done; \
             ls {home} >/dev/null 2>&1 && echo \"sees {home}\"; echo done",
            outside = env!("CARGO_MANIFEST_DIR"),
        );
        let ran = sh(&script, dir.path(), &limits()).await;
        assert_eq!(ran.ended, Ended::Exited(true), "{}", ran.log);
        assert!(ran.log.starts_with("65534\n"), "{}", ran.log);
        let wrote: Vec<&str> = ran.log.lines().filter(|l| l.starts_with("wrote")).collect();
        // /tmp and $HOME are the scratch folder, as the build sees it.
        assert_eq!(wrote, ["wrote /tmp", "wrote /build"], "{}", ran.log);
        assert!(!ran.log.contains("sees"), "{}", ran.log);
        // In a tmpfs of its own, what it wrote is gone with it; else it is
        // in the sources' folder.
        assert_eq!(dir.path().join(".tmp/written").exists(), !tmpfs);
        assert!(!dir.path().parent().unwrap().join("written").exists());
        assert!(
            !Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("written")
                .exists()
        );
    }

    #[tokio::test]
    async fn limits_stop_the_whole_group_and_output_keeps_its_end() {
        let quick = Limits {
            wall: Duration::from_millis(1500),
            ..limits()
        };
        // A child of the build keeps running past the limit: it goes too.
        let ran = sh(
            "sleep 30 & sleep 30",
            tempfile::tempdir().unwrap().path(),
            &quick,
        )
        .await;
        assert_eq!(ran.ended, Ended::TimedOut);
        assert!(ran.took < Duration::from_secs(6));

        let small = Limits {
            memory_bytes: 64 << 20,
            ..limits()
        };
        // Holds 256 MiB in one shell variable.
        let ran = sh(
            "x=$(head -c 268435456 /dev/zero | tr '\\0' a); sleep 5",
            tempfile::tempdir().unwrap().path(),
            &small,
        )
        .await;
        assert_eq!(ran.ended, Ended::OutOfMemory, "{}", ran.log);

        // Writes past the disk limit, in many files or in one: stopped. A
        // sparse file holds nothing and counts nothing.
        let ran = sh(
            "truncate -s 1G sparse; i=0; while true; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done",
            tempfile::tempdir().unwrap().path(),
            &limits(),
        )
        .await;
        assert_eq!(ran.ended, Ended::OutOfDisk, "{}", ran.log);
        assert!(ran.peak_disk_bytes > 64 << 20, "{}", ran.peak_disk_bytes);
        let ran = sh(
            "head -c 200000000 /dev/zero > one; sleep 5",
            tempfile::tempdir().unwrap().path(),
            &limits(),
        )
        .await;
        assert_eq!(ran.ended, Ended::OutOfDisk, "{}", ran.log);

        // A file unlinked while still open counts (a tmpfs's own figures),
        // and so do empty files.
        let containment = Containment::find(true);
        if containment.tmpfs() {
            let ran = sh(
                "exec 3>held; rm held; head -c 200000000 /dev/zero >&3; sleep 5",
                tempfile::tempdir().unwrap().path(),
                &limits(),
            )
            .await;
            assert_eq!(ran.ended, Ended::OutOfDisk, "{}", ran.log);
            // The component's folder, outside the tmpfs, counts too.
            let ran = sh(
                "head -c 200000000 /dev/zero > /out/plugin.wasm; sleep 5",
                tempfile::tempdir().unwrap().path(),
                &limits(),
            )
            .await;
            assert_eq!(ran.ended, Ended::OutOfDisk, "{}", ran.log);
        }
        let ran = sh(
            "i=0; while true; do : > e$i; i=$((i+1)); done",
            tempfile::tempdir().unwrap().path(),
            &limits(),
        )
        .await;
        assert_eq!(ran.ended, Ended::OutOfDisk, "{}", ran.log);

        let ran = sh(
            "seq 1 100000; echo the-end",
            tempfile::tempdir().unwrap().path(),
            &limits(),
        )
        .await;
        assert_eq!(ran.ended, Ended::Exited(true));
        assert!(ran.log.len() <= 1024);
        assert!(ran.log.ends_with("the-end\n"), "{}", ran.log);
        assert!(ran.dropped > 500_000);
    }
}
