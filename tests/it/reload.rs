//! Hot reload against the real binary: drop, replace under load, delete,
//! rejection of bad files, and tool-name conflicts between plugins.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{Server, drop_in, example, fixture, plugin_dir, variant_of};
use serde_json::json;
use toolhost::registry::report::PluginState;
use toolhost::runtime::Tier;

#[test]
fn dropped_replaced_and_deleted_plugins_follow_the_folder() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    assert_eq!(server.tool_names(), ["echo"]);

    // Drop: write to a temporary name, rename into place.
    drop_in(&example("math"), dir.path(), "math.wasm");
    server.wait_for("math's tools", |s| {
        s.tool_names().contains(&"add".to_string())
    });
    assert_eq!(
        server.call("add", json!({"a": 1, "b": 2})).json["structuredContent"]["result"],
        3.0
    );

    // Replace while a steady stream of calls runs: no call may fail.
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let base = server.base.clone();
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, calls, base) = (stop.clone(), calls.clone(), base.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let mut response = agent
                        .post(format!("{base}/tools/add"))
                        .header("Content-Type", "application/json")
                        .send(r#"{"a":20,"b":22}"#)
                        .unwrap();
                    let body = response.body_mut().read_to_string().unwrap();
                    if response.status() != 200 || !body.contains("42") {
                        failures.push(body);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();
    let first_hash = server.plugin("math").unwrap().content_hash;
    for round in 0..3 {
        let variant = variant_of(&example("math"), &format!("v{round}"));
        if round == 1 {
            // `cp` over the existing file rather than rename.
            std::fs::copy(&variant, dir.path().join("math.wasm")).unwrap();
        } else {
            drop_in(&variant, dir.path(), "math.wasm");
        }
        let expected = server_hash_of(&variant);
        server.wait_for("the new version", |s| {
            s.plugin("math").unwrap().content_hash.as_deref() == Some(expected.as_str())
        });
    }
    stop.store(true, Ordering::Relaxed);
    let failures: Vec<String> = callers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(
        calls.load(Ordering::Relaxed) > 20,
        "the stream of calls ran"
    );
    assert_eq!(
        failures,
        Vec::<String>::new(),
        "no call fails because of a reload"
    );
    assert_ne!(server.plugin("math").unwrap().content_hash, first_hash);

    // Delete: its tools are gone.
    std::fs::remove_file(dir.path().join("math.wasm")).unwrap();
    server.wait_for("math to go", |s| s.plugin("math").is_none());
    let gone = server.call("add", json!({"a": 1, "b": 2}));
    assert_eq!(
        (gone.status, gone.json["error"]["code"].as_str()),
        (404, Some("TOOL_NOT_FOUND"))
    );
    assert_eq!(server.tool_names(), ["echo"]);
}

fn server_hash_of(path: &std::path::Path) -> String {
    use std::fmt::Write;
    let bytes = std::fs::read(path).unwrap();
    let digest = sha256(&bytes);
    let mut hex = String::new();
    for byte in digest {
        write!(hex, "{byte:02x}").unwrap();
    }
    hex
}

/// SHA-256 through the system's `sha256sum`, to check the server's hash
/// independently of its own code.
fn sha256(bytes: &[u8]) -> Vec<u8> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    let output = std::process::Command::new("sha256sum")
        .arg(file.path())
        .output()
        .unwrap();
    let hex = String::from_utf8(output.stdout).unwrap();
    let hex = hex.split_whitespace().next().unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn bad_files_are_rejected_with_reasons_and_lose_nothing() {
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = Server::in_process(dir.path());

    let echo = std::fs::read(example("echo")).unwrap();
    std::fs::write(dir.path().join("truncated.wasm"), &echo[..echo.len() / 2]).unwrap();
    // The smallest valid core module: magic and version 1.
    std::fs::write(dir.path().join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(dir.path().join("text.wasm"), b"hello, I am not wasm").unwrap();
    drop_in(&fixture("dupes"), dir.path(), "dupes.wasm");

    let reason = |id: &str| {
        server.wait_for(id, |s| s.settled_plugin(id).is_some());
        let plugin = server.plugin(id).unwrap();
        assert_eq!(plugin.state, PluginState::Rejected, "{plugin:?}");
        plugin.reason.unwrap()
    };
    assert!(
        reason("truncated").starts_with("invalid component"),
        "{}",
        reason("truncated")
    );
    assert!(reason("core").contains("core WebAssembly module, not a component"));
    assert!(reason("text").contains("not a WebAssembly file"));
    assert!(reason("dupes").contains(r#""twice" is listed twice"#));

    // Everything else keeps answering.
    assert_eq!(server.call("echo", json!({"text": "ok"})).status, 200);

    // A broken replacement of a working plugin leaves the old one serving.
    let math = std::fs::read(example("math")).unwrap();
    std::fs::write(dir.path().join("math.wasm"), &math[..100]).unwrap();
    server.wait_for("math's rejection", |s| {
        s.plugin("math").unwrap().state == PluginState::Rejected
    });
    let report = server.plugin("math").unwrap();
    assert!(report.serving.is_some(), "{report:?}");
    assert_eq!(server.call("add", json!({"a": 1, "b": 1})).status, 200);
    assert_eq!(report.tools, ["add", "divide", "stats"]);

    // Restoring it clears the rejection.
    drop_in(&example("math"), dir.path(), "math.wasm");
    server.wait_for("math's recovery", |s| {
        s.plugin("math").unwrap().state == PluginState::Loaded
    });
}

/// A plugin dropped into a running server is one someone waits for: it
/// answers on baseline code (Winch) whatever its size, and its optimised
/// code takes over in place a few seconds later (`runtime/compiler.rs`).
/// Plugins loaded while the server starts compile optimised directly.
#[test]
fn a_small_plugin_dropped_into_a_running_server_answers_on_baseline_code_first() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::start(dir.path(), &["--cache-dir", cache_dir]);
    let echo = server.plugin("echo").unwrap();
    assert_eq!(echo.compiler, Some(Tier::Optimized), "{echo:?}");

    drop_in(&example("math"), dir.path(), "math.wasm");
    server.wait_for("math", |s| s.settled_plugin("math").is_some());
    let math = server.plugin("math").unwrap();
    assert_eq!(math.state, PluginState::Loaded, "{math:?}");
    assert_eq!(math.compiler, Some(Tier::Baseline), "{math:?}");
    let add = |server: &Server| {
        server.call("add", json!({"a": 1, "b": 2})).json["structuredContent"]["result"].clone()
    };
    assert_eq!(add(&server), 3.0);
    server.wait_for_within("math's optimised code", Duration::from_secs(120), |s| {
        s.plugin("math")
            .is_some_and(|p| p.compiler == Some(Tier::Optimized))
    });
    assert_eq!(add(&server), 3.0);

    // A restart finds the optimised code in the cache.
    drop(server);
    let again = Server::start(dir.path(), &["--cache-dir", cache_dir]);
    let math = again.plugin("math").unwrap();
    assert_eq!(math.from_cache, Some(true), "{math:?}");
    assert_eq!(math.compiler, Some(Tier::Optimized), "{math:?}");
    assert_eq!(add(&again), 3.0);
}

#[test]
fn compiled_code_is_cached_and_unchanged_files_are_not_reloaded() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let dir = plugin_dir(&[&example("echo")]);
    let first = Server::start(dir.path(), &["--cache-dir", cache_dir]);
    let loaded = first.plugin("echo").unwrap();
    assert_eq!(
        loaded.from_cache,
        Some(false),
        "a new cache compiles: {loaded:?}"
    );

    // Copying the same bytes over the file changes nothing.
    std::fs::copy(example("echo"), dir.path().join("echo.wasm")).unwrap();
    drop_in(&example("math"), dir.path(), "math.wasm");
    first.wait_for("math", |s| s.settled_plugin("math").is_some());
    assert_eq!(first.plugin("echo").unwrap().loaded_at, loaded.loaded_at);
    drop(first);

    // A restart loads from the cache instead of compiling.
    let second = Server::start(dir.path(), &["--cache-dir", cache_dir]);
    assert_eq!(second.plugin("echo").unwrap().from_cache, Some(true));
    assert_eq!(second.plugin("math").unwrap().from_cache, Some(true));
    assert_eq!(second.call("echo", json!({"text": "warm"})).status, 200);
}

#[test]
fn the_first_plugin_keeps_a_tool_name() {
    let dir = plugin_dir(&[&example("echo")]);
    let server = Server::in_process(dir.path());
    drop_in(
        &variant_of(&example("echo"), "copy"),
        dir.path(),
        "echo_copy.wasm",
    );
    server.wait_for("the copy", |s| s.settled_plugin("echo_copy").is_some());
    let copy = server.plugin("echo_copy").unwrap();
    assert_eq!(copy.state, PluginState::Rejected);
    assert_eq!(
        copy.reason.as_deref(),
        Some(r#"tool "echo" is already provided by plugin "echo""#)
    );
    assert_eq!(server.plugin("echo").unwrap().state, PluginState::Loaded);

    // Once the holder goes, the waiting plugin takes the name by itself.
    std::fs::remove_file(dir.path().join("echo.wasm")).unwrap();
    server.wait_for("the copy to take over", |s| {
        s.plugin("echo_copy")
            .is_some_and(|p| p.state == PluginState::Loaded)
    });
    assert_eq!(
        server.call("echo", json!({"text": "hi"})).json["content"][0]["text"],
        "hi"
    );
}

/// One load path with a generation per file: a file replaced while a slow
/// start-up scan is still compiling another file serves its newer version.
/// The scan reads `echo.wasm`, then waits for a large component compiled
/// without a cache; meanwhile `echo.wasm` is replaced and the watcher loads
/// the new version. The scan's verdict on the old bytes, applied last, must
/// be dropped as stale, not put back in service.
#[test]
fn a_file_replaced_during_a_slow_startup_scan_serves_the_newer_version() {
    let dir = plugin_dir(&[&example("echo")]);
    let slow = crate::support::components::plugin_slow_to_compile(40_000);
    crate::support::components::write_plugin(&slow, dir.path(), "large.wasm");
    let newer = variant_of(&example("echo"), "newer-during-scan");
    let newer_hash = crate::support::file_hash(&newer);
    let (folder, replacement) = (dir.path().to_path_buf(), newer.clone());
    // The scan's read of the old echo.wasm is the first open of it.
    let opens = FileOpens::watch(&dir.path().join("echo.wasm"));
    let opened = opens.counter();
    let mut replaced = false;
    let server = Server::start_with_hook(dir.path(), &["--no-cache"], &[], move |line| {
        if !replaced && line.contains("loading the plugin folder") {
            replaced = true;
            let (folder, replacement, opened) =
                (folder.clone(), replacement.clone(), opened.clone());
            std::thread::spawn(move || {
                // Once the scan has read the old echo.wasm, while it waits
                // for the large component's compile.
                crate::support::wait_until(
                    "the scan to read echo.wasm",
                    std::time::Duration::from_secs(60),
                    || opened.load(Ordering::SeqCst) >= 1,
                );
                drop_in(&replacement, &folder, "echo.wasm");
            });
        }
    });
    assert!(
        server.log().contains("loading the plugin folder"),
        "{}",
        server.log()
    );
    server.wait_for("the newer echo to serve", |s| {
        s.settled_plugin("echo")
            .is_some_and(|plugin| plugin.content_hash.as_deref() == Some(newer_hash.as_str()))
    });
    // The scan, over before the server listened, dropped its verdict on
    // the older bytes as stale ...
    assert!(
        server
            .log()
            .contains("a newer version arrived while loading"),
        "the scan's verdict on the older bytes was dropped as stale:\n{}",
        server.log()
    );
    // ... so the newer version stays: nothing else loads the older bytes.
    let echo = server.settled_plugin("echo").unwrap();
    assert_eq!(
        echo.content_hash.as_deref(),
        Some(newer_hash.as_str()),
        "{echo:?}\n{}",
        server.log()
    );
    drop(opens);
}

/// Namespace folders: two publishers' same-named tools both serve, under
/// `namespace__tool`, beside the top level's plain names; a namespace
/// folder made while serving is followed; deeper files and folders whose
/// names are not namespaces are not plugins; a restart serves the same
/// names.
#[test]
fn namespaces_serve_same_named_tools_side_by_side() {
    let dir = plugin_dir(&[&example("echo")]);
    for (folder, tag) in [
        ("ada", "ns-ada"),
        ("bob", "ns-bob"),
        ("ada/deeper", "deep"),
        ("not a name", "bad"),
    ] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        drop_in(
            &variant_of(&example("echo"), tag),
            &dir.path().join(folder),
            "echo.wasm",
        );
    }
    let server = Server::in_process(dir.path());
    let mut names = server.tool_names();
    names.sort();
    assert_eq!(names, ["ada__echo", "bob__echo", "echo"]);
    for tool in ["ada__echo", "bob__echo", "echo"] {
        let answer = server.call(tool, json!({"text": tool}));
        assert_eq!(answer.json["content"][0]["text"], tool, "{}", answer.json);
    }
    assert_eq!(
        server.settled_plugin("ada/echo").unwrap().tools,
        ["ada__echo"]
    );

    // A namespace made while serving is followed.
    std::fs::create_dir(dir.path().join("carol")).unwrap();
    drop_in(&example("echo"), &dir.path().join("carol"), "echo.wasm");
    server.wait_for("carol's echo", |s| {
        s.tool_names().contains(&"carol__echo".to_string())
    });
    std::fs::remove_file(dir.path().join("ada/echo.wasm")).unwrap();
    server.wait_for("ada's echo to go", |s| {
        !s.tool_names().contains(&"ada__echo".to_string())
    });

    // A restart serves the same names.
    drop(server);
    let again = Server::in_process(dir.path());
    let mut names = again.tool_names();
    names.sort();
    assert_eq!(names, ["bob__echo", "carol__echo", "echo"]);
}

/// A Kubernetes ConfigMap (or Secret) mounted as the plugin folder is
/// updated the kubelet's way: the new files in a new hidden folder, then
/// the `..data` link swapped to it in one rename; the plugin names are
/// links through `..data` and see no event of their own. The server
/// follows the swap.
#[test]
fn a_kubernetes_configmap_update_reloads_its_plugins() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let first = variant_of(&example("echo"), "configmap-1");
    let second = variant_of(&example("echo"), "configmap-2");
    std::fs::create_dir(root.join("..2026_11_25_01")).unwrap();
    std::fs::copy(&first, root.join("..2026_11_25_01/echo.wasm")).unwrap();
    symlink("..2026_11_25_01", root.join("..data")).unwrap();
    symlink("..data/echo.wasm", root.join("echo.wasm")).unwrap();
    let server = Server::start(root, &[]);
    assert_eq!(
        server.plugin("echo").unwrap().content_hash,
        Some(crate::support::file_hash(&first))
    );

    std::fs::create_dir(root.join("..2026_11_25_02")).unwrap();
    std::fs::copy(&second, root.join("..2026_11_25_02/echo.wasm")).unwrap();
    symlink("..2026_11_25_02", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    std::fs::remove_dir_all(root.join("..2026_11_25_01")).unwrap();
    let expected = crate::support::file_hash(&second);
    server.wait_for("the swapped version", |server| {
        server
            .plugin("echo")
            .is_some_and(|plugin| plugin.content_hash.as_deref() == Some(expected.as_str()))
    });
    assert_eq!(server.call("echo", json!({"text": "hi"})).status, 200);
}

/// With `--policies`, the operator's policies live in a ConfigMap of their
/// own, updated the kubelet's way (files and namespace folders linked
/// through `..data`), and the plugin folder stays writable: each version
/// of the ConfigMap is what the plugins are granted, a namespace's policy
/// included, and a policy taken out of it is taken out of the folder.
#[test]
fn a_policies_configmap_governs_a_writable_plugin_folder() {
    use std::os::unix::fs::symlink;
    let folder = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    let root = policies.path();
    drop_in(&example("echo"), folder.path(), "echo.wasm");
    std::fs::create_dir(folder.path().join("ada")).unwrap();
    drop_in(&example("echo"), &folder.path().join("ada"), "echo.wasm");
    let version = |name: &str, echo_ms: Option<u64>, ada_ms: u64| {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("ada")).unwrap();
        if let Some(ms) = echo_ms {
            std::fs::write(
                dir.join("echo.toml"),
                format!("[limits]\ntimeout_ms = {ms}\n"),
            )
            .unwrap();
        }
        std::fs::write(
            dir.join("ada/_namespace.toml"),
            format!("[limits]\ntimeout_ms = {ada_ms}\n"),
        )
        .unwrap();
    };
    version("..2026_12_06_01", Some(1234), 4321);
    symlink("..2026_12_06_01", root.join("..data")).unwrap();
    symlink("..data/echo.toml", root.join("echo.toml")).unwrap();
    symlink("..data/ada", root.join("ada")).unwrap();
    let server = Server::start(folder.path(), &["--policies", root.to_str().unwrap()]);
    let timeout_of = |server: &Server, id: &str| {
        server
            .plugin(id)
            .and_then(|plugin| plugin.granted)
            .map(|granted| granted["limits"]["timeoutMs"].as_u64().unwrap())
    };
    assert_eq!(timeout_of(&server, "echo"), Some(1234));
    assert_eq!(timeout_of(&server, "ada/echo"), Some(4321));

    // The next version: echo's policy changed, then taken out.
    let swap = |name: &str| {
        symlink(name, root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    };
    version("..2026_12_06_02", Some(2345), 5432);
    swap("..2026_12_06_02");
    server.wait_for("the second version's policies", |server| {
        timeout_of(server, "echo") == Some(2345) && timeout_of(server, "ada/echo") == Some(5432)
    });
    version("..2026_12_06_03", None, 5432);
    swap("..2026_12_06_03");
    std::fs::remove_file(root.join("echo.toml")).unwrap();
    server.wait_for("echo's policy gone", |server| {
        timeout_of(server, "echo") == Some(10_000)
    });
    assert!(!folder.path().join("echo.toml").exists());
    assert_eq!(timeout_of(&server, "ada/echo"), Some(5432));
    assert_eq!(server.call("echo", json!({"text": "hi"})).status, 200);
}

/// The compile cache keeps no version the server stopped serving: a
/// replaced version's entry goes with the replacement, a removed plugin's
/// with the removal (a workshop's edit loop left 40–50 MB per Python
/// version behind). The version serving keeps its entry.
#[test]
fn the_compile_cache_forgets_versions_no_longer_served() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let first = variant_of(&example("echo"), "first");
    let second = variant_of(&example("echo"), "second");
    let hash = |path: &std::path::Path| {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(path).unwrap())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    };
    let entries_of = |path: &std::path::Path| {
        let prefix = format!("{}-", hash(path));
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|entry| {
                entry
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .count()
    };
    drop_in(&first, dir.path(), "echo.wasm");
    let server = Server::start(dir.path(), &["--cache-dir", cache.path().to_str().unwrap()]);
    assert_eq!(entries_of(&first), 1, "the first version is cached");

    drop_in(&second, dir.path(), "echo.wasm");
    server.wait_for("the second version", |s| {
        s.plugin("echo")
            .and_then(|p| p.content_hash)
            .is_some_and(|served| served == hash(&second))
    });
    assert_eq!(entries_of(&second), 1, "the second version is cached");
    server.wait_for("the replaced version forgotten", |_| {
        entries_of(&first) == 0
    });

    std::fs::remove_file(dir.path().join("echo.wasm")).unwrap();
    server.wait_for("the removal", |s| s.plugin("echo").is_none());
    server.wait_for("the removed version forgotten", |_| {
        entries_of(&second) == 0
    });
}

/// How many times a file has been opened (by anyone: inotify's `IN_OPEN`)
/// since [`FileOpens::watch`]: how a test sees a server read a file when
/// nothing else tells it so. Counts for as long as it lives. (Here, not in
/// `support`, which the bench crate shares without `notify`.)
pub(crate) struct FileOpens {
    count: Arc<AtomicUsize>,
    _watcher: notify::RecommendedWatcher,
}

impl FileOpens {
    pub(crate) fn watch(path: &Path) -> FileOpens {
        use notify::Watcher;
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && matches!(
                        event.kind,
                        notify::EventKind::Access(notify::event::AccessKind::Open(_))
                    )
                {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            })
            .expect("an inotify watcher");
        watcher
            .watch(path, notify::RecursiveMode::NonRecursive)
            .unwrap_or_else(|error| panic!("watching {}: {error}", path.display()));
        FileOpens {
            count,
            _watcher: watcher,
        }
    }

    /// The opens so far.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The count, to read from another thread.
    pub(crate) fn counter(&self) -> Arc<AtomicUsize> {
        self.count.clone()
    }
}
