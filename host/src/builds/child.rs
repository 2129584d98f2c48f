//! One build as a child process under limits: the toolchain's program run
//! in a scratch folder with nothing of the server's environment but `PATH`,
//! at a low CPU priority (nice 10), in a process group of its own (so that a
//! limit stops the whole of it), with
//!
//! - a wall-clock limit, past which the group is killed;
//! - a memory limit on the group's resident memory, polled, past which the
//!   group is killed (an address-space limit would break the toolchains:
//!   wasmtime reserves far more address space than it uses);
//! - its output (stdout and stderr, as they come) kept to its last
//!   `log_bytes`;
//! - no network where the platform allows it: a network namespace of its
//!   own (Linux), with only a loopback that is down. The author's code runs
//!   inside wasm at build time (CPython, QuickJS), with no sockets either
//!   way; this bounds the toolchain itself.
//!
//! It knows nothing of languages or HTTP: a program, its arguments, a
//! folder and [`Limits`] in; how it ended ([`Ran`]) out.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// What one build may take.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) wall: Duration,
    pub(crate) memory_bytes: u64,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited; `true` when with status 0.
    Exited(bool),
    /// It ran past the wall-clock limit and was killed.
    TimedOut,
    /// Its process group held more than the memory limit and was killed.
    OutOfMemory,
}

/// How builds are kept off the network here, found once (see [`isolation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    /// A network namespace of its own (the process may make one).
    Namespace,
    /// A user namespace and a network namespace (an unprivileged process
    /// where the kernel allows it).
    UserNamespace,
    /// Neither is allowed here: builds share the server's network (the
    /// author's code still runs inside wasm, without sockets).
    Shared,
}

impl Network {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Network::Namespace | Network::UserNamespace => "none",
            Network::Shared => "shared",
        }
    }
}

/// How often the memory of a build is looked at.
const MEMORY_POLL: Duration = Duration::from_millis(50);

/// The largest file a build may write (its component included).
const MAX_FILE_BYTES: u64 = 512 << 20;

/// A low CPU priority: the server's calls go first (a nice-0 thread
/// weighs about nine times a nice-10 one), while a build on a busy machine
/// still moves.
const NICENESS: i32 = 10;

/// How builds are kept off the network on this machine: tried once, with
/// `true` run the way a build is. Network namespaces are Linux's; elsewhere
/// builds share the server's network (said once in the log).
pub(crate) fn isolation() -> Network {
    static FOUND: OnceLock<Network> = OnceLock::new();
    *FOUND.get_or_init(|| {
        #[cfg(target_os = "linux")]
        for network in [Network::Namespace, Network::UserNamespace] {
            let mut command = std::process::Command::new("true");
            command
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: the closure only makes async-signal-safe system calls.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(move || enter(network));
            }
            if command.status().is_ok_and(|status| status.success()) {
                return network;
            }
        }
        tracing::warn!(
            "builds share the server's network here: this process may not make a network \
             namespace (the authors' code still runs inside wasm, without sockets)"
        );
        Network::Shared
    })
}

/// In the child, before it runs the program: its own process group, the
/// lowest priority, no core files, a bound on file sizes, and the network
/// namespace (Linux).
#[cfg(unix)]
fn enter(network: Network) -> std::io::Result<()> {
    // SAFETY: plain system calls on this process, no memory shared.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::setpriority(libc::PRIO_PROCESS, 0, NICENESS);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        let files = libc::rlimit {
            rlim_cur: MAX_FILE_BYTES,
            rlim_max: MAX_FILE_BYTES,
        };
        libc::setrlimit(libc::RLIMIT_FSIZE, &files);
        #[cfg(target_os = "linux")]
        {
            let flags = match network {
                Network::Namespace => libc::CLONE_NEWNET,
                Network::UserNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWNET,
                Network::Shared => return Ok(()),
            };
            if libc::unshare(flags) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = network;
    }
    Ok(())
}

/// Sets `command` up to enter its bounds when it starts (Unix).
fn contain(command: &mut tokio::process::Command, network: Network) {
    #[cfg(unix)]
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        command.pre_exec(move || enter(network));
    }
    #[cfg(not(unix))]
    let _ = (command, network);
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

/// Runs `program args` in `dir` under `limits` until it ends or a limit
/// stops it. An error is a program that could not be started.
pub(crate) async fn run(
    program: &Path,
    args: &[String],
    dir: &Path,
    limits: &Limits,
) -> std::io::Result<Ran> {
    let network = isolation();
    let temp = dir.join(".tmp");
    std::fs::create_dir_all(&temp)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("TMPDIR", &temp)
        .env("LANG", "C.UTF-8")
        // Both toolchains are Rust programs: their own backtraces would
        // bury the author's error.
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    contain(&mut command, network);
    let started = Instant::now();
    let mut child = command.spawn()?;
    let group = child.id().unwrap_or_default() as i32;
    let log = Arc::new(Mutex::new(Tail::new(limits.log_bytes)));
    let readers = [
        child.stdout.take().map(|out| read_into(out, log.clone())),
        child.stderr.take().map(|err| read_into(err, log.clone())),
    ];
    let mut peak = 0u64;
    let ended = {
        let deadline = tokio::time::sleep(limits.wall);
        tokio::pin!(deadline);
        let mut poll = tokio::time::interval(MEMORY_POLL);
        loop {
            tokio::select! {
                status = child.wait() => break Ended::Exited(status.is_ok_and(|s| s.success())),
                () = &mut deadline => break Ended::TimedOut,
                _ = poll.tick() => {
                    // Off the async workers: it reads every /proc/*/stat.
                    let held = tokio::task::spawn_blocking(move || group_resident_bytes(group))
                        .await
                        .unwrap_or(0);
                    peak = peak.max(held);
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
    })
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
/// `/proc` (Linux). Where it cannot be read, 0, and the log says once that
/// the memory limit is not enforced there.
#[cfg(not(target_os = "linux"))]
fn group_resident_bytes(_group: i32) -> u64 {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!("--build-memory-mib is not enforced on this platform (no /proc)")
    });
    0
}

#[cfg(target_os = "linux")]
fn group_resident_bytes(group: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!("--build-memory-mib is not enforced: /proc is unreadable")
        });
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|stat| {
            // Fields after the command (which may hold spaces and parens).
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            // state ppid pgrp ...; rss is the 24th field, the 22nd here.
            let pgrp: i32 = fields.get(2)?.parse().ok()?;
            let rss: u64 = fields.get(21)?.parse().ok()?;
            (pgrp == group).then_some(rss * page)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            wall: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            log_bytes: 1024,
        }
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[tokio::test]
    async fn a_build_sees_none_of_the_servers_environment_and_no_network() {
        // SAFETY: set before any thread of this test reads it.
        unsafe { std::env::set_var("TOOLHOST_BUILD_TEST_SECRET", "hunter2") };
        let dir = tempfile::tempdir().unwrap();
        let ran = run(
            Path::new("/bin/sh"),
            &sh("env; echo; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo nice=$(cut -d' ' -f19 /proc/self/stat)"),
            dir.path(),
            &limits(),
        )
        .await
        .unwrap();
        assert_eq!(ran.ended, Ended::Exited(true), "{}", ran.log);
        assert!(!ran.log.contains("hunter2"), "{}", ran.log);
        assert!(ran.log.contains(&format!("HOME={}", dir.path().display())));
        assert!(ran.log.contains("nice=10"), "{}", ran.log);
        if isolation() != Network::Shared {
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

    #[tokio::test]
    async fn limits_stop_the_whole_group_and_output_keeps_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let quick = Limits {
            wall: Duration::from_millis(500),
            ..limits()
        };
        // A child of the build keeps running past the limit: it goes too.
        let ran = run(
            Path::new("/bin/sh"),
            &sh("sleep 30 & sleep 30"),
            dir.path(),
            &quick,
        )
        .await
        .unwrap();
        assert_eq!(ran.ended, Ended::TimedOut);
        assert!(ran.took < Duration::from_secs(5));

        let small = Limits {
            memory_bytes: 64 << 20,
            ..limits()
        };
        // Holds 256 MiB in one shell variable.
        let ran = run(
            Path::new("/bin/sh"),
            &sh("x=$(head -c 268435456 /dev/zero | tr '\\0' a); sleep 5"),
            dir.path(),
            &small,
        )
        .await
        .unwrap();
        assert_eq!(ran.ended, Ended::OutOfMemory, "{}", ran.log);

        let ran = run(
            Path::new("/bin/sh"),
            &sh("seq 1 100000; echo the-end"),
            dir.path(),
            &limits(),
        )
        .await
        .unwrap();
        assert_eq!(ran.ended, Ended::Exited(true));
        assert!(ran.log.len() <= 1024);
        assert!(ran.log.ends_with("the-end\n"), "{}", ran.log);
        assert!(ran.dropped > 500_000);
    }
}
