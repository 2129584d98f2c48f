//! The room's packages: `toolhost packages add` resolves pure-Python
//! wheels from PyPI (the real registry) into the plugin folder's store with
//! a lock of names, versions and SHA-256; a package with native code is
//! refused with the reason and changes nothing; Python sources importing
//! what was added (and `zoneinfo` with `tzdata`, and a standard module read
//! from disk) go live and answer right; an import found nowhere is refused
//! at publish with the module and `toolhost packages add`; a package
//! removed takes its sources' liveness with it.

use std::process::Command;

use serde_json::json;

use crate::builds::put_source;
use crate::support::{Server, plugin_dir, python_venv, toolhost_bin};

/// `toolhost packages ARGS --plugins DIR`, with the test environment's
/// Python (a pip that resolves for the runtime's CPython, whatever this
/// machine's is): its exit status and what it printed.
fn packages(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(toolhost_bin())
        .arg("packages")
        .args(args)
        .arg("--plugins")
        .arg(dir)
        .env("TOOLHOST_PYTHON", python_venv().join("python"))
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

const SOURCE: &str = r#"import plistlib
from datetime import datetime
from zoneinfo import ZoneInfo

from bs4 import BeautifulSoup
from dateutil import parser

from toolhost_plugin import tool


@tool(name="read_page")
def read_page(html: str, when: str) -> dict:
    """Reads a page and a date.

    Args:
        html: Some HTML
        when: A date, as people write them
    """
    parsed = parser.parse(when)
    paris = ZoneInfo("Europe/Paris").utcoffset(datetime(2026, 7, 1))
    return {
        "text": BeautifulSoup(html, "html.parser").get_text(),
        "date": parsed.date().isoformat(),
        "paris_hours": paris.total_seconds() / 3600,
        "plist": len(plistlib.dumps({"a": 1})) > 0,
    }
"#;

#[test]
fn packages_an_admin_adds_are_imported_live_and_native_ones_are_refused() {
    let dir = plugin_dir(&[]);
    let (ok, said) = packages(
        dir.path(),
        &["add", "python-dateutil", "beautifulsoup4", "tzdata"],
    );
    assert!(ok, "{said}");
    let lock = std::fs::read_to_string(dir.path().join("_packages.lock")).unwrap();
    for name in ["python-dateutil", "beautifulsoup4", "soupsieve", "tzdata"] {
        assert!(
            lock.contains(&format!("name = \"{name}\"")),
            "{name}: {lock}"
        );
    }
    assert!(lock.contains("sha256 = \""), "{lock}");
    assert!(
        lock.contains("\"bs4\"") && lock.contains("\"dateutil\""),
        "{lock}"
    );

    // Native code: refused with the reason, and nothing changed.
    let (ok, said) = packages(dir.path(), &["add", "pyyaml"]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("pyyaml") && said.contains("native code"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("_packages.lock")).unwrap(),
        lock
    );
    let (ok, listed) = packages(dir.path(), &["list"]);
    assert!(
        ok && listed.contains("beautifulsoup4") && listed.contains("import bs4"),
        "{listed}"
    );

    let tokens = dir.path().join("../tokens-packages.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"ada\"\nsecret = \"ada-secret-0123456789abcdef\"\nrole = \"publisher\"\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--tokens", tokens.to_str().unwrap()]);
    let secret = "ada-secret-0123456789abcdef";
    let (status, published) = put_source(&server, "ada/page", secret, "text/x-python", SOURCE);
    assert_eq!(status, 201, "{published}");
    let answer = crate::support::send(
        &server,
        "POST",
        "/tools/ada__read_page",
        Some(secret),
        "application/json",
        json!({ "html": "<p>Hi <b>there</b></p>", "when": "5 Dec 2026 10:00" })
            .to_string()
            .as_bytes(),
    );
    let data = &answer.1["structuredContent"];
    assert_eq!(data["text"], "Hi there", "{}", answer.1);
    assert_eq!(data["date"], "2026-12-05");
    assert_eq!(data["paris_hours"], 2.0);
    assert_eq!(data["plist"], true);

    // What neither the runtime nor the store has: answered at publish.
    let (status, refused) = put_source(
        &server,
        "ada/yml",
        secret,
        "text/x-python",
        &format!("import yaml\n{SOURCE}"),
    );
    assert_eq!(status, 422, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    for said in ["app.py:1: `yaml`", "toolhost packages add", "bs4"] {
        assert!(message.contains(said), "{said:?} not in {message}");
    }

    // Removed: its sources load again, and the one importing it is refused.
    let (ok, said) = packages(dir.path(), &["remove", "beautifulsoup4"]);
    assert!(ok, "{said}");
    server.wait_for("the page source to be refused", |s| {
        crate::support::plugin_as(s, "ada/page", Some(secret)).is_some_and(|plugin| {
            plugin
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("`bs4`"))
        })
    });
}

const JS_SOURCE: &str = r#"import YAML from "yaml";
import { stringify } from "yaml";
import { tool, exportPlugin } from "./toolhost.js";

const read = tool({
  name: "read_yaml",
  description: "Reads YAML and writes it back.",
  input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run: ({ text }) => {
    const data = YAML.parse(text);
    return { data, again: stringify(data).trim() };
  },
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [read] });
"#;

/// A JavaScript package: `toolhost packages add --lang js yaml` bundles it
/// (npm, no install script run; esbuild), and a source importing it goes
/// live and answers; a TypeScript source shares it.
#[test]
fn a_javascript_package_is_bundled_and_imported_live() {
    let dir = plugin_dir(&[]);
    let (ok, said) = packages(dir.path(), &["add", "--lang", "js", "yaml@2"]);
    assert!(ok, "{said}");
    let lock = std::fs::read_to_string(dir.path().join("_packages.lock")).unwrap();
    assert!(
        lock.contains("[js]") && lock.contains("name = \"yaml\""),
        "{lock}"
    );
    assert!(dir.path().join("_packages/js/yaml.js").is_file());
    let server = Server::start(dir.path(), &[]);
    std::fs::write(dir.path().join(".y.tmp"), JS_SOURCE).unwrap();
    std::fs::rename(dir.path().join(".y.tmp"), dir.path().join("yamlish.js")).unwrap();
    server.wait_for("yamlish.js to load", |s| {
        s.tool_names().contains(&"read_yaml".to_string())
    });
    let answer = server.call("read_yaml", json!({ "text": "a: 1\nb: [x, y]\n" }));
    let data = &answer.json["structuredContent"];
    assert_eq!(
        data["data"],
        json!({ "a": 1, "b": ["x", "y"] }),
        "{}",
        answer.json
    );
    assert_eq!(data["again"], "a: 1\nb:\n  - x\n  - y");
}
