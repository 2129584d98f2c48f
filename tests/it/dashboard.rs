//! The dashboard in a real browser: Debian's `chromium`, headless, driven
//! by puppeteer-core (`tests/clients/dashboard.mjs`) against the real
//! binary. Screenshots go to `target/screenshots/`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Server, example, plugin_dir, repo_root, variant_of};

/// Debian's chromium (`make test` installs it).
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.exists(),
        "chromium is missing: `make test` installs it (apt-get install chromium)"
    );
    path
}

/// Runs the browser script in `mode`; what it saw.
fn browse(mode: &str, server: &Server, extra: &serde_json::Value) -> Value {
    browse_with("dashboard.mjs", mode, server, extra)
}

/// Runs the browser script `name` (of `tests/clients/`) in `mode`; what
/// it saw.
pub(crate) fn browse_with(
    name: &str,
    mode: &str,
    server: &Server,
    extra: &serde_json::Value,
) -> Value {
    let modules = crate::support::node_modules();
    let script = modules.parent().unwrap().join(name);
    std::fs::copy(repo_root().join("tests/clients").join(name), &script).unwrap();
    let shots = repo_root().join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), extra.to_string()).unwrap();
    let output = Command::new(crate::support::node22())
        .arg(&script)
        .arg(mode)
        .arg(&server.base)
        .arg(chromium())
        .arg(&shots)
        .arg(config.path())
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser script printed no report:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert!(
        output.status.success() && seen.get("failed").is_none(),
        "in the browser: {seen:#}\nserver log:\n{}",
        server.log()
    );
    seen
}

fn texts(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_dashboard_lists_tries_and_publishes_in_chromium() {
    let dir = plugin_dir(&[&example("echo")]);
    let payload = r#"<img src=x onerror="window.__xss=1">"#;
    crate::support::components::write_plugin(
        &crate::support::components::plugin_described(payload),
        dir.path(),
        "hostile.wasm",
    );
    let server = Server::start(dir.path(), &[]);
    let files = json!({
        "folder": dir.path(),
        "math": example("math"),
        "conformance": example("conformance"),
        "weather": example("weather"),
        "echoVariant": variant_of(&example("echo"), "dashboard"),
    });
    let seen = browse("open", &server, &files);

    assert!(texts(&seen["listed"]).contains(&"echo"), "{seen}");
    assert_eq!(seen["payloadShownAsText"], payload, "{seen}");
    assert_eq!(seen["imagesInPage"], 0, "{seen}");
    assert_eq!(seen["payloadRan"], false, "{seen}");
    assert_eq!(seen["signInShownOnOpenServer"], false, "{seen}");
    assert!(
        seen["timings"]["dropToListedMs"].as_u64().unwrap() <= 2000,
        "{seen}"
    );
    assert_eq!(texts(&seen["filtered"]), ["divide"], "{seen}");
    let structured = seen["structuredPre"].as_str().unwrap();
    assert!(structured.contains("\"result\": 5"), "{seen}");
    assert_eq!(seen["businessCode"], "DIVISION_BY_ZERO", "{seen}");
    assert_eq!(seen["invalidCode"], "INVALID_ARGUMENTS", "{seen}");
    assert!(
        seen["invalidDetails"]
            .as_str()
            .unwrap()
            .contains(r#"\"b\" is a required property"#),
        "{seen}"
    );
    assert!(
        seen["echo"]
            .as_str()
            .unwrap()
            .contains("hello from chromium"),
        "{seen}"
    );
    // The call's cost, from the answer's `meta`.
    let echo = seen["echo"].as_str().unwrap();
    assert!(
        echo.contains("guest CPU") && echo.contains("fuel") && echo.contains("code"),
        "{seen}"
    );
    let rejected = seen["rejectedRow"].as_str().unwrap();
    assert!(
        rejected.contains("rejected") && rejected.contains("WebAssembly"),
        "{seen}"
    );
    assert!(
        seen["publishedByInput"]
            .as_str()
            .unwrap()
            .contains("Live in"),
        "{seen}"
    );
    assert!(
        seen["publishedByDrop"]
            .as_str()
            .unwrap()
            .contains("weather"),
        "{seen}"
    );
    let refused = seen["refusedDrop"].as_str().unwrap();
    assert!(
        refused.contains("PLUGIN_REJECTED") && refused.contains("echo"),
        "{seen}"
    );
    // Everyone's page keeps the refused upload and its reason in view.
    let rejections = seen["rejections"].as_str().unwrap();
    assert!(
        rejections.contains("echo_again") && rejections.contains("already provided"),
        "{seen}"
    );
    assert!(
        texts(&seen["listedAfter"]).contains(&"get_weather_forecast"),
        "{seen}"
    );
    let reached = texts(&seen["keyboardReached"]);
    assert!(reached.contains(&"filter"), "keyboard: {reached:?}");
    assert!(
        reached.iter().any(|r| r.starts_with("Try ")),
        "keyboard: {reached:?}"
    );
    assert_eq!(seen["unlabelled"], json!([]), "{seen}");
    // The activity panel counts what was called, by outcome.
    let divide = seen["activity"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row[0] == "divide")
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(divide[1], "1", "{seen}");
    // A plugin's own codes count as one outcome (no plugin makes up labels).
    assert_eq!(divide[2], "TOOL_ERROR 1", "{seen}");
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
    // The only refused requests are the ones the test made on purpose.
    let mut refused = texts(&seen["refusedLoads"]);
    refused.sort();
    assert_eq!(
        refused,
        [
            "/plugins/echo_again 422",
            "/tools/add 422",
            "/tools/divide 422"
        ],
        "{seen}"
    );
}

#[test]
fn the_dashboard_shows_each_role_what_it_may_do() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let seen = browse(
        "roles",
        &server,
        &json!({ "caller": crate::publish::DAVE, "publisher": crate::publish::ADA }),
    );
    assert_eq!(seen["publishHiddenSignedOut"], true, "{seen}");
    // Signed out, the page says why it lists nothing, not "no tools".
    assert_eq!(
        seen["toolsSignedOut"], "Sign in to see the tools.",
        "{seen}"
    );
    // Signed in, the token field gives way to "Sign out".
    assert_eq!(seen["tokenFieldShownSignedIn"], false, "{seen}");
    assert!(
        seen["caller"].as_str().unwrap().contains("dave (caller)"),
        "{seen}"
    );
    assert_eq!(seen["publishHiddenForCaller"], true, "{seen}");
    assert!(
        seen["publisher"]
            .as_str()
            .unwrap()
            .contains("ada (publisher)"),
        "{seen}"
    );
    assert_eq!(seen["publishHiddenForPublisher"], false, "{seen}");
    assert!(
        seen["publishWhere"]
            .as_str()
            .unwrap()
            .contains("namespace ada"),
        "{seen}"
    );
    assert_eq!(seen["tokenInSession"], true, "{seen}");
    assert_eq!(seen["tokenInLocal"], false, "{seen}");
    // A 401 from /me is expected while signed out; nothing else.
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
    // Signed out, /me answers 401 (on opening, and after signing out);
    // nothing else is refused.
    assert_eq!(
        texts(&seen["refusedLoads"]),
        ["/me 401", "/me 401"],
        "{seen}"
    );
}

/// The words of a one-line shell command, quotes removed (`'...'` only:
/// the page quotes that way).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// One JSON-RPC exchange over a stdio MCP client's pipes: sends `request`,
/// reads lines until the answer with its id.
fn rpc(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut impl std::io::BufRead,
    request: Value,
) -> Value {
    use std::io::Write;
    writeln!(stdin, "{request}").unwrap();
    stdin.flush().unwrap();
    let id = request["id"].clone();
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the client closed"
        );
        if let Ok(answer) = serde_json::from_str::<Value>(&line)
            && answer["id"] == id
        {
            return answer;
        }
    }
}

#[test]
fn a_publisher_writes_python_and_javascript_tools_in_chromium_and_connects_a_client() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = crate::publish::tokens_file(config.path());
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python,js",
        ],
    );
    let ada = crate::publish::ADA;
    let seen = browse(
        "write",
        &server,
        &json!({ "publisher": ada, "namespace": "ada" }),
    );
    assert_eq!(seen["languages"], json!(["python", "js", "ts"]), "{seen}");
    for (language, file) in [("python", "app.py"), ("js", "app.js")] {
        let failed = seen[format!("{language}Failed")].as_str().unwrap();
        let line = seen[format!("{language}BrokenLine")].as_u64().unwrap();
        assert!(
            failed.contains("BUILD_FAILED") && failed.contains(&format!("{file}:{line}")),
            "{language}: {failed}"
        );
        assert_eq!(
            seen[format!("{language}MarkedLine")],
            line.to_string(),
            "{seen}"
        );
        assert!(
            seen[format!("{language}Marks")].as_u64().unwrap() > 0,
            "{seen}"
        );
        assert!(
            seen[format!("{language}Live")]
                .as_str()
                .unwrap()
                .contains("Live in"),
            "{seen}"
        );
        let tried = seen[format!("{language}Tried")].as_str().unwrap();
        assert!(tried.contains("Hello, Ada!"), "{language}: {tried}");
    }
    assert!(seen["editedHasTool"].as_bool().unwrap(), "{seen}");
    assert_eq!(seen["editedLanguage"], "python", "{seen}");
    assert_eq!(seen["editedName"], "greeter_py", "{seen}");
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");

    // The client panel: this server's URL; the token only after a click,
    // never in the page's URL.
    let url = format!("{}/mcp", server.base);
    assert_eq!(seen["mcpUrl"], url, "{seen}");
    assert!(
        !seen["headerBefore"].as_str().unwrap().contains(ada),
        "{seen}"
    );
    assert!(!seen["snippetsBefore"].to_string().contains(ada), "{seen}");
    assert_eq!(seen["headerShown"], format!("Authorization: Bearer {ada}"));
    assert!(!seen["pageUrl"].as_str().unwrap().contains(ada), "{seen}");
    let snippet = |id: &str| -> String {
        seen["snippets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no {id} snippet: {seen}"))["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Each configuration in the format its client documents:
    // VS Code (code.visualstudio.com/docs/copilot/customization/mcp-servers):
    // `servers.NAME` with `type: "http"`, `url`, `headers`; a secret from
    // `inputs` (`promptString`, `password: true`) as `${input:ID}`.
    let vscode: Value = serde_json::from_str(&snippet("vscode")).unwrap();
    let server_entry = &vscode["servers"]["toolhost"];
    assert_eq!(server_entry["type"], "http");
    assert_eq!(server_entry["url"], url);
    assert_eq!(
        server_entry["headers"]["Authorization"],
        "Bearer ${input:toolhost-token}"
    );
    assert_eq!(vscode["inputs"][0]["type"], "promptString");
    assert_eq!(vscode["inputs"][0]["id"], "toolhost-token");
    assert_eq!(vscode["inputs"][0]["password"], true);
    // Cursor (cursor.com/docs/context/mcp): `mcpServers.NAME` with `url`
    // and `headers`.
    let cursor: Value = serde_json::from_str(&snippet("cursor")).unwrap();
    assert_eq!(cursor["mcpServers"]["toolhost"]["url"], url);
    assert_eq!(
        cursor["mcpServers"]["toolhost"]["headers"]["Authorization"],
        format!("Bearer {ada}")
    );
    // Claude Desktop (modelcontextprotocol.io's local-server guide, and
    // mcp-remote's README for the header): `mcpServers.NAME` with
    // `command`, `args`, `env`. Run as Claude Desktop would run it.
    let claude: Value = serde_json::from_str(&snippet("claude")).unwrap();
    let entry = &claude["mcpServers"]["toolhost"];
    assert_eq!(entry["command"], "npx");
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "mcp-remote@0.15.1", "{entry}");
    let home = tempfile::tempdir().unwrap();
    let mut remote = Command::new(crate::support::node22())
        .arg(crate::support::node_modules().join("mcp-remote/dist/proxy.js"))
        .args(&args[1..])
        .envs(
            entry["env"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(key, value)| (key.clone(), value.as_str().unwrap().to_string())),
        )
        .env("HOME", home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = remote.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(remote.stdout.take().unwrap());
    let initialized = rpc(
        &mut stdin,
        &mut stdout,
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-desktop-like","version":"1"}}}),
    );
    assert!(initialized["result"].is_object(), "{initialized}");
    {
        use std::io::Write;
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
    }
    let called = rpc(
        &mut stdin,
        &mut stdout,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ada__greeter_js","arguments":{"name":"Ada"}}}),
    );
    assert!(
        called["result"].to_string().contains("Hello, Ada!"),
        "{called}"
    );
    let _ = remote.kill();
    let _ = remote.wait();
    // The Inspector's command line, as the page gives it, calls the
    // Python tool.
    let words = shell_words(&snippet("inspector"));
    assert_eq!(
        &words[..3],
        ["npx", "@modelcontextprotocol/inspector@2.12.0", "--cli"],
        "{words:?}"
    );
    let mut words = words[3..].to_vec();
    let method = words.iter().position(|word| word == "--method").unwrap();
    words.truncate(method);
    let output = Command::new(crate::support::node22())
        .arg(
            crate::support::node_modules()
                .join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        )
        .arg("--cli")
        .args(&words)
        .args([
            "--method",
            "tools/call",
            "--tool-name",
            "ada__greeter_py",
            "--tool-arg",
            "name=Ada",
        ])
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("Hello, Ada!"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // curl, as given.
    let words = shell_words(&snippet("curl"));
    let output = Command::new(&words[0]).args(&words[1..]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("ada__greeter_py"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // Each SDK's program, saved as its first line says and run with the
    // SDK it names installed: it lists the person's tools.
    let python = snippet("python-sdk");
    assert!(
        python.starts_with("# toolhost_client.py: pip install \"mcp==2.3.0\""),
        "{python}"
    );
    let program = home.path().join("toolhost_client.py");
    std::fs::write(&program, &python).unwrap();
    let output = Command::new(crate::support::python_sdk2_venv().join("python"))
        .arg(&program)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && listed.lines().any(|line| line == "ada__greeter_py"),
        "{listed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let typescript = snippet("typescript-sdk");
    assert!(
        typescript
            .starts_with("// toolhost_client.mjs: npm install @modelcontextprotocol/sdk@1.32.2"),
        "{typescript}"
    );
    // Beside the installed SDK, where `import` finds it.
    let modules = crate::support::node_modules();
    let program = modules.parent().unwrap().join("toolhost_client.mjs");
    std::fs::write(&program, &typescript).unwrap();
    let output = Command::new(crate::support::node22())
        .arg(&program)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && listed.lines().any(|line| line == "ada__greeter_js"),
        "{listed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The editor's bundle in the binary is what its pinned packages build:
/// `ui/editor/` rebuilt from scratch (npm ci, esbuild) gives the committed
/// `ui/vendor/codemirror.js` byte for byte.
#[test]
fn the_editor_bundle_is_built_from_its_pinned_packages() {
    assert_bundle_is_built("editor", "codemirror.js", "ui-editor");
}

/// The same for the bridge that hosts a tool's view: `ui/apps/` gives
/// `ui/vendor/app-bridge.js`.
#[test]
fn the_app_bridge_bundle_is_built_from_its_pinned_packages() {
    assert_bundle_is_built("apps", "app-bridge.js", "ui-apps");
}

fn assert_bundle_is_built(folder: &str, bundle: &str, target: &str) {
    let work = tempfile::tempdir().unwrap();
    let packages = work.path().join(folder);
    std::fs::create_dir_all(&packages).unwrap();
    std::fs::create_dir_all(work.path().join("vendor")).unwrap();
    let source = repo_root().join("host/ui").join(folder);
    for file in ["package.json", "package-lock.json", "entry.js"] {
        std::fs::copy(source.join(file), packages.join(file)).unwrap();
    }
    for args in [
        &["ci", "--no-audit", "--no-fund", "--loglevel=error"][..],
        &["run", "build"][..],
    ] {
        let status = Command::new("npm")
            .args(args)
            .current_dir(&packages)
            .status()
            .unwrap();
        assert!(status.success(), "npm {args:?}");
    }
    let built = std::fs::read(work.path().join("vendor").join(bundle)).unwrap();
    let committed = std::fs::read(repo_root().join("host/ui/vendor").join(bundle)).unwrap();
    assert!(
        built == committed,
        "host/ui/vendor/{bundle} is not what host/ui/{folder} builds: run `make {target}`"
    );
}

/// Tool sets on the page: a caller sees their set and nothing else; an
/// admin sees a version held for approval, with what changed, and
/// approves it with the page's button.
#[test]
fn the_page_shows_each_person_their_set_and_an_admin_approves_there() {
    let dir = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    const ROOT: &str = "instructor-secret-0123456789";
    const ADA: &str = "ada-secret-0123456789";
    const CAROL: &str = "carol-secret-0123456789";
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nname = \"instructor\"\nsecret = \"{ROOT}\"\nrole = \"admin\"\n\
             [[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n\
             tools = [\"instructor/*\", \"{{self}}/*\"]\n\
             [[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"caller\"\n\
             tools = [\"instructor/*\"]\n"
        ),
    )
    .unwrap();
    let server = Server::start(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--require-approval"],
    );
    let echo = std::fs::read(example("echo")).unwrap();
    let put = |path: &str, token: &str| {
        crate::support::send(&server, "PUT", path, Some(token), "application/wasm", &echo).0
    };
    assert_eq!(put("/plugins/instructor/echo", ROOT), 202);
    let approve = crate::support::send(
        &server,
        "POST",
        "/plugins/instructor/echo/approve",
        Some(ROOT),
        "application/json",
        b"",
    );
    assert_eq!(approve.0, 200, "{}", approve.1);
    assert_eq!(put("/plugins/ada/echo", ADA), 202);
    let seen = browse(
        "sets",
        &server,
        &json!({
            "caller": CAROL,
            "admin": ROOT,
            "callerSees": "instructor__echo",
            "held": "ada/echo",
            "approvedTool": "ada__echo",
        }),
    );
    assert_eq!(texts(&seen["callerTools"]), ["instructor__echo"], "{seen}");
    assert_eq!(texts(&seen["callerPlugins"]), ["instructor/echo"], "{seen}");
    let changes = seen["heldChanges"].as_str().unwrap();
    assert!(changes.contains("added tool ada__echo"), "{seen}");
    // What the added tool says is shown before it is approved.
    assert!(changes.contains("Answers with the text"), "{seen}");
    assert_eq!(
        texts(&seen["adminTools"]),
        ["ada__echo", "instructor__echo"],
        "{seen}"
    );
}

/// A Python source that needs a full build (it imports `ftplib`, which the
/// runtime does not carry) and takes a while to build (it sleeps at build
/// time, where componentize-py runs it), answering with `who`.
pub(crate) fn slow_source(who: &str) -> String {
    format!(
        r#"import ftplib  # noqa: F401
import time
from dataclasses import dataclass

from toolhost_plugin import Tools, tool  # noqa: F401

time.sleep(3)


@dataclass
class Said:
    said: str


@tool(name="slow", read_only=True)
def slow(text: str) -> Said:
    """Says who built it.

    Args:
        text: Anything
    """
    return Said(said="{who}: " + text)
"#
    )
}

/// A room on the page: an instructor and three attendees on a server that
/// builds one source at a time. One save is one publish (ada presses
/// Ctrl-S five times: five PUTs, and the fifth's outcome is shown); each
/// attendee's status moves only forward and is cleared at the end; the
/// instructor's "Now" shows every queued build with its place and the
/// header counts them; an attendee sees her own place; nothing is written
/// to the console; a typed docstring keeps three quotes.
#[test]
fn a_room_sees_one_publish_a_save_and_the_queue_in_chromium() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    let secrets = [
        ("instructor", "instructor-secret-0123456789"),
        ("ada", "ada-secret-0123456789abcdef"),
        ("grace", "grace-secret-0123456789abcd"),
        ("lin", "lin-secret-0123456789abcdefg"),
    ];
    let mut file = String::from(
        "[[group]]\nname = \"room\"\ntools = [\"*\", \"instructor/*\", \"{self}/*\"]\n",
    );
    for (name, secret) in secrets {
        let role = if name == "instructor" {
            "\"admin\"\n"
        } else {
            "\"publisher\"\ntools = [\"@room\"]\n"
        };
        file.push_str(&format!(
            "[[token]]\nname = \"{name}\"\nsecret = \"{secret}\"\nrole = {role}"
        ));
    }
    std::fs::write(&tokens, file).unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python",
            "--max-builds",
            "1",
        ],
    );
    let seen = browse(
        "room",
        &server,
        &json!({
            "tokens": secrets.iter().map(|(name, secret)| (name.to_string(), json!(secret))).collect::<serde_json::Map<_, _>>(),
            "sources": { "ada": slow_source("ada"), "grace": slow_source("grace"), "lin": slow_source("lin") },
        }),
    );
    // Sign-in says what the person really sees.
    let who = seen["adaWho"].as_str().unwrap();
    assert!(
        who.contains("the server's own tools, instructor's tools and your own tools"),
        "{who}"
    );
    // One PUT a save: five for ada, one for each of the others.
    assert_eq!(
        seen["puts"],
        json!({"instructor": 0, "ada": 5, "grace": 1, "lin": 1}),
        "{seen}"
    );
    // The outcome shown is the newest publish's, and it is live.
    assert_eq!(seen["adaResultPublish"], "5", "{seen}");
    for person in ["ada", "grace", "lin"] {
        let result = seen[format!("{person}Result")].as_str().unwrap();
        assert!(
            result.contains("Live in") && result.contains("built in"),
            "{person}: {result}"
        );
        assert_eq!(
            seen[format!("{person}StatusAfter")],
            "",
            "{person}: the status is cleared"
        );
        // After the last "Publishing", the stages only move forward.
        let said: Vec<&str> = texts(&seen[format!("{person}Said")]);
        let last = said
            .iter()
            .rposition(|text| text.starts_with("Publishing"))
            .unwrap_or_else(|| panic!("{person}: {said:?}"));
        let rank = |text: &str| {
            ["Publishing", "Queued", "Building", "Built"]
                .iter()
                .position(|stage| text.starts_with(stage))
        };
        let ranks: Vec<usize> = said[last..].iter().filter_map(|text| rank(text)).collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{person}: {said:?}");
        assert!(
            ranks.contains(&2) || ranks.contains(&3),
            "{person} saw the build: {said:?}"
        );
    }
    // The instructor's Now: the three that waited, each with its place.
    let now = seen["instructorNow"].as_array().unwrap();
    let queued: Vec<&Value> = now
        .iter()
        .filter(|row| row["outcome"] == "queued")
        .collect();
    assert_eq!(queued.len(), 3, "{now:?}");
    for (place, row) in queued.iter().enumerate() {
        let text = row["text"].as_str().unwrap();
        let expected = if place == 0 {
            "next of 3".to_string()
        } else {
            format!("place {} of 3", place + 1)
        };
        assert!(text.contains(&expected), "{text}");
    }
    assert!(
        seen["instructorHeader"]
            .as_str()
            .unwrap()
            .contains("3 waiting"),
        "{seen}"
    );
    // Lin sees her own place, and nobody else's row.
    let lin_rows = seen["linNow"].as_array().unwrap();
    assert!(
        lin_rows
            .iter()
            .all(|row| row["plugin"].as_str().unwrap().starts_with("lin/")
                || !matches!(row["outcome"].as_str(), Some("queued" | "building"))),
        "{lin_rows:?}"
    );
    assert!(
        lin_rows.iter().any(
            |row| row["plugin"] == "lin/slow" && row["text"].as_str().unwrap().contains("of 3")
        ),
        "{lin_rows:?}"
    );
    assert!(
        seen["linStatus"].as_str().unwrap().contains("in line"),
        "{seen}"
    );
    // Afterwards: every plugin live, one row each, nothing waits.
    let after = seen["instructorAfter"].as_array().unwrap();
    for plugin in ["ada/slow", "grace/slow", "lin/slow"] {
        let rows: Vec<&Value> = after.iter().filter(|row| row["plugin"] == plugin).collect();
        assert_eq!(rows.len(), 1, "{after:?}");
        assert_eq!(rows[0]["outcome"], "live", "{after:?}");
    }
    assert_eq!(seen["instructorHeaderAfter"], "", "{seen}");
    assert_eq!(seen["typedDocstring"], true, "{seen}");
    assert_eq!(seen["consoleErrors"], json!([]), "{seen}");
    // The only answers refused: the sign-in pages' first look (no token
    // yet), and ada's saves a newer one replaced.
    assert!(
        texts(&seen["refusedLoads"])
            .iter()
            .all(|load| *load == "/me 401" || *load == "/plugins/ada/slow 409"),
        "{seen}"
    );
    // The Now row is ada's newest publish: the build time her page showed.
    let built_in = |text: &str| -> String {
        let at = text.find("built in ").unwrap_or_else(|| panic!("{text}")) + "built in ".len();
        text[at..].split(' ').next().unwrap().to_string()
    };
    let ada_row = after
        .iter()
        .find(|row| row["plugin"] == "ada/slow")
        .unwrap();
    assert_eq!(
        built_in(ada_row["text"].as_str().unwrap()),
        built_in(seen["adaResult"].as_str().unwrap()),
        "{ada_row}"
    );
}
