//! `toolhost tokens` through the real binary: the room it writes is one a
//! server takes as it is. The instructor's secret is printed and never
//! stored; each attendee's token is on the sheet; with the server running,
//! an attendee sees the top level, the instructor's tools and their own,
//! and nobody else's. A second run without `--force`, and a bad name,
//! write nothing.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::publish::put;
use crate::support::{Server, example, plugin_dir, send, toolhost_bin, variant_of};

fn tokens(args: &[&str]) -> Output {
    Command::new(toolhost_bin())
        .arg("tokens")
        .args(args)
        .output()
        .expect("running toolhost tokens")
}

fn said(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The names of the tools `token` lists over REST.
fn tools_of(server: &Server, token: &str) -> Vec<String> {
    let (status, tools) = send(server, "GET", "/tools", Some(token), "", b"");
    assert_eq!(status, 200, "{tools}");
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {tools}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every file in `dir` with its bytes.
fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn toolhost_tokens_writes_a_room_that_serves() {
    let room = tempfile::tempdir().unwrap();
    let out = room.path().join("tokens.toml");
    let sheet = room.path().join("sheet.html");
    let (out_arg, sheet_arg) = (out.to_str().unwrap(), sheet.to_str().unwrap());
    let args = [
        "--names",
        "ada,grace",
        "--url",
        "http://127.0.0.1:1",
        "--out",
        out_arg,
        "--sheet",
        sheet_arg,
    ];

    // 1. The files, and the instructor's secret printed once.
    let made = tokens(&args);
    assert_eq!(made.status.code(), Some(0), "{}", said(&made));
    let stdout = String::from_utf8(made.stdout.clone()).unwrap();
    let marker = "instructor token (shown once, stored hashed): ";
    let instructor = stdout
        .lines()
        .find_map(|line| line.strip_prefix(marker))
        .unwrap_or_else(|| panic!("no instructor token printed: {}", said(&made)))
        .trim()
        .to_string();
    assert!(instructor.len() >= 40, "{instructor:?}");
    assert!(
        stdout.contains(&format!("--tokens {out_arg}")) && stdout.contains("--listen 0.0.0.0:1"),
        "the serve command: {stdout}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let html = std::fs::read_to_string(&sheet).unwrap();
    assert!(
        !text.contains(&instructor),
        "the file holds no instructor secret: {text}"
    );
    assert!(
        !html.contains(&instructor),
        "the instructor is not on the sheet"
    );
    #[cfg(unix)]
    for path in [&out, &sheet] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    let parsed: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let people = parsed["token"].as_array().unwrap();
    let secret_of = |name: &str| -> String {
        let person = people
            .iter()
            .find(|person| person["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        person["secret"].as_str().unwrap().to_string()
    };
    let (ada, grace) = (secret_of("ada"), secret_of("grace"));
    assert_ne!(ada, grace);
    for (name, secret) in [("ada", &ada), ("grace", &grace)] {
        assert!(
            html.contains(secret.as_str()),
            "{name}'s token is on the sheet"
        );
        assert!(
            html.contains(&format!("TOOLHOST_TOKEN={secret}")),
            "{name}'s terminal line"
        );
    }
    assert!(
        html.contains("http://127.0.0.1:1/mcp"),
        "the MCP URL: {html}"
    );
    assert_eq!(html.matches("class=\"card\"").count(), 2, "one card each");

    // 2. A server on that file, with a top-level plugin.
    let plugins = plugin_dir(&[&example("echo")]);
    let server = Server::start(plugins.path(), &["--tokens", out_arg]);

    // 3. Each publishes into their own namespace.
    let (status, report) = put(
        &server,
        "/plugins/instructor/numbers",
        Some(&instructor),
        &example("math"),
    );
    assert_eq!(status, 201, "the instructor publishes: {report}");
    let instructors_tools: Vec<String> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool.as_str().unwrap().to_string())
        .collect();
    assert!(
        !instructors_tools.is_empty()
            && instructors_tools
                .iter()
                .all(|t| t.starts_with("instructor__")),
        "{report}"
    );
    for (name, secret) in [("ada", &ada), ("grace", &grace)] {
        let wasm = variant_of(&example("echo"), &format!("tokens-cmd-{name}"));
        let (status, report) = put(
            &server,
            &format!("/plugins/{name}/word_count"),
            Some(secret),
            &wasm,
        );
        assert_eq!(status, 201, "{name} publishes: {report}");
    }
    // The top level is the admin's: seeing it is not publishing there.
    let (status, report) = put(&server, "/plugins/mine", Some(&ada), &example("echo"));
    assert_eq!(status, 403, "{report}");

    // 4. What each one sees.
    let seen = tools_of(&server, &ada);
    assert!(
        seen.contains(&"echo".to_string()),
        "the top level: {seen:?}"
    );
    for tool in &instructors_tools {
        assert!(seen.contains(tool), "the instructor's {tool}: {seen:?}");
    }
    assert!(seen.contains(&"ada__echo".to_string()), "her own: {seen:?}");
    assert!(
        !seen.iter().any(|tool| tool.starts_with("grace__")),
        "not grace's: {seen:?}"
    );
    let graces = tools_of(&server, &grace);
    assert!(
        graces.contains(&"grace__echo".to_string()) && !graces.contains(&"ada__echo".to_string()),
        "{graces:?}"
    );
    let everything = tools_of(&server, &instructor);
    for tool in ["echo", "ada__echo", "grace__echo"] {
        assert!(
            everything.contains(&tool.to_string()),
            "the admin sees {tool}"
        );
    }
    let (status, me) = send(&server, "GET", "/me", Some(&ada), "", b"");
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        (me["role"].as_str(), me["namespace"].as_str()),
        (Some("publisher"), Some("ada")),
        "{me}"
    );
    let (_, me) = send(&server, "GET", "/me", Some(&instructor), "", b"");
    assert_eq!(me["role"], Value::from("admin"), "{me}");
    drop(server);

    // 5. Again without --force: refused, nothing changed.
    let before = files_in(room.path());
    let again = tokens(&args);
    assert_eq!(again.status.code(), Some(2), "{}", said(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("--force"),
        "{}",
        said(&again)
    );
    assert_eq!(files_in(room.path()), before, "the files are as they were");

    // A bad name: refused by name, nothing written.
    let empty = tempfile::tempdir().unwrap();
    let bad = tokens(&[
        "--names",
        "ada,bad name",
        "--out",
        empty.path().join("tokens.toml").to_str().unwrap(),
        "--sheet",
        empty.path().join("sheet.html").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", said(&bad));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("\"bad name\""),
        "{}",
        said(&bad)
    );
    assert!(bad.stdout.is_empty(), "{}", said(&bad));
    assert!(files_in(empty.path()).is_empty(), "nothing written");

    // With --force, a new room replaces the old one.
    let forced = tokens(&[&args[..], &["--force"]].concat());
    assert_eq!(forced.status.code(), Some(0), "{}", said(&forced));
    let replaced = std::fs::read_to_string(&out).unwrap();
    assert_ne!(replaced, text, "new secrets");
    assert!(!replaced.contains(&ada));
    assert_eq!(files_in(room.path()).len(), 2, "no temporary file left");
}

/// README's "Run a workshop", as written: its `toolhost tokens` line run
/// in a fresh folder, its `toolhost serve` line's flags served (on a free
/// loopback port rather than 0.0.0.0:8000) over `plugins/` with an example
/// at its top level, as `make serve` leaves it; the instructor publishes
/// with the push line it gives. An attendee's token from the file lists
/// the top level's tools, the instructor's and their own.
#[test]
fn readmes_workshop_section_as_written_gives_attendees_the_instructors_tools() {
    let readme = std::fs::read_to_string(crate::support::repo_root().join("README.md")).unwrap();
    let section = &readme[readme
        .find("## Run a workshop")
        .expect("README runs a workshop")..];
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a shell block");
    let lines: Vec<&str> = block
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let words = |line: &str| -> Vec<String> {
        line.split('#')
            .next()
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let made_by = words(lines[0]);
    let served_by = words(lines[1]);
    assert_eq!(&made_by[..2], ["toolhost", "tokens"], "{block}");
    assert_eq!(&served_by[..2], ["toolhost", "serve"], "{block}");

    // The room, in a fresh folder, as the line says.
    let room = tempfile::tempdir().unwrap();
    let made = Command::new(toolhost_bin())
        .args(&made_by[1..])
        .current_dir(room.path())
        .output()
        .unwrap();
    assert_eq!(made.status.code(), Some(0), "{}", said(&made));
    let stdout = String::from_utf8(made.stdout.clone()).unwrap();
    let instructor = stdout
        .lines()
        .find_map(|line| line.split_once("(shown once, stored hashed): "))
        .map(|(_, secret)| secret.trim().to_string())
        .unwrap_or_else(|| panic!("{}", said(&made)));
    let text = std::fs::read_to_string(room.path().join("tokens.toml")).unwrap();
    let parsed: toml::Table = text.parse().unwrap();
    let people = parsed["token"].as_array().unwrap();
    assert_eq!(people.len(), 31, "thirty attendees and the instructor");
    let secret_of = |name: &str| -> String {
        people
            .iter()
            .find(|person| person["name"].as_str() == Some(name))
            .and_then(|person| person["secret"].as_str())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    let (first, second) = (secret_of("attendee01"), secret_of("attendee02"));

    // The server, with the line's flags; `tokens.toml` is the room's.
    let mut flags: Vec<String> = Vec::new();
    let mut given = served_by[2..].iter();
    while let Some(flag) = given.next() {
        let value = || given.clone().next().cloned();
        match flag.as_str() {
            "--listen" => {
                given.next();
            }
            "--tokens" => {
                let file = value().unwrap();
                given.next();
                flags.push(flag.clone());
                flags.push(room.path().join(file).display().to_string());
            }
            _ => flags.push(flag.clone()),
        }
    }
    let plugins = plugin_dir(&[&example("echo")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start(plugins.path(), &flags);

    // The instructor's tool, published with README's push line.
    let pushed = Command::new(toolhost_bin())
        .args(["push", example("math").to_str().unwrap()])
        .env("TOOLHOST_SERVER", &server.base)
        .env("TOOLHOST_TOKEN", &instructor)
        .output()
        .unwrap();
    assert_eq!(pushed.status.code(), Some(0), "{}", said(&pushed));
    // An attendee's own, and another's.
    for (name, secret) in [("attendee01", &first), ("attendee02", &second)] {
        let wasm = variant_of(&example("echo"), &format!("readme-room-{name}"));
        let (status, report) = put(
            &server,
            &format!("/plugins/{name}/word_count"),
            Some(secret),
            &wasm,
        );
        assert_eq!(status, 201, "{report}");
    }
    let seen = tools_of(&server, &first);
    assert!(
        seen.contains(&"echo".to_string()),
        "the top level: {seen:?}"
    );
    assert!(
        seen.iter().any(|tool| tool.starts_with("instructor__")),
        "the instructor's: {seen:?}"
    );
    assert!(
        seen.contains(&"attendee01__echo".to_string()),
        "their own: {seen:?}"
    );
    assert!(
        !seen.iter().any(|tool| tool.starts_with("attendee02__")),
        "not another's: {seen:?}"
    );
    // Nothing is out of anyone's sight: no warning, nothing for the page.
    let (status, me) = send(&server, "GET", "/me", Some(&instructor), "", b"");
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["unseenTopLevel"], serde_json::json!([]), "{me}");
}

/// A room whose group leaves the top level out: the instructor is told,
/// by name of plugin and people, in the start-up log and on their page
/// (GET /me); an attendee is not.
#[test]
fn a_top_level_plugin_outside_the_rooms_set_is_pointed_out() {
    let room = tempfile::tempdir().unwrap();
    let tokens = room.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[group]]\nname = \"room\"\ntools = [\"instructor/*\", \"{self}/*\"]\n\
         [[token]]\nname = \"instructor\"\nsecret = \"instructor-secret-0123456789\"\nrole = \"admin\"\n\
         [[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789abcdef\"\nrole = \"publisher\"\ntools = [\"@room\"]\n",
    )
    .unwrap();
    let plugins = plugin_dir(&[&example("echo")]);
    let server = Server::process(plugins.path(), &["--tokens", tokens.to_str().unwrap()]);
    server.wait_for("the start-up warning", |server| {
        server
            .log()
            .contains("top-level plugin echo is outside the tool set of one person (e.g. ada)")
    });
    let (status, me) = send(
        &server,
        "GET",
        "/me",
        Some("instructor-secret-0123456789"),
        "",
        b"",
    );
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        me["unseenTopLevel"],
        serde_json::json!([{ "plugin": "echo", "people": ["ada"] }]),
        "{me}"
    );
    let (_, me) = send(
        &server,
        "GET",
        "/me",
        Some("ada-secret-0123456789abcdef"),
        "",
        b"",
    );
    assert!(me.get("unseenTopLevel").is_none(), "{me}");
    assert_eq!(
        me["tools"],
        serde_json::json!(["ada/*", "instructor/*"]),
        "{me}"
    );
}
