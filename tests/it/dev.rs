//! `toolhost new` and `toolhost dev` as a workshop attendee uses them: a
//! project from the scaffold, built by cargo from its own sources (the SDK
//! copy `new` vendors into it, crates.io for the rest), served live; each save
//! answers without any other command; a build error and a rejected version
//! are printed while the old version keeps serving; and `dev` drops into a
//! server that already runs.
//!
//! The scaffold's dependencies are built once per machine into
//! `target/scaffold` (shared by runs, as a real user's target folder is);
//! the first run compiles them for wasm32-wasip2 and takes a minute or two.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Server, repo_root, test_cache_dir, toolhost_bin};
use serde_json::{Value, json};

/// Long enough for a cold build of the scaffold's dependencies.
const FIRST_BUILD: Duration = Duration::from_secs(900);
const REBUILD: Duration = Duration::from_secs(120);

fn scaffold_target() -> PathBuf {
    repo_root().join("target/scaffold")
}

/// `toolhost dev`, its terminal output collected line by line.
pub(crate) struct Dev {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Dev {
    pub(crate) fn start(project: &Path, args: &[&str]) -> Dev {
        Self::start_with_env(project, args, &[])
    }

    /// [`Dev::start`] with more environment variables.
    pub(crate) fn start_with_env(project: &Path, args: &[&str], env: &[(&str, &str)]) -> Dev {
        let mut child = Command::new(toolhost_bin())
            .arg("dev")
            .arg(project)
            .args(args)
            .arg("--cache-dir")
            .arg(test_cache_dir())
            .env("CARGO_TARGET_DIR", scaffold_target())
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting toolhost dev");
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let writer = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                writer.lock().unwrap().push(line);
            }
        });
        Dev { child, lines }
    }

    pub(crate) fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for the `count`-th line containing `needle`; all output since
    /// the start on failure.
    pub(crate) fn wait_for(&self, needle: &str, count: usize, within: Duration) -> String {
        let started = Instant::now();
        loop {
            let found: Vec<String> = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|line| line.contains(needle))
                .cloned()
                .collect();
            if found.len() >= count {
                return found[count - 1].clone();
            }
            assert!(
                started.elapsed() < within,
                "no {needle:?} (#{count}) from toolhost dev within {within:?}; it printed:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn post(base: &str, path: &str, body: &Value) -> Value {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut response = agent
        .post(format!("{base}{path}"))
        .header("Accept", "application/json, text/event-stream")
        .send_json(body)
        .unwrap();
    response.body_mut().read_json().unwrap()
}

/// Rewrites the project's `src/lib.rs` through a temporary file and a
/// rename, as many editors save.
fn save(project: &Path, source: &str) {
    let temp = project.join("src/.lib.rs.swp");
    std::fs::write(&temp, source).unwrap();
    std::fs::rename(&temp, project.join("src/lib.rs")).unwrap();
}

/// The scaffold's tool rewritten into a word counter.
fn word_counter(extra_attribute: &str) -> String {
    format!(
        r#"use toolhost_plugin::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Args {{
    /// The text to count in
    {extra_attribute}
    text: String,
}}

#[derive(Serialize, JsonSchema)]
struct Counts {{
    words: usize,
    chars: usize,
}}

fn word_count(args: Args) -> Result<Counts, ToolError> {{
    Ok(Counts {{
        words: args.text.split_whitespace().count(),
        chars: args.text.chars().count(),
    }})
}}

fn tools() -> Tools {{
    Tools::new().tool(Tool::new("word_count", "Counts words and characters", word_count))
}}

toolhost_plugin::export!(tools);
"#
    )
}

/// `toolhost new word_count --path parent`: the project's folder.
fn new_project(parent: &Path) -> PathBuf {
    let created = Command::new(toolhost_bin())
        .args(["new", "word_count", "--path"])
        .arg(parent)
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    parent.join("word_count")
}

#[test]
fn new_then_dev_serves_each_save_and_says_what_went_wrong() {
    let work = tempfile::tempdir().unwrap();

    // `toolhost new`: a project with one typed tool and its tests.
    let project = new_project(work.path());
    for file in [
        "Cargo.toml",
        ".cargo/config.toml",
        "src/lib.rs",
        "vendor/toolhost-plugin/Cargo.toml",
        "vendor/toolhost-plugin/wit/plugin.wit",
    ] {
        assert!(project.join(file).is_file(), "{file} missing");
    }
    let again = Command::new(toolhost_bin())
        .args(["new", "word_count", "--path"])
        .arg(work.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "an existing folder is kept");

    // Its own tests pass on the machine's native target.
    let tested = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--quiet"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", scaffold_target())
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        tested.status.success(),
        "the scaffold's tests fail:\n{}",
        String::from_utf8_lossy(&tested.stderr)
    );

    // `toolhost dev` with no server running: it builds, serves, and says so.
    let address = free_address();
    let base = format!("http://{address}");
    let served = work.path().join("served");
    let dev = Dev::start(
        &project,
        &["--listen", &address, "--plugins", served.to_str().unwrap()],
    );
    dev.wait_for("live in", 1, FIRST_BUILD);
    let greeting = post(&base, "/tools/word_count", &json!({"name": "Ada"}));
    assert_eq!(
        greeting["structuredContent"],
        json!({"greeting": "Hello, Ada!"}),
        "{greeting}"
    );
    // ... and over MCP, from the same server.
    let listed = post(
        &base,
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(
        listed["result"]["tools"][0]["name"], "word_count",
        "{listed}"
    );
    assert_eq!(
        listed["result"]["tools"][0]["inputSchema"]["properties"]["name"]["description"],
        "Who to greet"
    );

    // A save is live without any other command.
    save(&project, &word_counter(""));
    dev.wait_for("live in", 2, REBUILD);
    let counts = post(
        &base,
        "/tools/word_count",
        &json!({"text": "one two three"}),
    );
    assert_eq!(
        counts["structuredContent"],
        json!({"words": 3, "chars": 13}),
        "{counts}"
    );

    // A compile error: printed, and the last good version keeps serving.
    save(
        &project,
        &word_counter("").replace("args.text.chars()", "args.txt.chars()"),
    );
    dev.wait_for("build failed", 1, REBUILD);
    assert!(dev.output().contains("error[E0609]"), "{}", dev.output());
    let counts = post(&base, "/tools/word_count", &json!({"text": "still here"}));
    assert_eq!(counts["structuredContent"]["words"], 2, "{counts}");

    // A schema mistake (an invalid regex): the host's reason is printed,
    // and the last good version keeps serving.
    save(
        &project,
        &word_counter(r#"#[schemars(regex(pattern = "["))]"#),
    );
    dev.wait_for("rejected", 1, REBUILD);
    let reason = dev.output();
    assert!(
        reason.contains("the previous version still serves"),
        "{reason}"
    );
    assert!(reason.contains("not a valid JSON Schema"), "{reason}");
    let counts = post(&base, "/tools/word_count", &json!({"text": "still here"}));
    assert_eq!(counts["structuredContent"]["words"], 2, "{counts}");
    drop(dev);

    // With a server already running, `dev` drops the component into the
    // folder that server serves; here the project lives inside that folder
    // (as plugins/my_tool does in this repository), and saves still count.
    let folder = tempfile::tempdir().unwrap();
    let server = Server::start(folder.path(), &[]);
    let project = new_project(folder.path());
    let address = server.base.trim_start_matches("http://").to_string();
    let dev = Dev::start(&project, &["--listen", &address]);
    let line = dev.wait_for("serves", 1, REBUILD);
    assert!(
        line.contains(&folder.path().canonicalize().unwrap().display().to_string()),
        "{line}"
    );
    dev.wait_for("live in", 1, FIRST_BUILD);
    assert!(folder.path().join("word_count.wasm").is_file());
    let greeting = server.call("word_count", json!({"name": "Ada"}));
    assert_eq!(
        greeting.json["structuredContent"]["greeting"],
        "Hello, Ada!"
    );
    save(&project, &word_counter(""));
    dev.wait_for("live in", 2, REBUILD);
    let counts = server.call("word_count", json!({"text": "a b"}));
    assert_eq!(
        counts.json["structuredContent"]["words"], 2,
        "{}",
        counts.json
    );
    drop(dev);

    // `--plugins DIR` is the folder built into, even with another server
    // on --listen: dev serves DIR itself, on a free port, and says so.
    let own = tempfile::tempdir().unwrap();
    let dev = Dev::start(
        &project,
        &[
            "--listen",
            &address,
            "--plugins",
            own.path().to_str().unwrap(),
        ],
    );
    let line = dev.wait_for("instead", 1, REBUILD);
    let base = line
        .rsplit_once(" on ")
        .map(|(_, rest)| rest.trim_end_matches(" instead").to_string())
        .unwrap();
    dev.wait_for("live in", 1, FIRST_BUILD);
    assert!(
        own.path().join("word_count.wasm").is_file(),
        "{}",
        dev.output()
    );
    let counts = post(&base, "/tools/word_count", &json!({"text": "x y z"}));
    assert_eq!(counts["structuredContent"]["words"], 3, "{counts}");
}

/// `toolhost new --lang python|js`, the scaffold's own tests, then `toolhost
/// dev`: live, a save is live, a broken save is printed while the last
/// good version serves. The toolchains are the pinned ones (`make
/// toolchains`, which installs them under target/toolchains once).
#[test]
fn python_and_javascript_projects_are_live_with_dev() {
    let made = Command::new("make")
        .args(["-s", "toolchains"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(made.status.success(), "make toolchains: {made:?}");
    let work = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str], &str, &str); 2] = [
        (
            "python",
            "greet_py",
            &["python3", "-m", "unittest"],
            "app.py",
            "def broken(:\n",
        ),
        (
            "js",
            "greet-js",
            &["node", "--test", "test.mjs"],
            "app.js",
            "export const = ;\n",
        ),
    ];
    for (lang, name, test, app, breakage) in cases {
        let created = Command::new(toolhost_bin())
            .args(["new", name, "--lang", lang, "--path"])
            .arg(work.path())
            .output()
            .unwrap();
        assert!(created.status.success(), "{created:?}");
        let project = work.path().join(name);
        assert!(project.join("wit/plugin.wit").is_file());

        let tested = Command::new(test[0])
            .args(&test[1..])
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(
            tested.status.success(),
            "the {lang} scaffold's tests fail:\n{}{}",
            String::from_utf8_lossy(&tested.stdout),
            String::from_utf8_lossy(&tested.stderr)
        );

        let address = free_address();
        let base = format!("http://{address}");
        let served = work.path().join(format!("served-{lang}"));
        let dev = Dev::start(
            &project,
            &["--listen", &address, "--plugins", served.to_str().unwrap()],
        );
        dev.wait_for("live in", 1, REBUILD);
        let greeting = post(&base, &format!("/tools/{name}"), &json!({"name": "Ada"}));
        assert_eq!(
            greeting["structuredContent"],
            json!({"greeting": "Hello, Ada!"}),
            "{lang}: {greeting}"
        );

        // A save is live.
        let source = std::fs::read_to_string(project.join(app)).unwrap();
        let save_app = |text: &str| {
            let temp = project.join(format!(".{app}.swp"));
            std::fs::write(&temp, text).unwrap();
            std::fs::rename(&temp, project.join(app)).unwrap();
        };
        save_app(&source.replace("Hello, ", "Hi, "));
        dev.wait_for("live in", 2, REBUILD);
        let greeting = post(&base, &format!("/tools/{name}"), &json!({"name": "Ada"}));
        assert_eq!(
            greeting["structuredContent"]["greeting"], "Hi, Ada!",
            "{lang}: {greeting}"
        );

        // A broken save: the author's line, and the last good version. (The
        // scaffold imports only what its language's runtime carries: no
        // build, its runtime refuses it.)
        save_app(&format!("{source}\n{breakage}"));
        let refused = dev.wait_for("rejected", 1, REBUILD);
        assert!(
            refused.contains("previous version still serves"),
            "{refused}"
        );
        let greeting = post(&base, &format!("/tools/{name}"), &json!({"name": "Ada"}));
        assert_eq!(
            greeting["structuredContent"]["greeting"],
            "Hi, Ada!",
            "{lang}: {}",
            dev.output()
        );
        let output = dev.output();
        assert!(
            output.contains(&format!("{app}:")) && output.contains("Error"),
            "{lang}: {output}"
        );
        assert!(output.contains("no build"), "{lang}: {output}");
    }
}

/// `toolhost dev word_count.py` with only the `toolhost` binary: no
/// toolchain anywhere, and each save is live.
#[test]
fn a_python_file_is_live_with_dev_and_no_toolchain() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("word_count.py");
    let tool = |greeting: &str| {
        format!(
            "from toolhost_plugin import Tools, tool  # noqa: F401\n\n\n@tool(read_only=True)\n\
             def word_count(text: str) -> str:\n    \"\"\"Counts words.\n\n    Args:\n        \
             text: The text\n    \"\"\"\n    return f\"{greeting} {{len(text.split())}}\"\n"
        )
    };
    std::fs::write(&file, tool("words:")).unwrap();
    let address = free_address();
    let base = format!("http://{address}");
    let served = work.path().join("served");
    let nowhere = work.path().join("no-toolchain");
    let dev = Dev::start_with_env(
        &file,
        &["--listen", &address, "--plugins", served.to_str().unwrap()],
        &[
            ("TOOLHOST_COMPONENTIZE_PY", nowhere.to_str().unwrap()),
            ("PATH", "/usr/bin:/bin"),
        ],
    );
    dev.wait_for("live in", 1, REBUILD);
    assert!(served.join("word_count.py").is_file(), "{}", dev.output());
    let counted = post(&base, "/tools/word_count", &json!({"text": "a b c"}));
    assert_eq!(counted["content"][0]["text"], "words: 3", "{counted}");
    let temp = work.path().join(".word_count.py.swp");
    std::fs::write(&temp, tool("count:")).unwrap();
    std::fs::rename(&temp, &file).unwrap();
    dev.wait_for("live in", 2, REBUILD);
    let counted = post(&base, "/tools/word_count", &json!({"text": "a b"}));
    assert_eq!(counted["content"][0]["text"], "count: 2", "{counted}");
    assert!(dev.output().contains("no build"), "{}", dev.output());

    // An import nothing here carries: said plainly (the module, what is
    // carried, what to do), not a toolchain's error; what served serves on.
    std::fs::write(&temp, format!("import yaml\n{}", tool("x:"))).unwrap();
    std::fs::rename(&temp, &file).unwrap();
    dev.wait_for("toolhost packages add", 1, REBUILD);
    let output = dev.output();
    assert!(
        output.contains("app.py:1: `yaml`") || output.contains(":1: `yaml`"),
        "{output}"
    );
    assert!(!output.contains("AssertionError"), "{output}");
    let counted = post(&base, "/tools/word_count", &json!({"text": "a"}));
    assert_eq!(counted["content"][0]["text"], "count: 1", "{counted}");
}

/// `toolhost dev FOLDER` for a Python tool of more than `app.py`, with only
/// the binary: the folder is served as a tool folder (its own module and
/// data file), and an edit of the module is live again.
#[test]
fn a_python_folder_is_live_with_dev_and_no_toolchain() {
    let work = tempfile::tempdir().unwrap();
    let folder = work.path().join("greeter");
    std::fs::create_dir_all(folder.join("data")).unwrap();
    std::fs::write(
        folder.join("app.py"),
        "import os\n\nimport words\nfrom toolhost_plugin import tool\n\n\n@tool(read_only=True)\n\
         def greet(name: str) -> str:\n    \"\"\"Greets.\n\n    Args:\n        name: Who\n    \"\"\"\n    \
         with open(os.path.join(os.path.dirname(__file__), \"data\", \"end.txt\")) as end:\n        \
         return words.hello(name) + end.read().strip()\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("words.py"),
        "def hello(name):\n    return 'hello ' + name\n",
    )
    .unwrap();
    std::fs::write(folder.join("data/end.txt"), "!\n").unwrap();
    let address = free_address();
    let base = format!("http://{address}");
    let served = work.path().join("served");
    let nowhere = work.path().join("no-toolchain");
    let dev = Dev::start_with_env(
        &folder,
        &["--listen", &address, "--plugins", served.to_str().unwrap()],
        &[
            ("TOOLHOST_COMPONENTIZE_PY", nowhere.to_str().unwrap()),
            ("PATH", "/usr/bin:/bin"),
        ],
    );
    dev.wait_for("live in", 1, REBUILD);
    assert!(served.join("greeter.zip").is_file(), "{}", dev.output());
    let greeted = post(&base, "/tools/greet", &json!({"name": "ada"}));
    assert_eq!(greeted["content"][0]["text"], "hello ada!", "{greeted}");
    let temp = folder.join(".words.py.swp");
    std::fs::write(&temp, "def hello(name):\n    return 'hi ' + name\n").unwrap();
    std::fs::rename(&temp, folder.join("words.py")).unwrap();
    dev.wait_for("live in", 2, REBUILD);
    let greeted = post(&base, "/tools/greet", &json!({"name": "ada"}));
    assert_eq!(greeted["content"][0]["text"], "hi ada!", "{greeted}");
}
