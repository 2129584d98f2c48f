//! What a source imports, one scanner per language: Python's `import a.b,
//! c` and `from a import b` statements (at any depth, and whether nested
//! in a block; not inside a triple-quoted string), JavaScript's `import …
//! from "x"`, `import "x"` and `import("x")`. What a runtime does not carry
//! is answered before anything runs; a Python import made only inside a
//! function is named before a build.

use super::language::Language;

/// One import a source makes: its line (from 1) and the module it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub line: u32,
    pub module: String,
    /// Made inside a block (a function's body): it runs when that code
    /// does, not when the module loads.
    pub nested: bool,
}

/// What `text` imports, in order: Python's `import a.b, c` and `from a
/// import b` statements (at any depth; not inside a triple-quoted
/// string), JavaScript's `import … from "x"`, `import "x"` and `import("x")`.
pub fn imports(language: Language, text: &str) -> Vec<Import> {
    match language.runtime() {
        Language::Python => python_imports(text),
        Language::JavaScript | Language::TypeScript => js_imports(text),
        Language::Rust => Vec::new(),
    }
}

/// The imports of `text` its runtime does not carry.
pub fn outside(language: Language, text: &str) -> Vec<Import> {
    outside_with(language, text, &std::collections::BTreeSet::new())
}

/// The imports of `text` neither its runtime nor `packages` (the top-level
/// modules of the room's package store) carry.
pub fn outside_with(
    language: Language,
    text: &str,
    packages: &std::collections::BTreeSet<String>,
) -> Vec<Import> {
    imports(language, text)
        .into_iter()
        .filter(|import| {
            // A Python package gives its submodules; a JavaScript one is
            // imported by its whole name.
            let named = match language.runtime() {
                Language::Python => import.module.split('.').next().unwrap_or_default(),
                _ => import.module.as_str(),
            };
            !super::runtimes::carries(language, &import.module) && !packages.contains(named)
        })
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
        let nested = rest.starts_with([' ', '\t']);
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
                        nested,
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
                    nested,
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
                    nested: false,
                });
            }
        }
    }
    found
}

/// A Python import made only inside a function (indented), of a module by
/// its absolute name: it runs when the tool is called, and a build puts in
/// the component only what is imported when it is made.
pub fn late_imports(text: &str) -> Vec<Import> {
    python_imports(text)
        .into_iter()
        .filter(|import| import.nested && !import.module.starts_with('.'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_source_s_imports_are_read_and_checked_against_the_set() {
        let source = "\"\"\"Docs.\n\nimport nope\n\"\"\"\nfrom __future__ import annotations\n\
            import json, re as regex\nfrom urllib.parse import quote  # fine\nfrom toolhost_plugin import tool\n\
            def f():\n    import sqlite3\n    from . import sibling\n";
        let found: Vec<(u32, String)> = imports(Language::Python, source)
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
        let outside: Vec<String> = outside(Language::Python, source)
            .into_iter()
            .map(|import| import.module)
            .collect();
        // sqlite3 is the standard library's, read from disk where the
        // runtime has it.
        if super::super::runtimes::python_stdlib().is_ok() {
            assert_eq!(outside, ["."]);
        } else {
            assert_eq!(outside, ["sqlite3", "."]);
        }
        let yaml = outside_with(
            Language::Python,
            "import yaml\nimport bs4.element\n",
            &["bs4".to_string()].into(),
        );
        assert_eq!(
            yaml.iter().map(|i| i.module.as_str()).collect::<Vec<_>>(),
            ["yaml"]
        );
        assert!(super::super::runtimes::carries(Language::Python, "urllib"));
    }

    #[test]
    fn a_javascript_source_may_import_the_helper_alone() {
        let source = "import { tool, exportPlugin } from \"./toolhost.js\";\n\
            import fs from 'node:fs';\nimport \"./side.js\";\nconst x = await import(\"lodash\");\n\
            export const { tools } = exportPlugin({ tools: [] });\n";
        let outside: Vec<(u32, String)> = outside(Language::JavaScript, source)
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

    #[test]
    fn imports_inside_functions_are_found() {
        let source = "import json\n\"\"\"\n    import not_this\n\"\"\"\ndef f():\n    import heapq\n    from collections import deque\n    from . import near\n    x = 'import nope'\n";
        let late: Vec<(u32, String)> = late_imports(source)
            .into_iter()
            .map(|import| (import.line, import.module))
            .collect();
        assert_eq!(
            late,
            [(6, "heapq".to_string()), (7, "collections".to_string())]
        );
    }
}
