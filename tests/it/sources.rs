//! Python and JavaScript source served by the language runtimes, with no
//! build of its own: a room of thirty publishing Python and thirty
//! JavaScript at once, on a server whose build toolchains are absent, all
//! live and answering while the instructor's calls are answered; a
//! `word_count.py` dropped into the folder and called; an import the
//! runtime does not carry answered with the module, the set and what to
//! do; an exception or syntax error with the author's line; a source
//! replaced by a component and back.

use std::time::Duration;

use serde_json::{Value, json};

use crate::builds::{JS_SHOUT, put_source};
use crate::support::{Server, drop_in, example, plugin_dir, send};

const INSTRUCTOR: &str = "instructor-secret-0123456789";

/// A Python tool named `name` counting words.
fn py_tool(name: &str) -> String {
    format!(
        r#"from dataclasses import dataclass

from toolhost_plugin import Tools, tool  # noqa: F401


@dataclass
class Count:
    words: int


@tool(name="{name}", read_only=True)
def count(text: str) -> Count:
    """Counts the words of a text.

    Args:
        text: The text to count
    """
    return Count(words=len(text.split()))
"#
    )
}

/// A JavaScript tool named `name` saying its text louder.
fn js_tool(name: &str) -> String {
    JS_SHOUT.replace("name: \"shout\"", &format!("name: \"{name}\""))
}

/// A tokens file of an instructor (admin) and `people` publishers
/// (`p0`, `p1`, ...), each secret `person-N-secret-0123456789`.
fn room(dir: &std::path::Path, people: usize) -> std::path::PathBuf {
    let file = dir.join("tokens.toml");
    let mut text =
        format!("[[token]]\nname = \"instructor\"\nsecret = \"{INSTRUCTOR}\"\nrole = \"admin\"\n");
    for person in 0..people {
        text.push_str(&format!(
            "[[token]]\nname = \"p{person}\"\nsecret = \"person-{person}-secret-0123456789\"\nrole = \"publisher\"\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    file
}

fn call_as(server: &Server, token: &str, tool: &str, arguments: Value) -> (u16, Value) {
    crate::support::call_as(server, tool, token, &arguments.to_string())
}

#[test]
fn a_room_publishes_python_and_javascript_at_once_with_no_toolchain() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 30);
    // Full builds on, but their toolchains nowhere: only the runtimes serve.
    let missing = config.path().join("no-such-toolchain");
    let missing = missing.to_str().unwrap();
    let server = Server::start_with_env(
        dir.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--builds",
            "python,js",
        ],
        &[
            ("TOOLHOST_COMPONENTIZE_PY", missing),
            ("TOOLHOST_COMPONENTIZE_QJS", missing),
        ],
    );
    let (status, me) = send(&server, "GET", "/me", Some(INSTRUCTOR), "", b"");
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["builds"], json!(["python", "js", "ts"]), "{me}");
    assert_eq!(me["fullBuilds"], json!([]), "{me}");

    let stop = std::sync::atomic::AtomicBool::new(false);
    let (answers, refused) = std::thread::scope(|s| {
        // The instructor's echo, called throughout.
        let instructor = s.spawn(|| {
            let (mut answered, mut refused) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || answered < 5 {
                let (status, echoed) =
                    call_as(&server, INSTRUCTOR, "echo", json!({ "text": "calm" }));
                if status == 200 {
                    answered += 1;
                } else {
                    refused.push(echoed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (answered, refused)
        });
        let publishes: Vec<_> = (0..30)
            .flat_map(|person| {
                let secret = format!("person-{person}-secret-0123456789");
                let (py, js) = (secret.clone(), secret);
                let server = &server;
                [
                    s.spawn(move || {
                        let id = format!("p{person}/count");
                        put_source(server, &id, &py, "text/x-python", &py_tool("count"))
                    }),
                    s.spawn(move || {
                        let id = format!("p{person}/loud");
                        put_source(server, &id, &js, "text/javascript", &js_tool("loud"))
                    }),
                ]
            })
            .collect();
        for handle in publishes {
            let (status, report) = handle.join().unwrap();
            assert_eq!(status, 201, "{report}");
            assert_eq!(report["build"]["servedBy"], "runtime", "{report}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        instructor.join().unwrap()
    });
    assert!(answers >= 5);
    assert_eq!(
        refused,
        Vec::<Value>::new(),
        "the instructor's calls failed"
    );
    for person in 0..30 {
        let secret = format!("person-{person}-secret-0123456789");
        let (status, counted) = call_as(
            &server,
            &secret,
            &format!("p{person}__count"),
            json!({ "text": "one two three" }),
        );
        assert_eq!(
            (status, &counted["structuredContent"]["words"]),
            (200, &json!(3)),
            "{counted}"
        );
        let (status, shouted) = call_as(
            &server,
            &secret,
            &format!("p{person}__loud"),
            json!({ "text": "hey" }),
        );
        assert_eq!(
            (status, &shouted["content"][0]["text"]),
            (200, &json!("HEY")),
            "{shouted}"
        );
    }
    // What is kept of each: its source, no component.
    let kept = std::fs::read_dir(dir.path().join("p7"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        kept,
        ["count.py", "loud.js"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

#[test]
fn a_source_file_dropped_into_the_folder_is_a_plugin() {
    let dir = plugin_dir(&[]);
    let server = Server::start(dir.path(), &[]);
    let file = dir.path().join("word_count.py.tmp");
    std::fs::write(&file, py_tool("word_count")).unwrap();
    drop_in(&file, dir.path(), "word_count.py");
    server.wait_for("word_count.py to load", |s| {
        s.tool_names().contains(&"word_count".to_string())
    });
    let counted = server.call("word_count", json!({ "text": "a b c d" }));
    assert_eq!(
        counted.json["structuredContent"]["words"], 4,
        "{}",
        counted.json
    );
    let report = server.plugin("word_count").unwrap();
    assert_eq!(report.built_from.as_deref(), Some("python"));

    // A component of the same name counts first; taken away, the source
    // serves again.
    let echo = example("echo");
    drop_in(&echo, dir.path(), "word_count.wasm");
    server.wait_for("the component to serve", |s| {
        s.tool_names().contains(&"echo".to_string())
    });
    assert!(!server.tool_names().contains(&"word_count".to_string()));
    std::fs::remove_file(dir.path().join("word_count.wasm")).unwrap();
    server.wait_for("the source to serve again", |s| {
        s.tool_names().contains(&"word_count".to_string())
    });

    // JavaScript too.
    std::fs::write(dir.path().join(".shout.tmp"), js_tool("shout")).unwrap();
    std::fs::rename(dir.path().join(".shout.tmp"), dir.path().join("shout.js")).unwrap();
    server.wait_for("shout.js to load", |s| {
        s.tool_names().contains(&"shout".to_string())
    });
    let shouted = server.call("shout", json!({ "text": "hi" }));
    assert_eq!(shouted.json["content"][0]["text"], "HI", "{}", shouted.json);
}

#[test]
fn an_import_the_runtime_does_not_carry_is_answered_clearly() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 1);
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let secret = "person-0-secret-0123456789";
    let source = format!("import yaml\n{}", py_tool("count"));
    let (status, refused) = put_source(&server, "p0/db", secret, "text/x-python", &source);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "BUILD_FAILED", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    for said in [
        "app.py:1",
        "`yaml`",
        "standard library",
        "toolhost packages add",
    ] {
        assert!(message.contains(said), "{said:?} not in {message}");
    }
    assert_eq!(refused["error"]["details"]["imports"], json!(["yaml"]));
    assert_eq!(refused["error"]["details"]["line"], 1);
    assert!(
        refused["error"]["details"]["carried"]
            .as_array()
            .unwrap()
            .contains(&json!("statistics"))
    );
    assert!(
        !dir.path().join("p0/db.py").exists(),
        "a refused source was kept"
    );
    // JavaScript: the helper alone.
    let source = format!("import fs from \"node:fs\";\n{}", js_tool("x"));
    let (status, refused) = put_source(&server, "p0/fs", secret, "text/javascript", &source);
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("app.js:1: `node:fs`"),
        "{refused}"
    );
    // Dropped in by hand: refused with the same sentence.
    std::fs::write(
        dir.path().join(".db.tmp"),
        format!("import yaml\n{}", py_tool("c")),
    )
    .unwrap();
    std::fs::rename(dir.path().join(".db.tmp"), dir.path().join("db.py")).unwrap();
    let db = |s: &Server| crate::support::plugin_as(s, "db", Some(INSTRUCTOR));
    server.wait_for("db.py to be refused", |s| {
        db(s).is_some_and(|plugin| plugin.reason.is_some())
    });
    let reason = db(&server).unwrap().reason.unwrap();
    assert!(reason.contains("`yaml`"), "{reason}");
    // A standard module past the ones built in is read from disk, live.
    let source = format!("import sqlite3\nimport mailbox\n{}", py_tool("stdlib"));
    let (status, published) = put_source(&server, "p0/std", secret, "text/x-python", &source);
    assert_eq!(status, 201, "{published}");
}

#[test]
fn a_failing_source_answers_with_its_authors_line_and_what_served_serves_on() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 1);
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let secret = "person-0-secret-0123456789";
    let (status, report) = put_source(&server, "p0/wc", secret, "text/x-python", &py_tool("wc"));
    assert_eq!(status, 201, "{report}");
    let broken = py_tool("wc").replace("return Count(words=len(text.split()))", "return (text");
    let (status, refused) = put_source(&server, "p0/wc", secret, "text/x-python", &broken);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "BUILD_FAILED", "{refused}");
    let line = 1 + broken
        .lines()
        .position(|l| l.contains("return (text"))
        .unwrap();
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("app.py:{line}: SyntaxError")),
        "{refused}"
    );
    assert_eq!(refused["error"]["details"]["line"], line, "{refused}");
    let (status, counted) = call_as(&server, secret, "p0__wc", json!({ "text": "still here" }));
    assert_eq!(
        (status, &counted["structuredContent"]["words"]),
        (200, &json!(2))
    );
    // An exception at import: the line it was raised on, and the traceback
    // with the author's lines.
    let raises = "from toolhost_plugin import Tools, tool  # noqa: F401\n\n\ndef fail():\n    \
        raise ValueError(\"no config here\")\n\n\nfail()\n";
    let (status, refused) = put_source(&server, "p0/raises", secret, "text/x-python", raises);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["details"]["line"], 5, "{refused}");
    let log = refused["error"]["details"]["log"].as_str().unwrap();
    assert!(
        log.contains("raise ValueError") && !log.contains("runtime.py"),
        "{log}"
    );
    // JavaScript: a parse error's line.
    let parse = "import { exportPlugin } from \"./toolhost.js\";\n\nconst x = (;\n\
        export const { tools, resources, prompts, completion } = exportPlugin({ tools: [] });\n";
    let (status, refused) = put_source(&server, "p0/parse", secret, "text/javascript", parse);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["details"]["line"], 3, "{refused}");
    // A source replaced by a component, and the component by a source: one
    // plugin, one file at a time.
    let (status, report) = send(
        &server,
        "PUT",
        "/plugins/p0/wc",
        Some(secret),
        "application/wasm",
        &std::fs::read(example("echo")).unwrap(),
    );
    assert_eq!(status, 200, "{report}");
    assert!(!dir.path().join("p0/wc.py").exists());
    let (status, report) = put_source(&server, "p0/wc", secret, "text/x-python", &py_tool("wc"));
    assert_eq!(status, 200, "{report}");
    assert!(!dir.path().join("p0/wc.wasm").exists());
    let (status, source) = crate::builds::source_of(&server, "p0/wc", secret);
    assert_eq!(status, 200);
    assert_eq!(source, py_tool("wc"));
}

/// A publish's own number (`Toolhost-Publish`, the page's) is checked
/// before the body is read: a bad one is a clear 400 and writes nothing;
/// a good one publishes as before.
#[test]
fn a_bad_publish_number_is_refused_and_writes_nothing() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 1);
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let put = |number: &str| {
        let mut response = agent
            .put(format!("{}/plugins/p0/counted", server.base))
            .header("Authorization", "Bearer person-0-secret-0123456789")
            .header("Content-Type", "text/x-python")
            .header("Toolhost-Publish", number)
            .send(py_tool("counted").as_bytes())
            .unwrap();
        let status = response.status().as_u16();
        let body: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        (status, body)
    };
    for bad in ["a b", "<script>", &"x".repeat(65)] {
        let (status, refused) = put(bad);
        assert_eq!(status, 400, "{bad:?}: {refused}");
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Toolhost-Publish"),
            "{refused}"
        );
        assert!(!dir.path().join("p0/counted.py").exists(), "{bad:?} wrote");
    }
    // Two numbers for one publish: refused too.
    let mut response = agent
        .put(format!("{}/plugins/p0/counted", server.base))
        .header("Authorization", "Bearer person-0-secret-0123456789")
        .header("Content-Type", "text/x-python")
        .header("Toolhost-Publish", "page-1")
        .header("Toolhost-Publish", "page-2")
        .send(py_tool("counted").as_bytes())
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    assert_eq!(response.status().as_u16(), 400, "{text}");
    assert!(text.contains("given once"), "{text}");
    assert!(!dir.path().join("p0/counted.py").exists());
    let (status, published) = put("page-7");
    assert!(status == 201 || status == 200, "{published}");
    assert!(dir.path().join("p0/counted.py").exists());
}

/// A folder of the plugin folder that is a project (a tool's sources, as
/// the repository's `plugins/textpy/` and `plugins/textjs/` are beside the
/// `textpy.wasm` and `textjs.wasm` built from them) serves none of its
/// `.py` or `.js` files: `make serve` on a fresh clone serves only the
/// examples, and is healthy. A person's namespace still serves its source.
#[test]
fn a_project_folder_in_the_plugin_folder_serves_no_source() {
    let dir = plugin_dir(&[&example("echo")]);
    // Beside a component of its name, as `make plugins` leaves them.
    std::fs::copy(example("math"), dir.path().join("textpy.wasm")).unwrap();
    std::fs::create_dir(dir.path().join("textpy")).unwrap();
    std::fs::write(dir.path().join("textpy/app.py"), py_tool("stats")).unwrap();
    // A project of its own (package.json), importing what it builds with.
    std::fs::create_dir(dir.path().join("textjs")).unwrap();
    std::fs::write(dir.path().join("textjs/package.json"), "{}").unwrap();
    std::fs::write(
        dir.path().join("textjs/app.js"),
        "import { tool } from \"../../sdk/js/toolhost.js\";\n",
    )
    .unwrap();
    // A person's namespace serves its source.
    std::fs::create_dir(dir.path().join("ada")).unwrap();
    std::fs::write(dir.path().join("ada/count.py"), py_tool("count")).unwrap();
    let server = Server::start(dir.path(), &[]);
    server.wait_for("ada's source", |server| {
        server.tool_names().contains(&"ada__count".to_string())
    });
    let health = server.get("/health").json;
    assert_eq!(health["status"], "ok", "{health}");
    let ids: Vec<String> = server
        .plugins()
        .plugins
        .iter()
        .map(|p| p.id.clone())
        .collect();
    assert!(
        !ids.iter()
            .any(|id| id.starts_with("textpy/") || id.starts_with("textjs/")),
        "{ids:?}"
    );
    assert!(ids.contains(&"textpy".to_string()), "{ids:?}");
}

/// A fresh server compiles its language runtimes as it starts, in the
/// background: the first source published is served on that code (no
/// compile of its own), as the thirtieth is.
#[test]
fn the_runtimes_are_compiled_before_the_first_source() {
    let dir = plugin_dir(&[]);
    let cache = tempfile::tempdir().unwrap();
    let server = Server::process(dir.path(), &["--cache-dir", cache.path().to_str().unwrap()]);
    crate::support::wait_until(
        "the Python runtime to be compiled ahead",
        Duration::from_secs(120),
        || {
            let log = server.log();
            log.contains("compiled ahead of its first plugin") && log.contains("the python runtime")
        },
    );
    let file = dir.path().join(".first.tmp");
    std::fs::write(&file, py_tool("first")).unwrap();
    std::fs::rename(&file, dir.path().join("first.py")).unwrap();
    server.wait_for("first.py to load", |s| {
        s.tool_names().contains(&"first".to_string())
    });
    let report = server.plugin("first").unwrap();
    assert_eq!(
        report.from_cache,
        Some(true),
        "the first source compiled the runtime again: {report:?}"
    );
}

/// A zip of the files of a tool folder.
fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write;
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, text) in files {
        out.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(text.as_bytes()).unwrap();
    }
    out.finish().unwrap().into_inner()
}

/// A tool that is a folder: `app.py`, a module of its own and a data file,
/// published as a zip, imports the one and reads the other; a zip that
/// reaches outside its folder is refused and writes nothing.
#[test]
fn a_tool_folder_imports_its_own_module_and_reads_its_data() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 1);
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let secret = "person-0-secret-0123456789";
    let app = r#"import os

import helpers
from toolhost_plugin import tool


@tool(name="city")
def city(name: str) -> str:
    """Finds a city.

    Args:
        name: Its name
    """
    here = os.path.join(os.path.dirname(__file__), "data", "cities.csv")
    with open(here) as rows, open("data/cities.csv") as again:
        known = [row.strip() for row in rows]
        assert known == [row.strip() for row in again]
    return helpers.describe(name, name.lower() in known)
"#;
    let zip = zip_of(&[
        ("cities/app.py", app),
        (
            "cities/helpers.py",
            "def describe(name, known):\n    return f\"{name}: {'known' if known else 'unknown'}\"\n",
        ),
        ("cities/data/cities.csv", "paris\nlima\n"),
    ]);
    let put = |id: &str, bytes: &[u8]| {
        send(
            &server,
            "PUT",
            &format!("/plugins/{id}"),
            Some(secret),
            "application/zip",
            bytes,
        )
    };
    let (status, published) = put("p0/cities", &zip);
    assert_eq!(status, 201, "{published}");
    let answer = call_as(&server, secret, "p0__city", json!({ "name": "Lima" }));
    assert_eq!(
        answer.1["content"][0]["text"], "Lima: known",
        "{}",
        answer.1
    );
    assert!(dir.path().join("p0/cities.zip").is_file());

    let (status, refused) = put(
        "p0/evil",
        &zip_of(&[("app.py", app), ("../outside.py", "x = 1\n")]),
    );
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a plain relative path"),
        "{refused}"
    );
    assert!(!dir.path().join("p0/evil.zip").exists());

    // `toolhost push DIR` sends a folder of more than app.py as one, but
    // the helper library (the runtime's serves) and the tests.
    let project = tempfile::tempdir().unwrap();
    let folder = project.path().join("towns");
    std::fs::create_dir_all(folder.join("data")).unwrap();
    std::fs::write(folder.join("app.py"), app.replace("\"city\"", "\"town\"")).unwrap();
    std::fs::write(
        folder.join("helpers.py"),
        "def describe(name, known):\n    return f\"{name}? {known}\"\n",
    )
    .unwrap();
    std::fs::write(folder.join("data/cities.csv"), "oslo\n").unwrap();
    std::fs::write(
        folder.join("toolhost_plugin.py"),
        "raise SystemExit('a stale copy')\n",
    )
    .unwrap();
    let pushed = std::process::Command::new(crate::support::toolhost_bin())
        .arg("push")
        .arg(&folder)
        .env("TOOLHOST_SERVER", &server.base)
        .env("TOOLHOST_TOKEN", secret)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&pushed.stdout).into_owned()
        + &String::from_utf8_lossy(&pushed.stderr);
    assert!(pushed.status.success(), "{said}");
    assert!(said.contains("as a tool folder"), "{said}");
    let answer = call_as(&server, secret, "p0__town", json!({ "name": "Oslo" }));
    assert_eq!(answer.1["content"][0]["text"], "Oslo? True", "{}", answer.1);
}

/// TypeScript: a `.ts` source is served by the JavaScript runtime with its
/// types erased (every line and column kept): it answers, and an error, at
/// erasure or at import, names the author's line of `app.ts`.
#[test]
fn a_typescript_source_is_served_and_its_errors_name_its_line() {
    let dir = plugin_dir(&[]);
    let config = tempfile::tempdir().unwrap();
    let tokens = room(config.path(), 1);
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let secret = "person-0-secret-0123456789";
    let typed = r#"import { tool, exportPlugin } from "./toolhost.js";

interface Args {
  text: string;
  times?: number;
}

type Said = { said: string; length: number };

function repeat<T extends string>(text: T, times: number): string {
  return Array.from({ length: times }, () => text).join(" ");
}

const echo = tool({
  name: "typed_echo",
  description: "Says the text, typed.",
  input: {
    type: "object",
    properties: { text: { type: "string" }, times: { type: "integer" } },
    required: ["text"],
  },
  run: ({ text, times }: Args): Said => {
    const said = repeat(text, times ?? 1) as string;
    return { said, length: said.length! };
  },
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [echo] });
"#;
    let (status, published) = put_source(&server, "p0/typed", secret, "text/typescript", typed);
    assert_eq!(status, 201, "{published}");
    assert!(dir.path().join("p0/typed.ts").is_file());
    let answer = call_as(
        &server,
        secret,
        "p0__typed_echo",
        json!({ "text": "hi", "times": 2 }),
    );
    assert_eq!(
        answer.1["structuredContent"]["said"], "hi hi",
        "{}",
        answer.1
    );

    // An enum cannot be erased: its line and column, and what to write.
    let with_enum = typed.replace("type Said", "enum Mood { Calm }\ntype Said");
    let (status, refused) = put_source(&server, "p0/moody", secret, "text/typescript", &with_enum);
    assert_eq!(status, 422, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("app.ts:8:"), "{message}");
    assert_eq!(refused["error"]["details"]["line"], 8, "{refused}");
    // A throw at import, on the last line of the .ts.
    let throws = format!("{typed}throw new Error(\"not yet\");\n");
    let line = throws.lines().count();
    let (status, refused) = put_source(&server, "p0/throws", secret, "text/typescript", &throws);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["details"]["line"], line, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("app.ts:{line}")),
        "{refused}"
    );
}
