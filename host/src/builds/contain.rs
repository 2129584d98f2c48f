//! What contains a server build, decided once at start-up: what a build's
//! processes can see, write and reach of the host.
//!
//! The toolchains run the author's code inside wasm (CPython, QuickJS),
//! but the toolchain itself is a native program, and what it hands that
//! code is its business: componentize-py asks a `python3` for its
//! site-packages and preopens each one **read-write** into the wasm
//! CPython, so code at import could plant a `.pth` there that the next
//! native `python3` runs. So the server decides everything a build gets,
//! and nothing is inherited:
//!
//! - **bubblewrap** ([`Containment::Sandbox`], Linux): the build runs in
//!   namespaces of its own (mount, PID, IPC, UTS, cgroup, network: only a
//!   loopback that is down) as uid 65534 with no capabilities. Its root is
//!   empty and read-only; it sees `/usr` (and the `/bin`, `/lib*` beside
//!   it), the dynamic loader's cache, and the toolchain's own folders
//!   ([`roots`]), all read-only. It writes in one place, `/build`: a tmpfs
//!   of its own of twice `--build-disk-mib` (the kernel's hard bound, files
//!   unlinked while open included; the poll stops it at the limit), into which it first copies its
//!   sources from `/sources` (read-only; `/tmp` leads into `/build` too);
//!   and the toolchain writes the component into `/out`, a folder of the
//!   host's that the author's code is never handed (the toolchain preopens
//!   only the module search paths into its wasm interpreter). A bubblewrap
//!   older than 0.8 (no `--size`) gets the sources' folder itself as
//!   `/build`, bounded by the poll of `child.rs`. It dies with the server.
//! - The environment, in every case: `HOME` and `TMPDIR` in the scratch
//!   folder, a `PATH` of the toolchain's own folders and `/usr/bin:/bin`,
//!   `PYTHONNOUSERSITE`, and `VIRTUAL_ENV` naming an empty folder in the
//!   scratch folder: componentize-py then preopens that folder as the
//!   site-packages and starts no `python3` to ask.
//! - Where bubblewrap cannot run (not installed, another OS, user
//!   namespaces refused), builds are refused ([`Containment::Unavailable`],
//!   said at start-up and in each refusal) unless the operator opts in
//!   with `--builds-uncontained` ([`Containment::Uncontained`]): then the
//!   toolchain runs as the server's user with the environment above, in a
//!   network namespace where the process may make one.

use std::path::{Path, PathBuf};

/// Where a build's scratch folder is, as a contained build sees it.
pub(crate) const INSIDE: &str = "/build";
/// Where a contained build sees its sources (read-only).
const SOURCES: &str = "/sources";
/// Where a contained build's toolchain writes the component.
const OUT: &str = "/out";

/// A build's folders on the host (`scratch.rs` makes them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Folders<'a> {
    /// The sources, as the server wrote them.
    pub(crate) src: &'a Path,
    /// Where the component is written.
    pub(crate) out: &'a Path,
}

/// How builds are contained on this server.
#[derive(Debug, Clone)]
pub(crate) enum Containment {
    /// bubblewrap, at this path; `tmpfs` where it can give a build a
    /// size-bound tmpfs (0.8 and later).
    Sandbox { bwrap: PathBuf, tmpfs: bool },
    /// The operator's choice (`--builds-uncontained`): the server's user,
    /// the server's view of the files, the environment decided here, and
    /// the network as [`Network`] says.
    Uncontained(Network),
    /// Builds are refused: why, and what to do.
    Unavailable(String),
}

/// How an uncontained build is kept off the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    /// A network namespace of its own (the process may make one).
    Namespace,
    /// A user namespace and a network namespace.
    UserNamespace,
    /// Neither is allowed here: the server's network.
    Shared,
}

impl Containment {
    /// How builds can be contained here, tried once with the way a build
    /// runs; `uncontained` is the operator's `--builds-uncontained`.
    pub(crate) fn find(uncontained: bool) -> Containment {
        let sandbox = match find_bwrap() {
            Some(bwrap) => match probe(&bwrap, true) {
                Ok(()) => return Containment::Sandbox { bwrap, tmpfs: true },
                Err(first) => match probe(&bwrap, false) {
                    Ok(()) => {
                        tracing::warn!(
                            bwrap = %bwrap.display(),
                            "this bubblewrap cannot give a build a size-bound tmpfs (0.8 or later \
                             can): a build's disk is bounded by a poll instead ({first})"
                        );
                        return Containment::Sandbox {
                            bwrap,
                            tmpfs: false,
                        };
                    }
                    Err(why) => {
                        format!("bubblewrap ({}) cannot run here: {why}", bwrap.display())
                    }
                },
            },
            None => "bubblewrap (bwrap) is not installed".to_string(),
        };
        if uncontained {
            return Containment::Uncontained(network_namespace());
        }
        Containment::Unavailable(format!(
            "builds are off: they run contained by bubblewrap, and {sandbox}. Install it \
             (Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or \
             start the server with --builds-uncontained to build anyway, with the toolchain \
             running as the server's user (docs/security.md)"
        ))
    }

    /// A word for logs and answers: `bubblewrap`, `uncontained`, `off`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Containment::Sandbox { .. } => "bubblewrap",
            Containment::Uncontained(_) => "uncontained",
            Containment::Unavailable(_) => "off",
        }
    }

    /// Why builds are refused here, if they are.
    pub(crate) fn refusal(&self) -> Option<&str> {
        match self {
            Containment::Unavailable(why) => Some(why),
            _ => None,
        }
    }

    /// The network namespace an uncontained build enters in its child
    /// (bubblewrap makes its own).
    pub(crate) fn network(&self) -> Network {
        match self {
            Containment::Uncontained(network) => *network,
            _ => Network::Shared,
        }
    }

    /// Where the build's toolchain is told to write `name`, in `folders`.
    pub(crate) fn output(&self, folders: Folders<'_>, name: &str) -> String {
        match self {
            Containment::Sandbox { .. } => format!("{OUT}/{name}"),
            _ => folders.out.join(name).display().to_string(),
        }
    }

    /// Whether a build's writes are bounded by the kernel (a size-bound
    /// tmpfs), counted by the kernel's own figures (`child.rs`).
    pub(crate) fn tmpfs(&self) -> bool {
        matches!(self, Containment::Sandbox { tmpfs: true, .. })
    }

    /// The command that runs `program args` as a build of `folders`, with
    /// the environment decided here, its writes bounded to `disk_bytes`
    /// where the kernel can. `None` where builds are refused.
    pub(crate) fn command(
        &self,
        program: &Path,
        args: &[String],
        folders: Folders<'_>,
        disk_bytes: u64,
    ) -> Option<tokio::process::Command> {
        let roots = roots(program);
        let (mut command, seen_as) = match self {
            Containment::Unavailable(_) => return None,
            Containment::Sandbox { bwrap, tmpfs } => {
                let mut command = tokio::process::Command::new(bwrap);
                command
                    // Twice the limit: the kernel's hard bound. The poll
                    // (`child.rs`) stops the build at the limit itself,
                    // and names it, before a write is refused.
                    .args(sandbox_args(
                        &roots,
                        folders,
                        tmpfs.then_some(disk_bytes.saturating_mul(2)),
                    ))
                    .arg("--");
                if *tmpfs {
                    // The sources into the tmpfs, then the toolchain.
                    command.args([
                        "/bin/sh".into(),
                        "-c".into(),
                        format!("/bin/cp -R {SOURCES}/. {INSIDE}/ && exec \"$0\" \"$@\""),
                    ]);
                }
                command.arg(program);
                (command, PathBuf::from(INSIDE))
            }
            Containment::Uncontained(_) => {
                let mut command = tokio::process::Command::new(program);
                command.current_dir(folders.src);
                (command, folders.src.to_path_buf())
            }
        };
        command.args(args);
        command
            .env_clear()
            .env("PATH", search_path(program))
            .env("HOME", &seen_as)
            .env("TMPDIR", seen_as.join(".tmp"))
            .env("VIRTUAL_ENV", seen_as.join(".venv"))
            .env("PYTHONNOUSERSITE", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("LANG", "C.UTF-8")
            // Both toolchains are Rust programs: their own backtraces
            // would bury the author's error.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .env("NO_COLOR", "1");
        Some(command)
    }
}

/// Makes the folders every build's environment names in `scratch`: its
/// temporary folder and the empty site-packages `VIRTUAL_ENV` leads to.
pub(crate) fn prepare(scratch: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(scratch.join(".tmp"))?;
    std::fs::create_dir_all(scratch.join(".venv/lib/python3/site-packages"))
}

/// bubblewrap on the server's `PATH` (or `TOOLHOST_BWRAP`).
fn find_bwrap() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLHOST_BWRAP") {
        return Some(PathBuf::from(path));
    }
    which("bwrap")
}

/// `name` on the server's `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Why bubblewrap could not run a probe here.
#[derive(Debug, thiserror::Error)]
enum ProbeFailed {
    /// Its scratch folder could not be made, or bubblewrap started.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// bubblewrap ran and failed: what it said.
    #[error("{0}")]
    Refused(String),
}

/// Runs `true` the way a build runs (with a size-bound tmpfs when
/// `tmpfs`), in folders of its own.
fn probe(bwrap: &Path, tmpfs: bool) -> Result<(), ProbeFailed> {
    let scratch = tempfile::Builder::new()
        .prefix("toolhost-build-probe-")
        .permissions(super::scratch::private())
        .tempdir()?;
    let (src, out) = (scratch.path().join("src"), scratch.path().join("out"));
    std::fs::create_dir_all(&out)?;
    prepare(&src)?;
    let folders = Folders {
        src: &src,
        out: &out,
    };
    let output = std::process::Command::new(bwrap)
        .args(sandbox_args(&[], folders, tmpfs.then_some(1 << 20)))
        .args(["--", "true"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ProbeFailed::Refused(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ))
    }
}

/// What bubblewrap is told, up to `--`: namespaces, no capabilities, the
/// system's programs and the toolchain's `roots` read-only; the sources
/// read-only and a tmpfs of `tmpfs` bytes to build in (else the sources'
/// folder itself, writable), and the folder the component is written to.
fn sandbox_args(roots: &[PathBuf], folders: Folders<'_>, tmpfs: Option<u64>) -> Vec<String> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(String::from)
    .into();
    // Merged /usr has these as links into it; older systems as folders.
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let path = Path::new(top);
        match std::fs::read_link(path) {
            Ok(target) => {
                args.extend(["--symlink".into(), target.display().to_string(), top.into()])
            }
            Err(_) if path.is_dir() => args.extend(["--ro-bind".into(), top.into(), top.into()]),
            Err(_) => {}
        }
    }
    for file in ["/etc/ld.so.cache", "/etc/alternatives"] {
        args.extend(["--ro-bind-try".into(), file.into(), file.into()]);
    }
    for root in roots {
        let root = root.display().to_string();
        args.extend(["--ro-bind".into(), root.clone(), root]);
    }
    match tmpfs {
        Some(bytes) => args.extend([
            "--ro-bind".into(),
            folders.src.display().to_string(),
            SOURCES.into(),
            "--size".into(),
            bytes.to_string(),
            "--tmpfs".into(),
            INSIDE.into(),
        ]),
        None => args.extend([
            "--bind".into(),
            folders.src.display().to_string(),
            INSIDE.into(),
        ]),
    }
    args.extend([
        "--bind".into(),
        folders.out.display().to_string(),
        OUT.into(),
    ]);
    // `/tmp` leads into the scratch folder, unless a toolchain lives under
    // it (a checkout in /tmp): then it is that folder's parent, read-only.
    if !roots.iter().any(|root| root.starts_with("/tmp")) {
        args.extend(["--symlink".into(), format!("{INSIDE}/.tmp"), "/tmp".into()]);
    }
    args.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
            "--chdir",
            INSIDE,
        ]
        .map(String::from),
    );
    args
}

/// The folders a toolchain's program needs besides `/usr`, all read-only:
/// the install it belongs to (a virtualenv, an npm prefix, a Python
/// prefix), and its interpreter's (from its `#!` line, `env` resolved on
/// the server's `PATH`, symbolic links followed).
pub(crate) fn roots(program: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let mut add = |path: &Path| {
        if let Some(root) = install_root(path)
            && !root.starts_with("/usr")
            && !roots.iter().any(|known: &PathBuf| root.starts_with(known))
        {
            roots.retain(|known: &PathBuf| !known.starts_with(&root));
            roots.push(root);
        }
    };
    add(program);
    if let Ok(real) = program.canonicalize() {
        add(&real);
        if let Some(interpreter) = interpreter_of(&real) {
            add(&interpreter);
            if let Ok(real) = interpreter.canonicalize() {
                add(&real);
            }
        }
    }
    roots
}

/// The install `program` belongs to: the folder holding `node_modules`
/// for an npm package, else the parent of its `bin` folder (a virtualenv,
/// a Python or Node prefix), else its own folder; never `/` itself.
fn install_root(program: &Path) -> Option<PathBuf> {
    let program = if program.is_absolute() {
        program.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(program)
    };
    if let Some(modules) = program
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
    {
        return modules.parent().map(Path::to_path_buf);
    }
    let dir = program.parent()?;
    let root = match dir.file_name() {
        Some(name) if name == "bin" || name == "sbin" => dir.parent()?,
        _ => dir,
    };
    (root.parent().is_some()).then(|| root.to_path_buf())
}

/// The interpreter a script's `#!` line names, `env NAME` looked up on the
/// server's `PATH`; `None` for a binary.
fn interpreter_of(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|name| name == "env") {
        let name = words.find(|word| !word.starts_with('-'))?;
        return which(name);
    }
    Some(first)
}

/// The `PATH` a build gets: the folders of its program and interpreter,
/// then the system's.
fn search_path(program: &Path) -> String {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let real = program.canonicalize().ok();
    let interpreter = real.as_deref().and_then(interpreter_of);
    for path in [Some(program.to_path_buf()), real, interpreter.clone()]
        .into_iter()
        .chain([interpreter.and_then(|i| i.canonicalize().ok())])
        .flatten()
    {
        if let Some(dir) = path.parent()
            && !dirs.iter().any(|known| known == dir)
        {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs.into_iter()
        .map(|dir| dir.display().to_string())
        .chain(["/usr/bin".into(), "/bin".into()])
        .collect::<Vec<_>>()
        .join(":")
}

/// How an uncontained build can be kept off the network here: tried once,
/// with `true` run the way a build is.
fn network_namespace() -> Network {
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
            command.pre_exec(move || enter_network(network));
        }
        if command.status().is_ok_and(|status| status.success()) {
            return network;
        }
    }
    Network::Shared
}

/// In a build's child: the network namespace `network` names (Linux).
#[cfg(unix)]
pub(crate) fn enter_network(network: Network) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let flags = match network {
            Network::Namespace => libc::CLONE_NEWNET,
            Network::UserNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWNET,
            Network::Shared => return Ok(()),
        };
        // SAFETY: a plain system call on this process.
        if unsafe { libc::unshare(flags) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = network;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toolchain_brings_its_install_and_its_interpreters() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (venv, prefix) = (base.join("venv"), base.join("python3.11"));
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::write(prefix.join("bin/python3.11"), "").unwrap();
        std::os::unix::fs::symlink(prefix.join("bin/python3.11"), venv.join("bin/python3"))
            .unwrap();
        let script = venv.join("bin/componentize-py");
        std::fs::write(
            &script,
            format!("#!{}\nimport sys\n", venv.join("bin/python3").display()),
        )
        .unwrap();
        assert_eq!(roots(&script), [venv.clone(), prefix.clone()]);
        assert_eq!(
            search_path(&script),
            format!(
                "{}:{}:/usr/bin:/bin",
                venv.join("bin").display(),
                prefix.join("bin").display()
            )
        );

        let npm = base.join("js/node_modules/.bin/componentize-qjs");
        std::fs::create_dir_all(npm.parent().unwrap()).unwrap();
        std::fs::write(&npm, "").unwrap();
        assert_eq!(roots(&npm), [base.join("js")]);
        assert_eq!(install_root(Path::new("/opt/tool")), Some("/opt".into()));
        assert_eq!(install_root(Path::new("/tool")), None);
    }
}
