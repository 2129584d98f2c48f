//! [`Language`]: the one type for a plugin's language, with its names,
//! files, extensions and media types.

use std::path::Path;

/// A plugin's language, as `toolhost new --lang` spells it. Python and
/// JavaScript are also *source* languages: a file of theirs is a plugin,
/// run by the language's runtime or built on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Language {
    Rust,
    Python,
    #[value(name = "js", alias = "javascript")]
    JavaScript,
    /// TypeScript, served by the JavaScript runtime: its types are erased
    /// (blanked, so every line and column stays) before it runs.
    #[value(name = "ts", alias = "typescript")]
    TypeScript,
}

impl Language {
    /// The language of the project in `dir`, from the file that marks it.
    pub(crate) fn detect(dir: &Path) -> Option<Language> {
        [
            ("Cargo.toml", Language::Rust),
            ("app.py", Language::Python),
            ("app.js", Language::JavaScript),
            ("app.ts", Language::TypeScript),
        ]
        .into_iter()
        .find(|(marker, _)| dir.join(marker).is_file())
        .map(|(_, language)| language)
    }

    /// The source language of a plugin file, by its extension (`.py`,
    /// `.js`); a Rust file is never a plugin.
    pub fn of_path(path: &Path) -> Option<Language> {
        match path.extension()?.to_str()? {
            "py" => Some(Language::Python),
            "js" => Some(Language::JavaScript),
            "ts" => Some(Language::TypeScript),
            // A tool folder, zipped: its `app.py` (`folder.rs`).
            "zip" => Some(Language::Python),
            _ => None,
        }
    }

    /// Whether a file of this language is a plugin (Python, JavaScript,
    /// TypeScript).
    pub fn is_source(self) -> bool {
        self != Language::Rust
    }

    /// The language whose runtime runs a source of this one (TypeScript
    /// runs on JavaScript's), and whose imports and errors it shares.
    pub fn runtime(self) -> Language {
        match self {
            Language::TypeScript => Language::JavaScript,
            language => language,
        }
    }

    /// The file a project of this language keeps its code in, which is also
    /// the name a published source runs and is built as: what tracebacks
    /// name.
    pub fn source_file(self) -> &'static str {
        match self {
            Language::Rust => "src/lib.rs",
            Language::Python => "app.py",
            Language::JavaScript => "app.js",
            Language::TypeScript => "app.ts",
        }
    }

    /// A plugin file's extension in the folder.
    pub fn extension(self) -> &'static str {
        match self {
            Language::Rust => "rs",
            Language::Python => "py",
            Language::JavaScript => "js",
            Language::TypeScript => "ts",
        }
    }

    /// The language's name as `--builds` and answers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::JavaScript => "js",
            Language::TypeScript => "ts",
        }
    }

    /// The language a name spells: `as_str`'s names and their aliases
    /// (`py`, `javascript`), in any case.
    pub(crate) fn of_name(name: &str) -> Option<Language> {
        match name.trim().to_ascii_lowercase().as_str() {
            "rust" => Some(Language::Rust),
            "python" | "py" => Some(Language::Python),
            "js" | "javascript" => Some(Language::JavaScript),
            "ts" | "typescript" => Some(Language::TypeScript),
            _ => None,
        }
    }

    /// The language a published source's media type names: `text/x-python`
    /// (or `text/python`), `text/javascript` (or `application/javascript`);
    /// Rust (`text/x-rust`) too, which is never built on a server.
    pub(crate) fn of_media_type(kind: &str) -> Option<Language> {
        let kind = kind
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match kind.as_str() {
            "text/x-python" | "text/python" | "application/x-python" => Some(Language::Python),
            "text/javascript" | "application/javascript" | "text/ecmascript" => {
                Some(Language::JavaScript)
            }
            "text/typescript" | "application/typescript" | "application/x-typescript" => {
                Some(Language::TypeScript)
            }
            "text/x-rust" | "text/rust" => Some(Language::Rust),
            _ => None,
        }
    }

    /// The media type a source of this language is served with.
    pub(crate) fn media_type(self) -> &'static str {
        match self {
            Language::Rust => "text/x-rust; charset=utf-8",
            Language::Python => "text/x-python; charset=utf-8",
            Language::JavaScript => "text/javascript; charset=utf-8",
            Language::TypeScript => "text/typescript; charset=utf-8",
        }
    }

    /// How a project of this language runs its own tests.
    pub(crate) fn test_command(self) -> &'static str {
        match self {
            Language::Rust => "cargo test",
            Language::Python => "python3 -m unittest",
            Language::JavaScript | Language::TypeScript => "node --test test.mjs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_is_named_one_way_everywhere() {
        for language in [
            Language::Rust,
            Language::Python,
            Language::JavaScript,
            Language::TypeScript,
        ] {
            assert_eq!(Language::of_name(language.as_str()), Some(language));
            assert_eq!(
                Language::of_media_type(language.media_type()),
                Some(language)
            );
        }
        assert_eq!(
            Language::of_path(Path::new("x/word.py")),
            Some(Language::Python)
        );
        assert_eq!(Language::of_path(Path::new("lib.rs")), None);
        assert_eq!(Language::of_name("JavaScript"), Some(Language::JavaScript));
        assert!(!Language::Rust.is_source());
    }
}
