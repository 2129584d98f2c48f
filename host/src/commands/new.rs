//! `toolhost new NAME [--lang rust|python|js]`: scaffolds a plugin
//! project, one typed tool with a test, that builds in any folder: with
//! nothing but Rust and the `wasm32-wasip2` target for Rust; with the
//! pinned componentize-py or componentize-qjs (`make toolchains`) for
//! Python and JavaScript. Every project carries its own copy of its helper
//! library and of the contract (`wit/`), so it builds wherever it is
//! copied; `toolhost dev` in it builds, serves and rebuilds on save.
//!
//! The plugin SDK (`sdk/rust`, crate `toolhost-plugin`) is not on
//! crates.io yet, so this binary carries its sources and writes them into
//! the project, `vendor/toolhost-plugin/`; the project depends on that
//! copy by a relative path (beside the version it will take from crates.io
//! once published), so it builds wherever it is copied or cloned. The
//! project is a Cargo workspace of its own, so creating it inside another
//! workspace (this repository, say) changes nothing there.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use crate::builds::recipe::{Language, Sources};

#[derive(Args)]
pub(super) struct NewOptions {
    /// The plugin's name: its folder, its crate, its `.wasm` file and its
    /// one tool. Letters, digits, `_` and `-`, starting with a letter.
    name: String,
    /// Where to create the project folder.
    #[arg(long, default_value = ".")]
    path: PathBuf,
    /// The plugin's language.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Language,
}

/// The contract, for Python and JavaScript projects (their toolchains read
/// the WIT at build time).
const PLUGIN_WIT: &str = include_str!("../../../wit/plugin.wit");

/// A Python project: the app, its test, the helper library (`sdk/python`).
/// `__NAME__` is the plugin's name, `__ID__` its file's stem.
const PYTHON_FILES: &[(&str, &str)] = &[
    ("app.py", include_str!("templates/python/app.py")),
    ("test_app.py", include_str!("templates/python/test_app.py")),
    (
        "toolhost_plugin.py",
        include_str!("../../../sdk/python/toolhost_plugin.py"),
    ),
    (".gitignore", "/target\n/plugins\n__pycache__/\n"),
];

/// A JavaScript project: the app, its test, the helper library (`sdk/js`).
const JS_FILES: &[(&str, &str)] = &[
    ("app.js", include_str!("templates/js/app.js")),
    ("test.mjs", include_str!("templates/js/test.mjs")),
    ("toolhost.js", include_str!("../../../sdk/js/toolhost.js")),
    (
        "toolhost.d.ts",
        include_str!("../../../sdk/js/toolhost.d.ts"),
    ),
    (
        "package.json",
        "{ \"private\": true, \"type\": \"module\" }\n",
    ),
    (".gitignore", "/target\n/plugins\n"),
];

/// The SDK's files, as this binary was built with them.
const SDK_FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../../sdk/rust/Cargo.toml")),
    ("README.md", include_str!("../../../sdk/rust/README.md")),
    (
        "wit/plugin.wit",
        include_str!("../../../sdk/rust/wit/plugin.wit"),
    ),
    ("src/lib.rs", include_str!("../../../sdk/rust/src/lib.rs")),
    (
        "src/bindings.rs",
        include_str!("../../../sdk/rust/src/bindings.rs"),
    ),
    (
        "src/tools_world.rs",
        include_str!("../../../sdk/rust/src/tools_world.rs"),
    ),
    ("src/tool.rs", include_str!("../../../sdk/rust/src/tool.rs")),
    (
        "src/catalog.rs",
        include_str!("../../../sdk/rust/src/catalog.rs"),
    ),
    (
        "src/schema.rs",
        include_str!("../../../sdk/rust/src/schema.rs"),
    ),
    (
        "src/content.rs",
        include_str!("../../../sdk/rust/src/content.rs"),
    ),
    (
        "src/client.rs",
        include_str!("../../../sdk/rust/src/client.rs"),
    ),
    (
        "src/config.rs",
        include_str!("../../../sdk/rust/src/config.rs"),
    ),
    (
        "src/views.rs",
        include_str!("../../../sdk/rust/src/views.rs"),
    ),
];

const CARGO_TOML: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
# A WebAssembly component: `cargo build --release --target wasm32-wasip2`
# writes target/wasm32-wasip2/release/{crate}.wasm.
crate-type = ["cdylib"]

[dependencies]
toolhost-plugin = { version = "0.1", path = "vendor/toolhost-plugin" }
# The derives the tool's argument and result types use.
serde = { version = "1", features = ["derive"] }
schemars = "1.2"

# A project of its own, even inside another Cargo workspace.
[workspace]

[profile.release]
# Small components load faster; incremental builds keep `toolhost dev`'s
# edit-to-live time short. For a final build, `lto = true` and
# `codegen-units = 1` make the file smaller still.
opt-level = "s"
strip = true
incremental = true
"#;

const CARGO_CONFIG: &str = r#"# A 128 KiB stack instead of Rust's 1 MiB: the host resets every page a
# call dirtied, and a smaller stack makes each call cheaper. Raise it for a
# tool that keeps big values on the stack.
[target.wasm32-wasip2]
rustflags = ["-C", "link-arg=-zstack-size=131072"]
"#;

const LIB_RS: &str = r##"//! `{name}`: a toolhost plugin.
//!
//! Live while you edit: `toolhost dev` (rebuilds on save and serves it).
//! Build once: `cargo build --release --target wasm32-wasip2`.
//! Test: `cargo test`.

use toolhost_plugin::prelude::*;

// The tool's arguments. Doc comments (`///`) become the input schema's
// descriptions, which is what a model reads to fill them in: write them
// for the model.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Who to greet
    name: String,
}

// The tool's answer: a struct becomes structured content (its schema the
// output schema), and the host renders it as text too.
#[derive(Serialize, JsonSchema, Debug, PartialEq)]
struct Greeting {
    greeting: String,
}

fn greet(args: Args) -> Result<Greeting, ToolError> {
    if args.name.trim().is_empty() {
        return Err(ToolError::new("EMPTY_NAME", "name must not be empty"));
    }
    Ok(Greeting {
        greeting: format!("Hello, {}!", args.name),
    })
}

// A prompt (a template a client offers its user) takes typed arguments too:
// `.prompt(Prompt::new("{name}_prompt", "Asks the model for a warm
// greeting.", |args: Args| Ok(format!("Write a short, warm greeting for {}.",
// args.name))))` below. Resources: `Resource::new`, `Template::new`. A
// plugin with prompts or resources is exported with
// `toolhost_plugin::export!(tools, catalog)`.

fn tools() -> Tools {
    Tools::new().tool(Tool::new("{name}", "Greets someone by name.", greet).read_only(true))
}

toolhost_plugin::export!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name() {
        let answer = greet(Args { name: "Ada".into() }).unwrap();
        assert_eq!(answer.greeting, "Hello, Ada!");
    }

    #[test]
    fn answers_through_the_tool_list_as_the_host_calls_it() {
        let answer = tools().call("{name}", r#"{"name":"Ada"}"#).unwrap();
        assert_eq!(
            answer.structured_data(),
            Some(json!({ "greeting": "Hello, Ada!" }))
        );
        let error = tools().call("{name}", r#"{"name":" "}"#).unwrap_err();
        assert_eq!(error.code(), "EMPTY_NAME");
    }
}
"##;

impl NewOptions {
    pub(super) fn run(self) -> anyhow::Result<u8> {
        if self.lang == Language::TypeScript {
            bail!(
                "toolhost new makes Rust, Python or JavaScript projects: for TypeScript, make a \
                 JavaScript one, rename app.js to app.ts, add your types and run toolhost dev \
                 app.ts (types are erased before it runs; no build)"
            );
        }
        let name = &self.name;
        if !is_valid_name(name) {
            bail!(
                "{name:?} cannot name a plugin: use letters, digits, `_` and `-`, starting \
                 with a letter, at most 64 (and not the name of a dependency: {})",
                RESERVED.join(", ")
            );
        }
        let project = self.path.join(name);
        if project.exists() {
            bail!("{} already exists", project.display());
        }
        let library = super::project::plugin_id_of(name);
        let build = crate::builds::recipe::recipe(
            self.lang,
            &format!("target/{library}.wasm"),
            // The scaffold is a 0.2.0 project (a Python or JavaScript
            // app exports every interface of the `apps` world; a Rust
            // one, `tools` alone unless it is exported with `catalog`).
            &Sources {
                world: Some("apps"),
                ..Sources::default()
            },
        )
        .display();
        let test = self.lang.test_command();
        match self.lang {
            Language::Rust => {
                let fill = |template: &str| {
                    template
                        .replace("{name}", name)
                        .replace("{crate}", &library)
                };
                write(&project.join("Cargo.toml"), &fill(CARGO_TOML))?;
                write(&project.join(".cargo/config.toml"), CARGO_CONFIG)?;
                write(&project.join("src/lib.rs"), &fill(LIB_RS))?;
                write(&project.join(".gitignore"), "/target\n/plugins\n")?;
                for (path, text) in SDK_FILES {
                    write(&project.join("vendor/toolhost-plugin").join(path), text)?;
                }
            }
            Language::TypeScript => unreachable!("refused above"),
            Language::Python | Language::JavaScript => {
                let files = match self.lang {
                    Language::Python => PYTHON_FILES,
                    _ => JS_FILES,
                };
                for (path, text) in files {
                    let text = text.replace("__NAME__", name).replace("__ID__", &library);
                    write(&project.join(path), &text)?;
                }
                write(&project.join("wit/plugin.wit"), PLUGIN_WIT)?;
            }
        }
        println!("Created {} with one tool, {name:?}.", project.display());
        println!();
        println!("  cd {}", project.display());
        // A printed command names a program that is there. Python and
        // JavaScript need none: toolhost's runtimes run the file as it is.
        match self.lang {
            Language::Python | Language::JavaScript | Language::TypeScript => {
                println!("  toolhost dev    # serve it, live again on every save (no build)");
                println!("  toolhost push . --server URL    # publish it onto a server");
            }
            Language::Rust => {
                println!("  toolhost dev    # build, serve, rebuild on save");
                println!("  {build}    # or build once");
            }
        }
        println!("  {test}    # run its tests");
        Ok(0)
    }
}

/// Crate names a plugin cannot take: its own dependencies and Rust's.
const RESERVED: &[&str] = &[
    "toolhost-plugin",
    "toolhost_plugin",
    "serde",
    "schemars",
    "core",
    "std",
    "alloc",
    "test",
    "proc_macro",
];

fn is_valid_name(name: &str) -> bool {
    !RESERVED.contains(&name)
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new Rust project vendors the whole SDK: a file added to it must
    /// be added to SDK_FILES too.
    #[test]
    fn every_sdk_source_is_vendored() {
        let sources = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/rust/src");
        for entry in std::fs::read_dir(sources).unwrap() {
            let name = format!("src/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(
                SDK_FILES.iter().any(|(path, _)| *path == name),
                "{name} is not in SDK_FILES"
            );
        }
    }

    #[test]
    fn plugin_names_are_crate_and_tool_names() {
        for good in ["word_count", "wc", "word-count", "a1"] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in [
            "",
            "1abc",
            "a b",
            "a.b",
            "../x",
            "serde",
            "std",
            &"a".repeat(65),
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
