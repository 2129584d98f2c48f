//! What a build's author reads first: the line of their file a failure
//! points at, in their file's name (`app.py:7: SyntaxError: '(' was never
//! closed`), and the toolchain's log with its own frames and scratch paths
//! taken out; and, before a Python build, the imports made only inside
//! functions (only what is imported at build time is in the component).

use crate::builds::recipe::Language;

/// Where a failure points in the author's file, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointed {
    /// The line in the author's file (1-based), when the toolchain names one.
    pub(crate) line: Option<u32>,
    /// The error itself, one line: `SyntaxError: '(' was never closed`.
    pub(crate) error: String,
}

impl Pointed {
    /// `app.py:7: SyntaxError: ...`, or the error alone.
    pub(crate) fn headline(&self, language: Language) -> String {
        match self.line {
            Some(line) => format!("{}:{line}: {}", language.source_file(), self.error),
            None => self.error.clone(),
        }
    }
}

/// The author's line and error in a failed build's log.
pub(crate) fn point(language: Language, log: &str) -> Pointed {
    match language {
        Language::Python => point_python(log),
        Language::JavaScript => point_js(log),
        Language::Rust => Pointed {
            line: None,
            error: last_meaningful_line(log),
        },
    }
}

/// componentize-py reports the author's traceback inside its own: frames
/// `File "/0/app.py", line N` (the innermost is the author's line), a
/// `SyntaxError` as `File "/0/app.py", line N` above the caret, then the
/// exception's line (`ValueError: boom`).
fn point_python(log: &str) -> Pointed {
    let line = log.lines().rev().find_map(|text| {
        let file = frame_file(text)?;
        if !is_authors(file) {
            return None;
        }
        let after = text.split_once("\", line ")?.1;
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    });
    let error = log
        .lines()
        .map(str::trim)
        .find(|text| is_exception_line(text))
        .map(str::to_string)
        .unwrap_or_else(|| last_meaningful_line(log));
    Pointed { line, error }
}

/// The file a Python traceback frame names (`File "x", line 3`).
fn frame_file(text: &str) -> Option<&str> {
    let at = text.find("File \"")?;
    text[at + "File \"".len()..]
        .split_once('"')
        .map(|(file, _)| file)
}

/// Whether a frame is in the author's file (the scratch folder is `/0` to
/// componentize-py's CPython).
fn is_authors(file: &str) -> bool {
    file == "app.py" || file.starts_with("/0/") || file.ends_with("/app.py")
}

/// `ValueError: boom`, `SyntaxError: '(' was never closed`,
/// `ModuleNotFoundError: No module named 'x'`: a name ending in `Error`,
/// `Exception` or `Warning`, a colon.
fn is_exception_line(text: &str) -> bool {
    let Some((name, _)) = text.split_once(": ") else {
        return false;
    };
    let name = name.rsplit('.').next().unwrap_or(name);
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && (name.ends_with("Error") || name.ends_with("Exception") || name == "KeyboardInterrupt")
        && name != "AssertionError"
}

/// componentize-qjs: `Error: ...: Error: unexpected token in expression:
/// ';'` then frames `at /app.js:9:10` or `at f (/app.js:2:29)`; the first
/// frame in `/app.js` is the author's line.
fn point_js(log: &str) -> Pointed {
    // `/app.js:9:10` in the toolchain's log, `app.js:9:10` once cleaned.
    let line = log.lines().find_map(|text| {
        let at = text.find("app.js:")?;
        let before = text[..at].chars().next_back();
        if !before.is_none_or(|c| matches!(c, '/' | ' ' | '(')) {
            return None;
        }
        let rest = &text[at + "app.js:".len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    });
    let error = log
        .lines()
        .find(|text| text.starts_with("Error:"))
        .map(|text| {
            // The last `Error: ` segment is QuickJS's own message.
            let message = text.rsplit("Error: ").next().unwrap_or(text).trim();
            let kind = text
                .rsplit_once("Error: ")
                .map(|(before, _)| before)
                .and_then(|before| {
                    before
                        .rsplit(|c: char| !c.is_ascii_alphanumeric())
                        .next()
                        .filter(|word| !word.is_empty())
                })
                .map_or("Error".to_string(), |word| format!("{word}Error"));
            format!("{kind}: {message}")
        })
        .unwrap_or_else(|| last_meaningful_line(log));
    Pointed { line, error }
}

fn last_meaningful_line(log: &str) -> String {
    log.lines()
        .map(str::trim)
        .rfind(|text| !text.is_empty())
        .unwrap_or("the build failed and printed nothing")
        .to_string()
}

/// The log as the author reads it: the scratch folder's paths become their
/// file's name, and the toolchain's own frames (its launcher's traceback)
/// go.
pub(crate) fn clean(log: &str, scratch: &str) -> String {
    let mut out = String::new();
    let mut lines = log.lines().peekable();
    while let Some(text) = lines.next() {
        if frame_file(text)
            .is_some_and(|file| !is_authors(file) && !file.contains("toolhost_plugin"))
        {
            // The launcher's frame: its source line and carets go with it.
            while lines
                .peek()
                .is_some_and(|next| next.starts_with("    ") && frame_file(next).is_none())
            {
                lines.next();
            }
            continue;
        }
        let text = text
            .strip_prefix("AssertionError: ")
            .map_or(text.to_string(), |rest| {
                if rest.trim_start().starts_with("File ") {
                    format!("  {}", rest.trim_start())
                } else {
                    rest.to_string()
                }
            });
        let text = text
            .replace(&format!("{scratch}/"), "")
            .replace("\"/0/", "\"")
            .replace("(/app.js:", "(app.js:")
            .replace("at /app.js:", "at app.js:")
            .replace("(/toolhost.js:", "(toolhost.js:")
            .replace("at /toolhost.js:", "at toolhost.js:");
        out.push_str(&text);
        out.push('\n');
    }
    out
}

/// A Python import made only inside a function (indented): it runs when
/// the tool is called, and only modules imported at build time are in the
/// component. Each: its line and the module it names.
pub(crate) fn late_imports(source: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut in_string: Option<&str> = None;
    for (index, text) in source.lines().enumerate() {
        let trimmed = text.trim_start();
        // Skip docstrings and other triple-quoted text.
        for quote in ["\"\"\"", "'''"] {
            let count = text.matches(quote).count();
            match in_string {
                Some(open) if open == quote && count % 2 == 1 => in_string = None,
                None if count % 2 == 1 => in_string = Some(quote),
                _ => {}
            }
        }
        if in_string.is_some() || trimmed.len() == text.len() {
            continue;
        }
        let module = if let Some(rest) = trimmed.strip_prefix("import ") {
            rest.split([',', ' ', '#']).next()
        } else if let Some(rest) = trimmed.strip_prefix("from ") {
            rest.split_once(" import ").map(|(module, _)| module.trim())
        } else {
            None
        };
        if let Some(module) = module.filter(|m| is_module_path(m)) {
            found.push((index as u32 + 1, module.to_string()));
        }
    }
    found
}

fn is_module_path(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('.')
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYNTAX: &str = r#"Traceback (most recent call last):
  File "/srv/toolchains/python/bin/componentize-py", line 8, in <module>
    sys.exit(script())
             ^^^^^^^^
AssertionError:   File "/0/app.py", line 7
    x = (
        ^
SyntaxError: '(' was never closed


Caused by:
    SyntaxError: '(' was never closed (app.py, line 7)
"#;

    const AT_IMPORT: &str = r#"Traceback (most recent call last):
  File "/srv/toolchains/python/bin/componentize-py", line 8, in <module>
    sys.exit(script())
             ^^^^^^^^
AssertionError: Traceback (most recent call last):
  File "/0/app.py", line 11, in <module>
    helper()
    ~~~~~~^^
  File "/0/app.py", line 4, in helper
    raise ValueError("boom at import")
ValueError: boom at import


Caused by:
    ValueError: boom at import
"#;

    const JS_PARSE: &str = "componentize-qjs\n  WIT:    wit\n  JS:     app.js\n  Output: out.wasm\n\
        Error: : Failed to evaluate user JavaScript module: Failed to declare JavaScript module: \
        Error: unexpected token in expression: ';'\n    at /app.js:9:10\n";

    const JS_THROW: &str = "Error: : Failed to evaluate user JavaScript module: Failed to finish \
        JavaScript module evaluation: Error: boom at import\n    at boom (/app.js:2:29)\n    \
        at <anonymous> (/app.js:9:1)\n";

    #[test]
    fn the_authors_line_comes_first_in_their_files_name() {
        let syntax = point(Language::Python, SYNTAX);
        assert_eq!(
            syntax.headline(Language::Python),
            "app.py:7: SyntaxError: '(' was never closed"
        );
        let thrown = point(Language::Python, AT_IMPORT);
        assert_eq!(
            thrown.headline(Language::Python),
            "app.py:4: ValueError: boom at import"
        );
        let parse = point(Language::JavaScript, JS_PARSE);
        assert_eq!(parse.line, Some(9));
        assert!(
            parse.error.contains("unexpected token in expression"),
            "{parse:?}"
        );
        let thrown = point(Language::JavaScript, JS_THROW);
        assert_eq!(thrown.line, Some(2));
        assert!(thrown.error.ends_with("boom at import"), "{thrown:?}");
    }

    #[test]
    fn the_log_loses_the_launchers_frames_and_the_scratch_paths() {
        let clean = clean(AT_IMPORT, "/tmp/scratch");
        assert!(!clean.contains("componentize-py\", line 8"), "{clean}");
        assert!(!clean.contains("sys.exit"), "{clean}");
        assert!(
            clean.contains("File \"app.py\", line 4, in helper"),
            "{clean}"
        );
        let js = clean_js();
        assert!(js.contains("at app.js:9:10"), "{js}");
    }

    fn clean_js() -> String {
        clean(JS_PARSE, "/tmp/scratch")
    }

    #[test]
    fn imports_inside_functions_are_found() {
        let source = "import json\n\"\"\"\n    import not_this\n\"\"\"\ndef f():\n    import heapq\n    from collections import deque\n    x = 'import nope'\n";
        assert_eq!(
            late_imports(source),
            [(6, "heapq".to_string()), (7, "collections".to_string())]
        );
    }
}
