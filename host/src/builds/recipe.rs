//! How each plugin language is built: one recipe per
//! language (a command line in `builds/recipes/`), which `toolhost new`
//! prints as the hint, `toolhost dev` runs (`commands/project.rs`), the
//! server runs on published source (`build/mod.rs`), and the Makefile's
//! example builds read too (`make plugins/textpy.wasm`), so none of them
//! can drift apart.
//!
//! A recipe names its toolchain by its plain name (`componentize-py`);
//! [`Toolchain::find`] says which file runs: an environment variable, the
//! pinned copy `make toolchains` installs under this repository's
//! `target/toolchains`, then `PATH`.

use std::path::{Path, PathBuf};

pub(crate) use crate::languages::Language;

/// Where a build finds its sources beyond the project folder: extra module
/// search paths (Python), and the root that JavaScript imports are resolved
/// from. A scaffolded project needs neither (it carries its helper library);
/// the repository's examples use the one in `sdk/`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Sources {
    pub(crate) paths: Vec<String>,
    pub(crate) module_root: Option<String>,
    /// The WIT world the build targets (`{world}`), as [`world_of`] finds
    /// it; by default `full` for Python, `plugin` for JavaScript.
    pub(crate) world: Option<&'static str>,
}

/// The world to build a project in `dir` for: `apps` (tools, resources,
/// prompts, completion, views, tool details), `full` (all but the last
/// two) or `plugin` (tools only), as far as the project's own
/// `wit/plugin.wit` has them (a project made before a world was added
/// builds as it always did). For JavaScript `apps` only when `app.js`
/// exports `toolDetails` from `exportPlugin(..)`, `full` when it calls
/// `exportPlugin(..)`, else `plugin` (an app must export every interface
/// of its world, and one that calls only `exportTools` exports `tools`).
/// Python apps get the other exports from the helper library.
pub(crate) fn world_of(language: Language, dir: &Path) -> &'static str {
    let (wit_has_full, wit_has_apps) = match std::fs::read_to_string(dir.join("wit/plugin.wit")) {
        Ok(wit) => (wit.contains("world full"), wit.contains("world apps")),
        Err(_) => (true, true),
    };
    let (exports_all, exports_details) = match language {
        Language::JavaScript => match std::fs::read_to_string(dir.join("app.js")) {
            Ok(app) => (app.contains("exportPlugin("), app.contains("toolDetails")),
            Err(_) => (false, false),
        },
        _ => (true, true),
    };
    if wit_has_apps && exports_all && exports_details {
        "apps"
    } else if wit_has_full && exports_all {
        "full"
    } else {
        "plugin"
    }
}

/// One build, as a program and its arguments, run in the project folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recipe {
    pub(crate) program: &'static str,
    pub(crate) args: Vec<String>,
}

impl Recipe {
    /// The command line as a person types it.
    pub(crate) fn display(&self) -> String {
        std::iter::once(self.program.to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The recipe's template (`recipes/<language>`).
fn template(language: Language) -> &'static str {
    match language {
        Language::Rust => include_str!("recipes/rust"),
        Language::Python => include_str!("recipes/python"),
        Language::JavaScript | Language::TypeScript => include_str!("recipes/js"),
    }
}

/// How to build a project of this language into `output` (Python and
/// JavaScript; a Rust build's output is where Cargo puts it).
pub(crate) fn recipe(language: Language, output: &str, sources: &Sources) -> Recipe {
    let mut words = template(language).split_whitespace();
    let program = words.next().unwrap_or_default();
    let program = [CARGO, COMPONENTIZE_PY.command, COMPONENTIZE_QJS.command]
        .into_iter()
        .find(|known| *known == program)
        .unwrap_or(CARGO);
    let mut args = Vec::new();
    for word in words {
        match word {
            "{output}" => args.push(output.to_string()),
            "{world}" => {
                let default = match language {
                    Language::JavaScript => "plugin",
                    _ => "full",
                };
                args.push(sources.world.unwrap_or(default).to_string());
            }
            "{paths}" => {
                let paths = if sources.paths.is_empty() {
                    vec![".".to_string()]
                } else {
                    sources.paths.clone()
                };
                for path in paths {
                    args.extend(["-p".to_string(), path]);
                }
            }
            "{module}" => args.push(match &sources.module_root {
                // The app relative to the module root it is resolved in.
                Some(_) => sources
                    .paths
                    .first()
                    .map_or("app.js".into(), |dir| format!("{dir}/app.js")),
                None => "app.js".into(),
            }),
            "{module_root}" => {
                if let Some(root) = &sources.module_root {
                    args.extend(["--module-root".to_string(), root.clone()]);
                }
            }
            word => args.push(word.to_string()),
        }
    }
    Recipe { program, args }
}

/// The toolchain a recipe's program names, if it is not Cargo.
pub(crate) fn toolchain(language: Language) -> Option<&'static Toolchain> {
    match language {
        Language::Rust => None,
        Language::Python => Some(&COMPONENTIZE_PY),
        Language::JavaScript => Some(&COMPONENTIZE_QJS),
        // Served by the JavaScript runtime, never built.
        Language::TypeScript => None,
    }
}

const CARGO: &str = "cargo";

/// A toolchain: the command, how to find it and how to install it.
pub(crate) struct Toolchain {
    env: &'static str,
    /// Where `make toolchains` installs it, under this repository.
    pinned: &'static str,
    pub(crate) command: &'static str,
    install: &'static str,
}

/// Why no file runs a toolchain here: what to install, or set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ToolchainMissing {
    /// Its environment variable names a file that is not there.
    #[error("{variable} names {}, which is not there: {install}", file.display())]
    NotThere {
        variable: &'static str,
        file: PathBuf,
        install: &'static str,
    },
    /// Neither pinned nor on `PATH`.
    #[error("{command} not found: {install} (or set {variable})")]
    NotFound {
        command: &'static str,
        install: &'static str,
        variable: &'static str,
    },
}

const COMPONENTIZE_PY: Toolchain = Toolchain {
    env: "TOOLHOST_COMPONENTIZE_PY",
    pinned: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/toolchains/python/bin/componentize-py"
    ),
    command: "componentize-py",
    install: "`make toolchains` in the toolhost repository, or `pip install componentize-py==0.25.1`",
};

const COMPONENTIZE_QJS: Toolchain = Toolchain {
    env: "TOOLHOST_COMPONENTIZE_QJS",
    pinned: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/toolchains/js/node_modules/.bin/componentize-qjs"
    ),
    command: "componentize-qjs",
    install: "`make toolchains` in the toolhost repository, or `npm install -g componentize-qjs@0.4.5`",
};

impl Toolchain {
    /// The file that runs this toolchain here.
    pub(crate) fn find(&self) -> Result<PathBuf, ToolchainMissing> {
        if let Some(path) = std::env::var_os(self.env) {
            let path = PathBuf::from(path);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(ToolchainMissing::NotThere {
                    variable: self.env,
                    file: path,
                    install: self.install,
                })
            };
        }
        let pinned = Path::new(self.pinned);
        if pinned.is_file() {
            return Ok(pinned.to_path_buf());
        }
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(self.command))
            .find(|path| path.is_file())
            .ok_or(ToolchainMissing::NotFound {
                command: self.command,
                install: self.install,
                variable: self.env,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_made_before_0_2_0_builds_for_its_own_world() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(world_of(Language::Python, dir.path()), "apps");
        assert_eq!(world_of(Language::JavaScript, dir.path()), "plugin");
        std::fs::write(
            dir.path().join("app.js"),
            "export const { tools } = exportPlugin({})",
        )
        .unwrap();
        assert_eq!(world_of(Language::JavaScript, dir.path()), "full");
        std::fs::write(
            dir.path().join("app.js"),
            "export const { tools, views, toolDetails } = exportPlugin({})",
        )
        .unwrap();
        assert_eq!(world_of(Language::JavaScript, dir.path()), "apps");
        std::fs::create_dir(dir.path().join("wit")).unwrap();
        std::fs::write(
            dir.path().join("wit/plugin.wit"),
            "package toolhost:plugin@0.1.0;\nworld plugin { export tools; }\n",
        )
        .unwrap();
        assert_eq!(world_of(Language::Python, dir.path()), "plugin");
        assert_eq!(world_of(Language::JavaScript, dir.path()), "plugin");
        std::fs::write(
            dir.path().join("wit/plugin.wit"),
            include_str!("../../../wit/plugin.wit"),
        )
        .unwrap();
        assert_eq!(world_of(Language::Python, dir.path()), "apps");
        std::fs::write(
            dir.path().join("wit/plugin.wit"),
            "package toolhost:plugin@0.2.0;\nworld full { export tools; }\n",
        )
        .unwrap();
        assert_eq!(world_of(Language::Python, dir.path()), "full");
        let sources = Sources {
            world: Some("plugin"),
            ..Sources::default()
        };
        assert!(
            recipe(Language::Python, "x.wasm", &sources)
                .display()
                .contains("-w plugin")
        );
    }

    #[test]
    fn a_project_recipe_builds_from_its_own_folder() {
        let none = Sources::default();
        assert_eq!(
            recipe(Language::Python, "target/wc.wasm", &none).display(),
            "componentize-py -d wit -w full componentize -p . app -o target/wc.wasm"
        );
        assert_eq!(
            recipe(Language::JavaScript, "target/wc.wasm", &none).display(),
            "componentize-qjs --sync --wit wit --world plugin --js app.js -o target/wc.wasm"
        );
        assert_eq!(
            recipe(Language::Rust, "", &none).display(),
            "cargo build --release --target wasm32-wasip2"
        );
    }

    /// The repository's examples build with the same recipes, from the
    /// repository's root, with the helper libraries in `sdk/`: the
    /// Makefile substitutes the same placeholders.
    #[test]
    fn an_example_recipe_adds_the_sdk() {
        let python = Sources {
            paths: vec!["plugins/textpy".into(), "sdk/python".into()],
            ..Sources::default()
        };
        assert_eq!(
            recipe(Language::Python, "plugins/textpy.wasm", &python).display(),
            "componentize-py -d wit -w full componentize -p plugins/textpy -p sdk/python app -o plugins/textpy.wasm"
        );
        let js = Sources {
            paths: vec!["plugins/textjs".into()],
            module_root: Some(".".into()),
            world: Some("full"),
        };
        assert_eq!(
            recipe(Language::JavaScript, "plugins/textjs.wasm", &js).display(),
            "componentize-qjs --sync --wit wit --world full --js plugins/textjs/app.js --module-root . -o plugins/textjs.wasm"
        );
    }
}
