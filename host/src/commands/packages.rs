//! `toolhost packages add|list|remove`: the room's package store
//! (`languages/packages.rs`), chosen by an admin, for sources to import
//! live. `add` resolves what was asked before and what is asked now
//! together into a fresh folder:
//! - Python: pip, from PyPI (or `--from DIR`, a folder of wheels, for a
//!   room without internet): pure-Python wheels only (pip is told the
//!   platform is `any` and the ABI `none`, so a package with native code
//!   finds no wheel and is refused with the reason), no script of any
//!   package run, no bytecode written;
//! - JavaScript: npm with `--ignore-scripts` (no package's code runs; `--from
//!   DIR` is an npm cache to install from offline), a package with native
//!   code refused, then each package bundled with what it needs into one
//!   script by a pinned esbuild.
//!
//! The new folder is put in place of the old, then the lock is renamed into
//! place; a serving server sees the lock change and loads its sources
//! again. Nothing is downloaded by a server.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::languages::Language;
use crate::languages::packages::{self, Lock, Package, STORE_DIR};

/// The CPython version of toolhost's Python runtime: the wheels chosen
/// must be for it.
const RUNTIME_PYTHON: &str = "3.14";

#[derive(Args)]
pub(super) struct PackagesOptions {
    #[command(subcommand)]
    action: Action,
}

#[derive(Args, Clone)]
struct Where {
    /// The plugin folder whose store to change [default: plugins].
    #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
    plugins: PathBuf,
    /// The language of the packages: `python` (wheels from PyPI) or `js`
    /// (npm packages, each bundled with what it needs; `ts` sources share
    /// them).
    #[arg(long = "lang", value_enum, default_value = "python")]
    language: Language,
}

#[derive(Subcommand)]
enum Action {
    /// Add packages (and what they need): pure-Python wheels from PyPI.
    Add {
        #[command(flatten)]
        place: Where,
        /// A folder of wheels to resolve from instead of PyPI (a room
        /// without internet).
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// What to add, as pip spells it: `python-dateutil`,
        /// `beautifulsoup4>=4.12`.
        #[arg(required = true, value_name = "SPEC")]
        specs: Vec<String>,
    },
    /// List what the store holds.
    List {
        #[command(flatten)]
        place: Where,
    },
    /// Remove packages asked for before (what only they needed goes too).
    Remove {
        #[command(flatten)]
        place: Where,
        /// A folder of wheels to resolve what stays from, instead of PyPI.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
    },
}

impl PackagesOptions {
    pub(super) fn run(self) -> anyhow::Result<u8> {
        match self.action {
            Action::Add { place, from, specs } => {
                let mut lock = read_lock(&place)?;
                let section = lock.section_mut(place.language).expect("checked");
                for spec in specs {
                    let name = project_name(&spec);
                    section
                        .requested
                        .retain(|asked| project_name(asked) != name);
                    section.requested.push(spec);
                }
                resolve(&place, from.as_deref(), lock)
            }
            Action::Remove { place, from, names } => {
                let mut lock = read_lock(&place)?;
                let section = lock.section_mut(place.language).expect("checked");
                for name in &names {
                    let before = section.requested.len();
                    let name = normalise(name);
                    section
                        .requested
                        .retain(|asked| project_name(asked) != name);
                    if section.requested.len() == before {
                        bail!("{name} was never added (`toolhost packages list` says what was)");
                    }
                }
                resolve(&place, from.as_deref(), lock)
            }
            Action::List { place } => {
                let lock = read_lock(&place)?;
                let section = lock.section(place.language).expect("checked");
                if section.packages.is_empty() {
                    println!(
                        "no {} packages in {}",
                        place.language.as_str(),
                        place.plugins.display()
                    );
                }
                for package in &section.packages {
                    let asked = section.requested.iter().any(|spec| {
                        spec_name(place.language, spec) == spec_name(place.language, &package.name)
                    });
                    println!(
                        "{} {}{}  import {}",
                        package.name,
                        package.version,
                        if asked { "" } else { " (needed by another)" },
                        package.modules.join(", ")
                    );
                }
                Ok(0)
            }
        }
    }
}

fn read_lock(place: &Where) -> anyhow::Result<Lock> {
    if !place.plugins.is_dir() {
        bail!(
            "{} is not a folder: name the plugin folder with --plugins",
            place.plugins.display()
        );
    }
    if place.language == Language::Rust {
        bail!("a Rust plugin is built with its own dependencies: the store is for sources");
    }
    Ok(Lock::read(&place.plugins)?)
}

/// Everything `lock` asks for, resolved into a fresh folder that replaces
/// the store's, then the lock written.
fn resolve(place: &Where, from: Option<&Path>, mut lock: Lock) -> anyhow::Result<u8> {
    let language = place.language;
    let store = packages::store_dir(&place.plugins, language);
    let parent = place.plugins.join(STORE_DIR);
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot make {}", parent.display()))?;
    let requested = lock.section(language).expect("checked").requested.clone();
    let fresh = parent.join(format!(".{}-new-{}", language.as_str(), std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    let resolved = if requested.is_empty() {
        std::fs::create_dir_all(&fresh)?;
        Vec::new()
    } else if language.runtime() == Language::JavaScript {
        match npm_bundle(&requested, from, &fresh) {
            Ok(resolved) => resolved,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&fresh);
                return Err(error);
            }
        }
    } else {
        match pip_install(&requested, from, &fresh) {
            Ok(resolved) => resolved,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&fresh);
                return Err(error);
            }
        }
    };
    // The old folder out of the way, the new one in, the old one gone.
    let old = parent.join(format!(".{}-old-{}", language.as_str(), std::process::id()));
    if store.exists() {
        std::fs::rename(&store, &old)?;
    }
    std::fs::rename(&fresh, &store)?;
    let _ = std::fs::remove_dir_all(&old);
    lock.section_mut(language).expect("checked").packages = resolved;
    let file = place.plugins.join(packages::LOCK_FILE);
    crate::registry::layout::write_by_rename(&file, lock.to_text().as_bytes())?;
    let section = lock.section(language).expect("checked");
    for package in &section.packages {
        println!(
            "{} {}  import {}",
            package.name,
            package.version,
            package.modules.join(", ")
        );
    }
    println!(
        "{} {} packages in {} ({}); a serving server loads its sources again",
        section.packages.len(),
        language.as_str(),
        store.display(),
        file.display()
    );
    Ok(0)
}

/// pip's `install --target` of `specs` into `target`: pure wheels for the
/// runtime's CPython only, no scripts run. Each installed package, with
/// its wheel's SHA-256 and its top-level modules.
fn pip_install(
    specs: &[String],
    from: Option<&Path>,
    target: &Path,
) -> anyhow::Result<Vec<Package>> {
    let python = std::env::var_os("TOOLHOST_PYTHON").unwrap_or_else(|| "python3".into());
    let report = target.with_extension("report.json");
    let mut command = std::process::Command::new(&python);
    command
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .args(["--no-warn-conflicts", "--no-compile", "--only-binary=:all:"])
        .args([
            "--platform",
            "any",
            "--implementation",
            "py",
            "--abi",
            "none",
        ])
        .args(["--python-version", RUNTIME_PYTHON])
        .arg("--target")
        .arg(target)
        .arg("--report")
        .arg(&report)
        .env("PIP_NO_INPUT", "1")
        .stdin(Stdio::null());
    if let Some(dir) = from {
        command.arg("--no-index").arg("--find-links").arg(dir);
    }
    command.args(specs);
    let output = command.output().with_context(|| {
        format!(
            "cannot run {} -m pip (set TOOLHOST_PYTHON to a Python with pip)",
            python.to_string_lossy()
        )
    })?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        let _ = std::fs::remove_file(&report);
        for line in said.lines() {
            if let Some(name) = line
                .trim()
                .strip_prefix("ERROR: No matching distribution found for ")
            {
                bail!(
                    "{name}: no pure-Python wheel (py3-none-any) of it for CPython {RUNTIME_PYTHON}: \
                     it needs native code (or ships no wheel), which toolhost's Python runtime \
                     cannot load; only pure-Python packages can be added"
                );
            }
        }
        bail!(
            "pip could not install {}:\n{}",
            specs.join(" "),
            said.trim()
        );
    }
    let text = std::fs::read_to_string(&report).context("pip wrote no report")?;
    let _ = std::fs::remove_file(&report);
    let report: PipReport = serde_json::from_str(&text).context("pip's report")?;
    // A native file in the folder: refused, whatever the wheel's tag said.
    if let Some(native) = walk(target).into_iter().find(|path| {
        path.extension()
            .is_some_and(|e| e == "so" || e == "pyd" || e == "dylib")
    }) {
        bail!(
            "{} is native code, which toolhost's Python runtime cannot load",
            native.strip_prefix(target).unwrap_or(&native).display()
        );
    }
    report
        .install
        .into_iter()
        .map(|item| {
            let name = item.metadata.name;
            let version = item.metadata.version;
            let sha256 = item
                .download_info
                .archive_info
                .and_then(|info| info.hashes.and_then(|hashes| hashes.sha256))
                .with_context(|| format!("pip's report gives no SHA-256 for {name}"))?;
            let modules = modules_of(target, &name, &version);
            Ok(Package {
                name,
                version,
                sha256,
                modules,
            })
        })
        .collect()
}

/// The top-level modules a wheel installed into `target`: the first part
/// of each path its `RECORD` lists, but its metadata and scripts.
fn modules_of(target: &Path, name: &str, version: &str) -> Vec<String> {
    let dist_info = format!("{}-{version}.dist-info", name.replace('-', "_"));
    let record = std::fs::read_dir(target)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.eq_ignore_ascii_case(&dist_info))
        })
        .and_then(|dir| std::fs::read_to_string(dir.join("RECORD")).ok())
        .unwrap_or_default();
    let mut modules: Vec<String> = record
        .lines()
        .filter_map(|line| line.split(',').next())
        .filter_map(|path| path.split('/').next())
        .filter(|first| {
            !first.ends_with(".dist-info")
                && !first.ends_with(".data")
                && *first != "__pycache__"
                && *first != ".."
        })
        .map(|first| first.trim_end_matches(".py").to_string())
        .filter(|module| {
            !module.is_empty() && module.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
        .collect();
    modules.sort();
    modules.dedup();
    modules
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// The esbuild that bundles JavaScript packages: pinned, installed with
/// them and run on the admin's machine (never a package's own code: npm
/// runs no install script).
const ESBUILD: &str = "esbuild@0.25.10";

/// npm's install of `specs` into a work folder (`--ignore-scripts`: no
/// package's code runs), each requested package checked for native code,
/// then bundled with what it needs into one script of `target`
/// (`bundle_file`), which the JavaScript runtime evaluates before a source
/// that imports it. Each package, with its bundle's SHA-256.
fn npm_bundle(
    specs: &[String],
    from: Option<&Path>,
    target: &Path,
) -> anyhow::Result<Vec<Package>> {
    let npm = std::env::var_os("TOOLHOST_NPM").unwrap_or_else(|| "npm".into());
    let work = target.with_extension("work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(target)?;
    let result = (|| {
        let mut command = std::process::Command::new(&npm);
        command
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg("--prefix")
            .arg(&work)
            .stdin(Stdio::null());
        if let Some(dir) = from {
            command.arg("--offline").arg("--cache").arg(dir);
        }
        command.args(specs).arg(ESBUILD);
        let output = command.output().with_context(|| {
            format!(
                "cannot run {} (set TOOLHOST_NPM to an npm)",
                npm.to_string_lossy()
            )
        })?;
        if !output.status.success() {
            bail!(
                "npm could not install {}:\n{}",
                specs.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let modules = work.join("node_modules");
        let mut packages = Vec::new();
        for spec in specs {
            let name = npm_name(spec);
            let folder = modules.join(&name);
            let manifest: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(folder.join("package.json"))
                    .with_context(|| format!("{name} was not installed"))?,
            )?;
            if let Some(native) = walk(&folder).into_iter().find(|path| {
                path.extension().is_some_and(|e| e == "node")
                    || path.file_name().is_some_and(|n| n == "binding.gyp")
            }) {
                bail!(
                    "{name}: {} is native code, which toolhost's JavaScript runtime cannot load; \
                     only pure JavaScript packages can be added",
                    native.strip_prefix(&folder).unwrap_or(&native).display()
                );
            }
            if manifest["gypfile"] == true {
                bail!(
                    "{name} builds native code (gypfile), which toolhost's JavaScript runtime cannot load"
                );
            }
            let entry = work.join("entry.mjs");
            std::fs::write(
                &entry,
                format!(
                    "import * as all from {name:?};\nexport * from {name:?};\n\
                     export default (\"default\" in all ? all.default : all);\n"
                ),
            )?;
            let bundle = target.join(packages::bundle_file(&name));
            let output = std::process::Command::new(modules.join(".bin/esbuild"))
                .arg(&entry)
                .args([
                    "--bundle",
                    "--format=iife",
                    "--global-name=__toolhost_package",
                ])
                .args([
                    "--platform=neutral",
                    "--main-fields=module,main",
                    "--target=es2022",
                ])
                .args(["--log-level=error", "--legal-comments=none"])
                .arg(format!("--outfile={}", bundle.display()))
                .output()
                .context("cannot run esbuild")?;
            if !output.status.success() {
                bail!(
                    "{name} could not be bundled for the runtime (a Node built-in or a native \
                     module, perhaps):\n{}",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
            let bytes = std::fs::read(&bundle)?;
            packages.push(Package {
                name: name.clone(),
                version: manifest["version"].as_str().unwrap_or_default().to_string(),
                sha256: crate::registry::plugin::content_hash(&bytes),
                modules: vec![name],
            });
        }
        Ok(packages)
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The package an npm spec names: `yaml` of `yaml@2`, `@scope/x` of
/// `@scope/x@^1`.
fn npm_name(spec: &str) -> String {
    let spec = spec.trim();
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(rest) => ("@", rest),
        None => ("", spec),
    };
    let name = rest.split('@').next().unwrap_or(rest);
    format!("{scope}{name}")
}

/// A project's name as pip compares them (PEP 503): lower case, runs of
/// `-`, `_` and `.` as one `-`.
fn normalise(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The package a spec names, as the language's registry compares them.
fn spec_name(language: Language, spec: &str) -> String {
    match language.runtime() {
        Language::JavaScript => npm_name(spec),
        _ => project_name(spec),
    }
}

/// The project a spec names: `beautifulsoup4` of `beautifulsoup4>=4.12`.
fn project_name(spec: &str) -> String {
    let end = spec
        .find(|c: char| "<>=!~[;@ ".contains(c))
        .unwrap_or(spec.len());
    normalise(&spec[..end])
}

#[derive(serde::Deserialize)]
struct PipReport {
    install: Vec<PipInstalled>,
}

#[derive(serde::Deserialize)]
struct PipInstalled {
    metadata: PipMetadata,
    download_info: PipDownload,
}

#[derive(serde::Deserialize)]
struct PipMetadata {
    name: String,
    version: String,
}

#[derive(serde::Deserialize)]
struct PipDownload {
    archive_info: Option<PipArchive>,
}

#[derive(serde::Deserialize)]
struct PipArchive {
    hashes: Option<PipHashes>,
}

#[derive(serde::Deserialize)]
struct PipHashes {
    sha256: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_compared_by_their_projects_name() {
        assert_eq!(project_name("beautifulsoup4>=4.12"), "beautifulsoup4");
        assert_eq!(project_name("Python_Dateutil"), "python-dateutil");
        assert_eq!(project_name("zope.interface[x]"), "zope-interface");
        assert_eq!(normalise("a__b..c"), "a-b-c");
        assert_eq!(npm_name("yaml@2"), "yaml");
        assert_eq!(npm_name("@scope/x@^1"), "@scope/x");
    }
}
