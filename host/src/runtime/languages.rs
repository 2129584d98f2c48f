//! The language runtimes: one component per language that runs a source
//! file as a plugin, so that a Python or JavaScript tool needs no build of
//! its own. Each is built once, with the pinned toolchains, by `make
//! runtimes` (`sdk/python/runtime/`, `sdk/js/runtime/`): CPython with the
//! helper library and a stated set of standard-library modules already
//! imported ([`SourceLanguage::modules`]), and QuickJS with the helper
//! library. The binary embeds the ones there were when it was built
//! (`build.rs`); `TOOLHOST_PYTHON_RUNTIME` and `TOOLHOST_JS_RUNTIME` name
//! others. A plugin that is a source file is that component with the file
//! in its grants, which each instance reads through the `source` import.
//!
//! What a source imports is read here too ([`imports`]): a module outside
//! the runtime's set is not in the component, and is answered as such
//! before anything runs.

use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A language whose source files are plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceLanguage {
    Python,
    JavaScript,
}

/// A runtime component's bytes and their SHA-256 (its compile key). The
/// bytes built into the binary are never copied, and read only to compile
/// them afresh: a server whose cache has them compiled never reads them.
pub struct RuntimeComponent {
    pub(crate) wasm: std::borrow::Cow<'static, [u8]>,
    pub(crate) hash: String,
}

/// Why a language's runtime component is not there (read once, and kept:
/// cloned to every caller).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoRuntime {
    /// The environment names a file that cannot be read.
    #[error("{variable}={file}: {source}")]
    Unreadable {
        variable: &'static str,
        file: String,
        source: Arc<std::io::Error>,
    },
    /// None is embedded, and `make runtimes` left none in the repository.
    #[error(
        "this toolhost was built without its {language} runtime: run `make runtimes` in the \
         toolhost repository and build it again, or set {variable}"
    )]
    NotBuilt {
        language: &'static str,
        variable: &'static str,
    },
}

/// The Python runtime's stated standard-library modules, one a line.
const PYTHON_MODULES: &str = include_str!("../../../sdk/python/runtime/modules.txt");

const EMBEDDED_PYTHON: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/python-runtime.wasm"));
const EMBEDDED_PYTHON_SHA256: &str =
    include_str!(concat!(env!("OUT_DIR"), "/python-runtime.sha256"));
const EMBEDDED_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/js-runtime.wasm"));
const EMBEDDED_JS_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/js-runtime.sha256"));

impl SourceLanguage {
    /// The language of a plugin file, by its extension (`.py`, `.js`).
    pub fn of_path(path: &Path) -> Option<SourceLanguage> {
        match path.extension()?.to_str()? {
            "py" => Some(SourceLanguage::Python),
            "js" => Some(SourceLanguage::JavaScript),
            _ => None,
        }
    }

    /// Its files' extension.
    pub fn extension(self) -> &'static str {
        match self {
            SourceLanguage::Python => "py",
            SourceLanguage::JavaScript => "js",
        }
    }

    /// The name a source is run as: what its tracebacks name.
    pub fn file_name(self) -> &'static str {
        match self {
            SourceLanguage::Python => "app.py",
            SourceLanguage::JavaScript => "app.js",
        }
    }

    /// The name `--builds` and answers give it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceLanguage::Python => "python",
            SourceLanguage::JavaScript => "js",
        }
    }

    /// The modules a source may import: the Python runtime's stated set
    /// (`sdk/python/runtime/modules.txt`, and the helper library), or
    /// the JavaScript helper alone.
    pub fn modules(self) -> Vec<&'static str> {
        match self {
            SourceLanguage::Python => std::iter::once("toolhost_plugin")
                .chain(
                    PYTHON_MODULES
                        .lines()
                        .map(str::trim)
                        .filter(|line| !line.is_empty() && !line.starts_with('#')),
                )
                .collect(),
            SourceLanguage::JavaScript => vec!["./toolhost.js"],
        }
    }

    /// Whether the runtime carries `module` (a Python module is carried
    /// when it, or a package below it, is in the set: `urllib` for
    /// `urllib.parse`).
    pub fn carries(self, module: &str) -> bool {
        let modules = self.modules();
        match self {
            SourceLanguage::Python => {
                module == "__future__"
                    || modules.iter().any(|known| {
                        *known == module
                            || known
                                .strip_prefix(module)
                                .is_some_and(|rest| rest.starts_with('.'))
                    })
            }
            SourceLanguage::JavaScript => modules.contains(&module) || module == "toolhost.js",
        }
    }

    /// The runtime component, read once: the environment's
    /// (`TOOLHOST_PYTHON_RUNTIME`, `TOOLHOST_JS_RUNTIME`), the one built
    /// into this binary, or the one `make runtimes` leaves in this
    /// repository's `target/runtimes`. Why there is none, else.
    pub fn component(self) -> Result<Arc<RuntimeComponent>, NoRuntime> {
        static PYTHON: OnceLock<Result<Arc<RuntimeComponent>, NoRuntime>> = OnceLock::new();
        static JS: OnceLock<Result<Arc<RuntimeComponent>, NoRuntime>> = OnceLock::new();
        let (cell, variable, embedded, digest, built) = match self {
            SourceLanguage::Python => (
                &PYTHON,
                "TOOLHOST_PYTHON_RUNTIME",
                EMBEDDED_PYTHON,
                EMBEDDED_PYTHON_SHA256,
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../target/runtimes/python.wasm"
                ),
            ),
            SourceLanguage::JavaScript => (
                &JS,
                "TOOLHOST_JS_RUNTIME",
                EMBEDDED_JS,
                EMBEDDED_JS_SHA256,
                concat!(env!("CARGO_MANIFEST_DIR"), "/../target/runtimes/js.wasm"),
            ),
        };
        cell.get_or_init(|| {
            let read = |file: &std::ffi::OsStr| {
                let wasm = std::fs::read(file)?;
                let hash = sha256_hex(&wasm);
                Ok::<_, std::io::Error>(RuntimeComponent {
                    wasm: wasm.into(),
                    hash,
                })
            };
            let component = if let Some(file) = std::env::var_os(variable) {
                read(&file).map_err(|error| NoRuntime::Unreadable {
                    variable,
                    file: file.to_string_lossy().into_owned(),
                    source: Arc::new(error),
                })?
            } else if !embedded.is_empty() {
                RuntimeComponent {
                    wasm: embedded.into(),
                    hash: digest.trim().to_string(),
                }
            } else {
                read(std::ffi::OsStr::new(built)).map_err(|_| NoRuntime::NotBuilt {
                    language: self.as_str(),
                    variable,
                })?
            };
            Ok(Arc::new(component))
        })
        .clone()
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One import a source makes: its line (from 1) and the module it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub line: u32,
    pub module: String,
}

/// What `text` imports, in order: Python's `import a.b, c` and `from a
/// import b` statements (at any depth; not inside a triple-quoted
/// string), JavaScript's `import … from "x"`, `import "x"` and `import("x")`.
pub fn imports(language: SourceLanguage, text: &str) -> Vec<Import> {
    match language {
        SourceLanguage::Python => python_imports(text),
        SourceLanguage::JavaScript => js_imports(text),
    }
}

/// The imports of `text` its runtime does not carry.
pub fn outside(language: SourceLanguage, text: &str) -> Vec<Import> {
    imports(language, text)
        .into_iter()
        .filter(|import| !language.carries(&import.module))
        .collect()
}

fn python_imports(text: &str) -> Vec<Import> {
    let mut found = Vec::new();
    let mut in_string: Option<&str> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = index as u32 + 1;
        let mut rest = raw;
        // Triple-quoted strings: skip what is inside them.
        if let Some(quote) = in_string {
            match rest.find(quote) {
                Some(end) => {
                    rest = &rest[end + 3..];
                    in_string = None;
                }
                None => continue,
            }
        }
        let code = rest.split('#').next().unwrap_or("").trim();
        for quote in ["\"\"\"", "'''"] {
            if let Some(start) = code.find(quote)
                && !code[start + 3..].contains(quote)
            {
                in_string = Some(quote);
            }
        }
        let code = code.trim_end_matches(['\\', '(']).trim();
        if let Some(names) = code.strip_prefix("import ") {
            for name in names.split(',') {
                let module = name.split_whitespace().next().unwrap_or("");
                if is_module_path(module) {
                    found.push(Import {
                        line,
                        module: module.to_string(),
                    });
                }
            }
        } else if let Some(rest) = code.strip_prefix("from ")
            && let Some((module, _)) = rest.split_once(" import")
        {
            let module = module.trim();
            if is_module_path(module) || module.starts_with('.') {
                found.push(Import {
                    line,
                    module: module.to_string(),
                });
            }
        }
    }
    found
}

fn is_module_path(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

fn js_imports(text: &str) -> Vec<Import> {
    let mut found = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index as u32 + 1;
        let code = raw.trim();
        if code.starts_with("//") {
            continue;
        }
        let mut specifiers = Vec::new();
        if code.starts_with("import ") || code.starts_with("import{") || code.starts_with("export ")
        {
            let quoted = code
                .split_once(" from ")
                .map(|(_, rest)| rest)
                .or_else(|| code.strip_prefix("import "))
                .filter(|rest| rest.trim_start().starts_with(['"', '\'']));
            if let Some(rest) = quoted {
                specifiers.push(rest.trim());
            }
        }
        let mut rest = code;
        while let Some(at) = rest.find("import(") {
            rest = &rest[at + "import(".len()..];
            specifiers.push(rest.trim_start());
        }
        for specifier in specifiers {
            let Some(quote) = specifier
                .chars()
                .next()
                .filter(|c| matches!(c, '"' | '\'' | '`'))
            else {
                continue;
            };
            if let Some(module) = specifier[1..].split(quote).next() {
                found.push(Import {
                    line,
                    module: module.to_string(),
                });
            }
        }
    }
    found
}

/// The author's line and error in what a runtime printed as their source
/// failed (a Python traceback, a JavaScript error with its stack): `(line,
/// "app.py:7: SyntaxError: ...")`; `None` when it names no error.
pub fn authors_line(language: SourceLanguage, printed: &str) -> Option<(Option<u32>, String)> {
    let name = language.file_name();
    // QuickJS's runtime reports an export's exception as its message,
    // which the JavaScript runtime starts with the author's line.
    if language == SourceLanguage::JavaScript
        && let Some(start) = printed.find("message: Some(\"")
    {
        let message = &printed[start + "message: Some(\"".len()..];
        let message = message.split("\"), stack").next().unwrap_or(message);
        let message = message.replace("\\\"", "\"").replace("\\'", "'");
        let line = message
            .strip_prefix(&format!("{name}:"))
            .and_then(|rest| rest.split(':').next())
            .and_then(|digits| digits.parse::<u32>().ok());
        return Some((line, message));
    }
    let mut line = None;
    let mut error = None;
    for text in printed.lines() {
        let trimmed = text.trim();
        // A frame of the author's file: `File "app.py", line 7` (Python),
        // `at f (app.js:7:3)` or `app.js:7` (QuickJS).
        if let Some(at) = trimmed.find(name) {
            let rest = &trimmed[at + name.len()..];
            let digits: String = rest
                .trim_start_matches(['"', ',', ' ', ':'])
                .trim_start_matches("line ")
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(found) = digits.parse::<u32>() {
                line = Some(found);
            }
            continue;
        }
        let is_error = !text.starts_with(' ')
            && !trimmed.starts_with("Traceback")
            && trimmed
                .split_once(':')
                .is_some_and(|(kind, _)| kind.ends_with("Error") || kind.ends_with("Exception"));
        if is_error && error.is_none() {
            error = Some(trimmed.to_string());
            if language == SourceLanguage::Python {
                break;
            }
        }
    }
    let error = error?;
    Some(match line {
        Some(line) => (Some(line), format!("{name}:{line}: {error}")),
        None => (None, format!("{name}: {error}")),
    })
}

/// What a runtime printed as a source failed, for its author: a Python
/// traceback without the runtime's own frames, up to its error; a
/// JavaScript error's message.
pub fn clean_log(language: SourceLanguage, printed: &str) -> String {
    match language {
        SourceLanguage::Python => {
            let mut kept = Vec::new();
            let mut lines = printed.lines().peekable();
            while let Some(line) = lines.next() {
                if line.trim_start().starts_with("File \"/") {
                    // The runtime's frame, and its source line if shown.
                    if lines.peek().is_some_and(|next| {
                        next.starts_with("    ") && !next.trim_start().starts_with("File ")
                    }) {
                        lines.next();
                    }
                    continue;
                }
                kept.push(line);
                let is_error = !line.starts_with(' ')
                    && !line.starts_with("Traceback")
                    && line.split_once(':').is_some_and(|(kind, _)| {
                        kind.ends_with("Error") || kind.ends_with("Exception")
                    });
                if is_error {
                    break;
                }
            }
            kept.join("\n")
        }
        SourceLanguage::JavaScript => authors_line(language, printed)
            .map_or_else(|| printed.to_string(), |(_, message)| message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_source_s_imports_are_read_and_checked_against_the_set() {
        let source = "\"\"\"Docs.\n\nimport nope\n\"\"\"\nfrom __future__ import annotations\n\
            import json, re as regex\nfrom urllib.parse import quote  # fine\nfrom toolhost_plugin import tool\n\
            def f():\n    import sqlite3\n    from . import sibling\n";
        let found: Vec<(u32, String)> = imports(SourceLanguage::Python, source)
            .into_iter()
            .map(|import| (import.line, import.module))
            .collect();
        let expected = [
            (5, "__future__"),
            (6, "json"),
            (6, "re"),
            (7, "urllib.parse"),
            (8, "toolhost_plugin"),
            (10, "sqlite3"),
            (11, "."),
        ]
        .map(|(line, module)| (line, module.to_string()));
        assert_eq!(found, expected);
        let outside: Vec<String> = outside(SourceLanguage::Python, source)
            .into_iter()
            .map(|import| import.module)
            .collect();
        assert_eq!(outside, ["sqlite3", "."]);
        assert!(SourceLanguage::Python.carries("urllib"));
    }

    #[test]
    fn the_authors_line_is_read_from_a_traceback() {
        let raised = "Traceback (most recent call last):\n  File \"/0/runtime.py\", line 46, in _load\n    exec(x)\n  File \"app.py\", line 5, in <module>\n    fail()\n  File \"app.py\", line 3, in fail\n    raise ValueError(\"no config here\")\nValueError: no config here\n";
        assert_eq!(
            authors_line(SourceLanguage::Python, raised),
            Some((Some(3), "app.py:3: ValueError: no config here".into()))
        );
        let syntax = "Traceback (most recent call last):\n  File \"/0/runtime.py\", line 46, in _load\n  File \"app.py\", line 7\n    return (text\n           ^\nSyntaxError: '(' was never closed\n";
        assert_eq!(
            authors_line(SourceLanguage::Python, syntax),
            Some((
                Some(7),
                "app.py:7: SyntaxError: '(' was never closed".into()
            ))
        );
        assert_eq!(authors_line(SourceLanguage::Python, "nothing"), None);
    }

    #[test]
    fn a_javascript_source_may_import_the_helper_alone() {
        let source = "import { tool, exportPlugin } from \"./toolhost.js\";\n\
            import fs from 'node:fs';\nimport \"./side.js\";\nconst x = await import(\"lodash\");\n\
            export const { tools } = exportPlugin({ tools: [] });\n";
        let outside: Vec<(u32, String)> = outside(SourceLanguage::JavaScript, source)
            .into_iter()
            .map(|import| (import.line, import.module))
            .collect();
        assert_eq!(
            outside,
            [
                (2, "node:fs".to_string()),
                (3, "./side.js".to_string()),
                (4, "lodash".to_string())
            ]
        );
    }
}
