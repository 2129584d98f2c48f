//! What a server build can reach and take of the host (`--builds`): an
//! author's `app.py` runs at build time, and writes wherever the toolchain
//! lets it. These tests publish source that attacks the server the way an
//! attendee could, and check on the host that
//!
//! - it wrote nowhere but its scratch folder, read none of the host's
//!   Python packages, and a `.pth` it planted never ran, at its build or at
//!   anyone's next one;
//! - writing without end stops at `--build-disk-mib`;
//! - two endless loops at import do not hold every build slot.
//!
//! bubblewrap contains each build here (the Makefile installs it; a server
//! that cannot run it refuses builds unless `--builds-uncontained`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::builds::{JS_SHOUT, PY_LOOP, PY_WORD_COUNT, build_events, call, put_built};
use crate::publish::{ADA, ADMIN, CAROL, tokens_file};
use crate::support::{Server, plugin_dir, repo_root};

/// The file the attack plants in every folder it can write.
const PLANTED: &str = "zz_toolhost_escape.pth";

/// At import: lists every folder the build's CPython was given, plants a
/// `.pth` in each and in each folder under it, and keeps what it saw for
/// its tool to tell. A `.pth` line that starts with `import` runs in every
/// native Python that reads its folder at start-up.
fn py_plant(marker: &Path) -> String {
    format!(
        r#"import json
import os

from toolhost_plugin import Tools, tool  # noqa: F401

MARKER = {marker:?}
PLANT = "import os; open(%r, 'w').write('ran as uid %%d' %% os.getuid())\n" % MARKER
seen = {{}}
planted = []
for root in ["/" + str(i) for i in range(16)] + ["/python", "/bundled", "/world"]:
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        continue
    seen[root] = entries
    for folder in [root] + [root + "/" + entry for entry in entries]:
        if os.path.isdir(folder):
            try:
                with open(folder + "/{PLANTED}", "w") as planting:
                    planting.write(PLANT)
                planted.append(folder)
            except OSError:
                pass


@tool(name="what_the_build_saw", read_only=True)
def what_the_build_saw() -> str:
    """What the build saw, and where it planted."""
    return json.dumps({{"seen": seen, "planted": planted}})
"#,
        marker = marker.display().to_string()
    )
}

/// Every `.pth` the attack left in `dir` (to `depth` folders down),
/// removed as it is found, so that a failing run leaves the machine clean.
fn planted_in(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == PLANTED {
            let _ = std::fs::remove_file(&path);
            found.push(path);
        } else if depth > 0 && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            planted_in(&path, depth - 1, found);
        }
    }
}

/// The site-packages folders of the host's `python3` (the one
/// componentize-py would have asked), and the user's.
fn host_site_packages() -> Vec<PathBuf> {
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import site; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))",
        ])
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

#[test]
fn a_build_changes_nothing_outside_its_scratch_folder_and_a_planted_pth_never_runs() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--builds", "python"],
    );
    let marker = config.path().join("PLANTED-CODE-RAN");
    let (status, report) = put_built(
        &server,
        "ada/plant",
        ADA,
        "text/x-python",
        &py_plant(&marker),
    );
    assert_eq!(status, 201, "{report}");
    // The next build, anyone's, starts the toolchain's Python again.
    let (status, report) = put_built(&server, "carol/wc", CAROL, "text/x-python", PY_WORD_COUNT);
    assert_eq!(status, 201, "{report}");

    let told = call(&server, "ada__what_the_build_saw", json!({}));
    let saw: Value =
        serde_json::from_str(told["content"][0]["text"].as_str().unwrap()).unwrap_or_default();
    let planted = saw["planted"].as_array().cloned().unwrap_or_default();
    assert!(
        !planted.is_empty(),
        "the attack planted nowhere at all: {told}"
    );

    // On the host: the planted code never ran, and no folder outside a
    // build's scratch folder holds what it planted.
    let mut found = Vec::new();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for (folder, depth) in host_site_packages()
        .into_iter()
        .map(|folder| (folder, 1))
        .chain([
            (repo_root().join("target/toolchains"), 6),
            (std::env::temp_dir(), 1),
            (dir.path().to_path_buf(), 3),
        ])
        .chain(home.map(|home| (home, 1)))
    {
        planted_in(&folder, depth, &mut found);
    }
    let ran = std::fs::read_to_string(&marker).ok();
    let _ = std::fs::remove_file(&marker);
    assert_eq!(
        ran, None,
        "code the build planted ran natively on the server"
    );
    assert!(
        found.is_empty(),
        "the build wrote outside its scratch folder: {found:?}"
    );

    // What it was given beside its own folder (the standard library, the
    // toolchain's helpers, the generated bindings) holds nothing of the
    // host's: the site-packages it gets is an empty one of its own.
    let seen = saw["seen"].as_object().unwrap();
    for (root, entries) in seen {
        let entries: Vec<&str> = entries
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if ["/python", "/bundled", "/world"].contains(&root.as_str()) || entries.contains(&"app.py")
        {
            continue;
        }
        assert!(
            entries.is_empty(),
            "the build read {root} with {} entries: {entries:?}",
            entries.len()
        );
    }
}

/// At import: a relative link at the component's name, in the build's
/// folder as its CPython sees it, to `target` on the host; and, since a
/// contained build's `/tmp` leads into its own folder, the same path made
/// there, so that the toolchain's write through the link succeeds inside
/// and the server alone would meet the host's file. Its one tool, `tool`,
/// says whose it is.
fn py_link(target: &Path, tool: &str) -> String {
    // Relative: WASI refuses absolute links. Enough `..` to reach `/` from
    // wherever the folder is.
    let relative = format!(
        "{}{}",
        "../".repeat(24),
        target.display().to_string().trim_start_matches('/')
    );
    let under_tmp = target
        .strip_prefix(std::env::temp_dir())
        .map(|rest| rest.display().to_string())
        .unwrap_or_default();
    format!(
        r#"import os

from toolhost_plugin import Tools, tool  # noqa: F401

for root in ["/" + str(i) for i in range(16)]:
    if not os.path.exists(root + "/app.py"):
        continue
    if {under_tmp:?}:
        try:
            os.makedirs(os.path.dirname(root + "/.tmp/" + {under_tmp:?}), exist_ok=True)
        except OSError:
            pass
    try:
        os.symlink({relative:?}, root + "/plugin.wasm")
    except OSError:
        pass


@tool(name={tool:?}, read_only=True)
def own() -> str:
    """Says whose it is."""
    return "the publisher's own"
"#
    )
}

/// A link that build code leaves where the component is written is never
/// followed by the server: not to a FIFO (which would hold a worker for
/// ever, as the server's stdin in a terminal or its stderr into a pipe
/// would), nor to another person's plugin (which would serve theirs under
/// the publisher's name). The build serves its own component, or is
/// refused; the server answers throughout.
#[test]
fn a_link_made_at_build_time_is_never_followed_by_the_server() {
    let dir = plugin_dir(&[&crate::support::example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--builds", "python"],
    );
    let fifo = config.path().join("fifo");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let echo = dir.path().join("echo.wasm").canonicalize().unwrap();
    for (id, target, tool) in [
        // A device there is inside the build too (so the toolchain's write
        // through the link succeeds); on the host, the server's own.
        ("ada/null", PathBuf::from("/dev/null"), "null_own"),
        ("ada/fifo", fifo.clone(), "fifo_own"),
        ("ada/linked", echo, "linked_own"),
    ] {
        let (status, report) = std::thread::scope(|s| {
            let publishing =
                s.spawn(|| put_built(&server, id, ADA, "text/x-python", &py_link(&target, tool)));
            while !publishing.is_finished() {
                assert_eq!(server.get("/health").status, 200, "{id}");
                std::thread::sleep(Duration::from_millis(200));
            }
            publishing.join().unwrap()
        });
        if status == 201 {
            // Its own tool, not echo's under its name.
            let tools = report["tools"].to_string();
            assert!(tools.contains(tool), "{id}: {report}");
            assert!(!tools.contains("echo"), "{id}: {report}");
            let told = call(&server, &format!("ada__{tool}"), json!({}));
            assert_eq!(told["content"][0]["text"], "the publisher's own", "{told}");
        } else {
            assert_eq!(status, 422, "{id}: {report}");
            assert!(
                report["error"]["details"]["leftBehind"].is_string(),
                "{id}: {report}"
            );
        }
    }
    // Nobody read the FIFO: a writer finds no reader.
    let mut options = std::fs::OpenOptions::new();
    std::os::unix::fs::OpenOptionsExt::custom_flags(options.write(true), libc::O_NONBLOCK);
    assert!(options.open(&fifo).is_err(), "someone holds the FIFO open");
}

/// Writes 1 MiB files at import, 256 of them.
const PY_FILL: &str = "from toolhost_plugin import Tools  # noqa: F401\n\nchunk = b\"x\" * (1 << 20)\n\
    for i in range(256):\n    with open(f\"/0/fill{i}\", \"wb\") as f:\n        f.write(chunk)\n";

#[test]
fn a_build_that_writes_without_end_is_stopped_at_its_disk_limit() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python",
            "--build-disk-mib",
            "96",
        ],
    );
    let (status, refused) = put_built(&server, "ada/fill", ADA, "text/x-python", PY_FILL);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "BUILD_FAILED", "{refused}");
    assert_eq!(
        refused["error"]["details"]["limit"], "--build-disk-mib",
        "{refused}"
    );
    assert!(!dir.path().join("ada/fill.wasm").exists());
    // A build that stays within it goes live.
    let (status, report) = put_built(&server, "ada/wc", ADA, "text/x-python", PY_WORD_COUNT);
    assert_eq!(status, 201, "{report}");
    assert!(
        report["build"]["peakDiskMib"].as_u64().unwrap() <= 96,
        "{report}"
    );
}

#[test]
fn builds_looping_at_import_give_their_slots_to_the_next() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    // Four publishers whose imports loop, and an admin.
    let loopers = ["ada", "carol", "erin", "frank"];
    let tokens = config.path().join("tokens.toml");
    let mut text = format!("[[token]]\nname = \"bob\"\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n");
    for name in loopers {
        text.push_str(&format!(
            "[[token]]\nname = \"{name}\"\nsecret = \"{name}-secret-0123456789\"\nrole = \"publisher\"\n"
        ));
    }
    std::fs::write(&tokens, text).unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python,js",
            "--max-builds",
            "2",
            "--build-slice-secs",
            "5",
            "--build-timeout-secs",
            "150",
        ],
    );
    let events = build_events(&server);
    let secrets = loopers.map(|name| format!("{name}-secret-0123456789"));
    std::thread::scope(|s| {
        // Four people's imports loop for ever, twice as many as the slots:
        // each holds its slot for one slice, then gives it to the next...
        let loops: Vec<_> = loopers
            .iter()
            .zip(&secrets)
            .map(|(name, secret)| {
                let server = &server;
                s.spawn(move || {
                    put_built(
                        server,
                        &format!("{name}/spin"),
                        secret,
                        "text/x-python",
                        PY_LOOP,
                    )
                })
            })
            .collect();
        server.wait_for_within("all four loops to build", Duration::from_secs(120), |_| {
            events
                .lock()
                .unwrap()
                .iter()
                .filter(|event| event["stage"] == "building")
                .count()
                == 4
        });
        // ...so a fifth person's build goes live while all four still loop.
        let (status, report) = put_built(&server, "bob/shout", ADMIN, "text/javascript", JS_SHOUT);
        assert_eq!(status, 201, "{report}");
        assert!(
            loops.iter().all(|looping| !looping.is_finished()),
            "the innocent build waited for a loop to be stopped"
        );
        for looping in loops {
            let (status, refused) = looping.join().unwrap();
            assert_eq!(status, 422, "{refused}");
            assert_eq!(refused["error"]["details"]["limit"], "--build-timeout-secs");
        }
    });
}
