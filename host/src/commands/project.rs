//! A plugin project as `toolhost dev` sees it: its language, which files
//! are its sources, how it is built and where the component lands.
//!
//! The language is read from the folder, in this order:
//! - `Cargo.toml`: Rust, built by `cargo build --release --target
//!   wasm32-wasip2`; the plugin's id is the library's name.
//! - `app.py`: Python, built by componentize-py into `target/<id>.wasm`.
//! - `app.js`: JavaScript, built by componentize-qjs into `target/<id>.wasm`.
//!
//! For Python and JavaScript the plugin's id is the folder's name (`-`
//! becomes `_`), and the contract is the project's own `wit/` (what
//! `toolhost new` writes). The build command is the language's one recipe
//! (`builds/recipe.rs`), which `new` prints and the Makefile runs too.
//!
//! A Python or JavaScript file named on its own (`toolhost dev
//! word_count.py`) is a project of that one file, the plugin named after
//! it; and a source that imports only what its language's runtime carries
//! needs no build at all ([`Project::runtime_source`]): the file itself is
//! the plugin.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::builds::recipe::{self, Sources, ToolchainMissing, world_of};
pub(super) use crate::languages::{self, Language};

/// The plugin id a project, crate, file or folder named `name` serves
/// under: the name with `-` as `_`, as cargo names a crate's library (a
/// plugin id is a valid tool-name prefix, which `-` is not).
pub(crate) fn plugin_id_of(name: &str) -> String {
    name.replace('-', "_")
}

/// At most this many lines of compiler output per failed build.
const MAX_ERROR_LINES: usize = 40;

/// Why a project's build made no component.
#[derive(Debug, thiserror::Error)]
pub(super) enum BuildFailed {
    /// Its language's toolchain is not installed.
    #[error(transparent)]
    Toolchain(#[from] ToolchainMissing),
    /// The output folder cannot be made.
    #[error("cannot create {}: {source}", dir.display())]
    TargetDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// The toolchain could not be started.
    #[error("cannot run the build: {0}")]
    Run(#[source] std::io::Error),
    /// The toolchain refused the source: the lines of its output worth
    /// reading.
    #[error("{0}")]
    Refused(String),
}

#[derive(Clone)]
pub(super) struct Project {
    pub(super) dir: PathBuf,
    pub(super) language: Language,
    /// Build output: never watched.
    pub(super) target_dir: PathBuf,
    /// The `.wasm` file's stem and the plugin's id.
    pub(super) id: String,
    /// A Python or JavaScript project's source file (`app.py`, or the
    /// file named).
    pub(super) source: Option<PathBuf>,
}

impl Project {
    pub(super) async fn inspect(dir: &Path) -> anyhow::Result<Project> {
        if dir.is_file() {
            return Self::inspect_file(dir);
        }
        if dir.join("Cargo.toml").is_file() {
            return Self::inspect_cargo(dir).await;
        }
        let Some(language) = Language::detect(dir) else {
            bail!(
                "{} is not a plugin project: it has no Cargo.toml, app.py or app.js \
                 (`toolhost new NAME [--lang python|js]` makes one)",
                dir.display()
            );
        };
        let dir = dir
            .canonicalize()
            .with_context(|| format!("cannot open {}", dir.display()))?;
        let name = dir
            .file_name()
            .map(|name| plugin_id_of(&name.to_string_lossy()))
            .filter(|name| !name.is_empty())
            .context("the project folder needs a name: it names the plugin")?;
        Ok(Project {
            target_dir: dir.join("target"),
            source: Some(dir.join(language.source_file())),
            dir,
            language,
            id: name,
        })
    }

    /// A project of one Python or JavaScript file: the plugin named after
    /// the file (after its folder for `app.py`, `app.js`).
    fn inspect_file(file: &Path) -> anyhow::Result<Project> {
        let file = file
            .canonicalize()
            .with_context(|| format!("cannot open {}", file.display()))?;
        let language = match file.extension().and_then(|e| e.to_str()) {
            Some("py") => Language::Python,
            Some("js") => Language::JavaScript,
            Some("ts") => Language::TypeScript,
            _ => bail!(
                "{} is no plugin project: name a folder, or a Python (.py), JavaScript (.js) or TypeScript (.ts) file",
                file.display()
            ),
        };
        let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        let stem = file
            .file_stem()
            .map(|stem| plugin_id_of(&stem.to_string_lossy()))
            .unwrap_or_default();
        let id = if stem == "app" {
            dir.file_name()
                .map(|name| plugin_id_of(&name.to_string_lossy()))
                .unwrap_or(stem)
        } else {
            stem
        };
        Ok(Project {
            target_dir: dir.join("target"),
            dir,
            language,
            id,
            source: Some(file),
        })
    }

    /// The source file and its language, when this project is one source
    /// its language's runtime serves as it is: this `toolhost` has the
    /// runtime, and the source imports only what the runtime carries, or
    /// it is a file with no project around it (no `wit/` to build with),
    /// whose load then says what it imports that nothing here carries.
    pub(super) fn runtime_source(&self) -> Option<(Language, String)> {
        let language = self.language;
        if !language.is_source() {
            return None;
        }
        let text = std::fs::read_to_string(self.source.as_ref()?).ok()?;
        let carried = languages::outside(language, &text).is_empty();
        let buildable = self.dir.join("wit").is_dir();
        ((carried || !buildable) && crate::languages::runtimes::component(language).is_ok())
            .then_some((language, text))
    }

    async fn inspect_cargo(dir: &Path) -> anyhow::Result<Project> {
        let manifest = dir.join("Cargo.toml");
        let output = tokio::process::Command::new(cargo())
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(&manifest)
            // From the project's folder, as the build runs: a relative
            // CARGO_TARGET_DIR then names the same folder to both.
            .current_dir(dir)
            .output()
            .await
            .context("cannot run cargo (is Rust installed?)")?;
        if !output.status.success() {
            bail!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let metadata: Value = serde_json::from_slice(&output.stdout)?;
        let manifest = manifest.canonicalize()?;
        let package = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|package| {
                package["manifest_path"].as_str().is_some_and(|path| {
                    Path::new(path).canonicalize().ok().as_deref() == Some(manifest.as_path())
                })
            })
            .context("cargo metadata does not list this package")?;
        let library = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|target| {
                target["crate_types"]
                    .as_array()
                    .is_some_and(|types| types.iter().any(|kind| kind == "cdylib"))
            })
            .context("not a plugin project: its [lib] needs crate-type = [\"cdylib\"]")?;
        let name = library["name"].as_str().unwrap_or_default();
        Ok(Project {
            dir: manifest.parent().unwrap_or(Path::new(".")).to_path_buf(),
            language: Language::Rust,
            target_dir: {
                let target =
                    PathBuf::from(metadata["target_directory"].as_str().unwrap_or("target"));
                target.canonicalize().unwrap_or(target)
            },
            id: plugin_id_of(name),
            source: None,
        })
    }

    /// The folders watched recursively, beside the project's own folder
    /// (watched without its subfolders).
    pub(super) fn source_dirs(&self) -> Vec<PathBuf> {
        let dirs: &[&str] = match self.language {
            Language::Rust => &["src", "wit"],
            Language::Python | Language::JavaScript | Language::TypeScript => &["wit"],
        };
        dirs.iter()
            .map(|dir| self.dir.join(dir))
            .filter(|dir| dir.is_dir())
            .collect()
    }

    /// Whether a file at `path` is a source of this project's language.
    pub(super) fn is_source(&self, path: &Path) -> bool {
        let extension = path.extension().and_then(|ext| ext.to_str());
        match self.language {
            Language::Rust => {
                matches!(extension, Some("rs" | "wit"))
                    || path.file_name().is_some_and(|name| name == "Cargo.toml")
            }
            Language::Python => matches!(extension, Some("py" | "wit")),
            Language::JavaScript => matches!(extension, Some("js" | "mjs" | "wit")),
            Language::TypeScript => matches!(extension, Some("ts")),
        }
    }

    /// Builds the component; the toolchain's errors when it fails.
    pub(super) async fn build(&self) -> Result<PathBuf, BuildFailed> {
        let output_path = match self.language {
            Language::Rust => self
                .target_dir
                .join("wasm32-wasip2/release")
                .join(format!("{}.wasm", self.id)),
            Language::Python | Language::JavaScript | Language::TypeScript => {
                self.target_dir.join(format!("{}.wasm", self.id))
            }
        };
        let sources = Sources {
            world: Some(world_of(self.language, &self.dir)),
            ..Sources::default()
        };
        let recipe = recipe::recipe(self.language, &output_path.to_string_lossy(), &sources);
        let program = match recipe::toolchain(self.language) {
            Some(toolchain) => toolchain.find()?.into_os_string(),
            None => cargo(),
        };
        let mut command = tokio::process::Command::new(program);
        command.args(&recipe.args);
        if self.language == Language::Rust {
            command.args(["--message-format", "short", "--color", "never"]);
        }
        if self.language != Language::Rust {
            // Both toolchains are Rust programs: a backtrace of their own
            // would bury the user's error.
            command
                .env("RUST_BACKTRACE", "0")
                .env("RUST_LIB_BACKTRACE", "0");
            std::fs::create_dir_all(&self.target_dir).map_err(|source| BuildFailed::TargetDir {
                dir: self.target_dir.clone(),
                source,
            })?;
        }
        let output = command
            .current_dir(&self.dir)
            .output()
            .await
            .map_err(BuildFailed::Run)?;
        if output.status.success() {
            return Ok(output_path);
        }
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        if self.language != Language::Rust {
            // componentize-py and componentize-qjs report on both streams.
            text = format!("{}\n{text}", String::from_utf8_lossy(&output.stdout));
        }
        Err(BuildFailed::Refused(self.summarise_failure(&text)))
    }

    /// The lines of a failed build worth reading: the compiler's first
    /// errors for Rust, the end of the traceback for Python and JS.
    fn summarise_failure(&self, output: &str) -> String {
        // Whatever follows a Rust backtrace header is the toolchain's own.
        let output = output
            .split_once("Stack backtrace:")
            .map_or(output, |(before, _)| before);
        let lines: Vec<&str> = output
            .lines()
            .filter(|line| {
                let line = line.trim_start();
                !(line.is_empty()
                    || line.starts_with("Compiling")
                    || line.starts_with("Blocking")
                    || line.starts_with("Updating")
                    || line.starts_with("Locking")
                    || line.starts_with("Downloaded")
                    || line.starts_with("Downloading"))
            })
            .collect();
        let more = lines.len().saturating_sub(MAX_ERROR_LINES);
        let mut text = if self.language == Language::Rust {
            let mut text = lines[..lines.len() - more].join("\n");
            if more > 0 {
                text.push_str(&format!("\n... and {more} more lines"));
            }
            text
        } else {
            let mut text = if more > 0 {
                format!("... {more} lines before\n")
            } else {
                String::new()
            };
            text.push_str(&lines[more..].join("\n"));
            text
        };
        if output.contains("wasm32-wasip2") && output.contains("target may not be installed") {
            text.push_str("\nhint: rustup target add wasm32-wasip2");
        }
        text
    }
}

pub(super) fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The modules of project `dir` besides its one source file, the helper
/// library and its tests, which the server would not have.
pub(super) fn other_modules(dir: &std::path::Path, language: Language) -> Vec<String> {
    let (extensions, own): (&[&str], &[&str]) = match language {
        Language::Python => (&["py"], &["app.py", "test_app.py", "toolhost_plugin.py"]),
        _ => (&["js", "mjs"], &["app.js", "toolhost.js", "test.mjs"]),
    };
    let mut more: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name.rsplit_once('.')
                .is_some_and(|(_, ext)| extensions.contains(&ext))
                && !own.contains(&name.as_str())
        })
        .collect();
    more.sort();
    more
}

/// A Python project's folder as a tool folder (a zip of `app.py` and
/// every file beside and below it, but the helper library, the tests,
/// `wit/`, `target/`, `__pycache__` and hidden ones), which `push` sends
/// and `dev` drops in when the project is more than `app.py`.
pub(super) fn tool_folder_zip(dir: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Write;
    let skipped = [
        "wit",
        "target",
        "__pycache__",
        "toolhost_plugin.py",
        "test_app.py",
    ];
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&folder)?.flatten().collect();
        entries.sort_by_key(|entry| entry.file_name());
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || skipped.contains(&name.as_str()) {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let relative = path.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
                // A fixed time: the same files make the same zip (one
                // version), whenever they were saved.
                let options = zip::write::SimpleFileOptions::default()
                    .last_modified_time(zip::DateTime::default());
                zip.start_file(relative, options)?;
                zip.write_all(&std::fs::read(&path)?)?;
            }
        }
    }
    Ok(zip.finish()?.into_inner())
}
