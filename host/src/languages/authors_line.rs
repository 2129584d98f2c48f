//! The author's line, read one way from whatever printed it: a failed
//! build's toolchain log (componentize-py's traceback around the author's,
//! componentize-qjs's error and frames) and what a language runtime printed
//! as a published source failed at load (a Python traceback, a JavaScript
//! error whose message starts with the author's line). Each becomes the
//! line of the author's own file and its error (`app.py:7: SyntaxError:
//! '(' was never closed`), and the log loses the toolchain's and runtime's
//! own frames and scratch paths.

use super::language::Language;

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
        Language::JavaScript | Language::TypeScript => point_js(log),
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

/// The author's line and error in what a runtime printed as their source
/// failed (a Python traceback, a JavaScript error with its stack): `(line,
/// "app.py:7: SyntaxError: ...")`; `None` when it names no error.
pub fn authors_line(language: Language, printed: &str) -> Option<(Option<u32>, String)> {
    let name = language.source_file();
    // QuickJS's runtime reports an export's exception as its message,
    // which the JavaScript runtime starts with the author's line.
    if language.runtime() == Language::JavaScript
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
            if language == Language::Python {
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
pub fn clean_log(language: Language, printed: &str) -> String {
    match language {
        Language::Python => {
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
        Language::JavaScript | Language::TypeScript | Language::Rust => {
            authors_line(language, printed)
                .map_or_else(|| printed.to_string(), |(_, message)| message)
        }
    }
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
    fn the_authors_line_is_read_from_a_traceback() {
        let raised = "Traceback (most recent call last):\n  File \"/0/runtime.py\", line 46, in _load\n    exec(x)\n  File \"app.py\", line 5, in <module>\n    fail()\n  File \"app.py\", line 3, in fail\n    raise ValueError(\"no config here\")\nValueError: no config here\n";
        assert_eq!(
            authors_line(Language::Python, raised),
            Some((Some(3), "app.py:3: ValueError: no config here".into()))
        );
        let syntax = "Traceback (most recent call last):\n  File \"/0/runtime.py\", line 46, in _load\n  File \"app.py\", line 7\n    return (text\n           ^\nSyntaxError: '(' was never closed\n";
        assert_eq!(
            authors_line(Language::Python, syntax),
            Some((
                Some(7),
                "app.py:7: SyntaxError: '(' was never closed".into()
            ))
        );
        assert_eq!(authors_line(Language::Python, "nothing"), None);
    }
}
