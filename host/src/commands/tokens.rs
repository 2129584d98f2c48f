//! `toolhost tokens [--people N | --names a,b,…]`: a workshop room in one
//! step. Writes the tokens file `serve --tokens` reads (one group, an
//! instructor who is admin and stored hashed, one publisher per attendee
//! with a fresh secret) and a printable sheet with one card per attendee
//! (their token, the server's address, the two lines that publish a first
//! tool), and prints the instructor's secret, once: it is stored nowhere.
//!
//! Every name is checked as a namespace before anything is written; an
//! existing file is replaced only with `--force`; each file is written
//! beside its place and renamed over it (mode 0600: both hold secrets),
//! the tokens file only once the server's own reader has taken it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine as _;
use clap::Args;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::edge::auth::Role;
use crate::registry::layout::is_valid_namespace;

#[derive(Args)]
pub(super) struct TokensOptions {
    /// How many attendees: named attendee01, attendee02, … (numbers
    /// zero-padded to the width of N).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 30,
        value_parser = clap::value_parser!(u16).range(1..=9999),
        conflicts_with = "names"
    )]
    people: u16,
    /// The attendees' names instead, comma-separated. Each name is its
    /// person's namespace: 1 to 24 letters, digits, `_` or `-`, starting
    /// with a letter, never containing `__`.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    names: Option<Vec<String>>,
    /// The instructor's name: an admin (who sees every tool) and the
    /// namespace their published tools go into, which every attendee sees.
    #[arg(long, value_name = "NAME", default_value = "instructor")]
    instructor: String,
    /// The `[[group]]` the attendees' tokens name: the top level, the
    /// instructor's namespace and the person's own.
    #[arg(long, value_name = "NAME", default_value = "room")]
    group: String,
    /// Where to write the tokens file (for `toolhost serve --tokens`).
    #[arg(long, value_name = "FILE", default_value = "tokens.toml")]
    out: PathBuf,
    /// Where to write the printable sheet, one card per attendee.
    #[arg(long, value_name = "FILE", default_value = "tokens-sheet.html")]
    sheet: PathBuf,
    /// The server's address as attendees type it, printed on their cards.
    #[arg(long, default_value = "http://localhost:8000")]
    url: String,
    /// Replace --out and --sheet if they exist.
    #[arg(long)]
    force: bool,
}

/// The tokens file, as `edge/auth/file.rs` reads it.
#[derive(Serialize)]
struct TokensFile {
    group: Vec<GroupEntry>,
    token: Vec<TokenEntry>,
}

#[derive(Serialize)]
struct GroupEntry {
    name: String,
    tools: Vec<String>,
}

#[derive(Serialize)]
struct TokenEntry {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<String>>,
}

/// One attendee with their fresh token.
struct Attendee {
    name: String,
    secret: String,
}

/// What the rule for a name says, for the error that refuses one.
const NAME_RULE: &str = "a name is 1 to 24 letters, digits, `_` or `-`, starting with a letter, \
     never containing `__` nor ending in `_` or `-data` (it is the person's namespace)";

impl TokensOptions {
    pub(super) fn run(self) -> anyhow::Result<u8> {
        let attendees = match &self.names {
            Some(names) => names.iter().map(|name| name.trim().to_string()).collect(),
            None => numbered(self.people),
        };
        check_names(&attendees, &self.instructor, &self.group)?;
        let url = Address::parse(&self.url)?;
        let (out, sheet) = (&self.out, &self.sheet);
        if same_place(out, sheet) {
            bail!(
                "--out and --sheet are the same file ({}): give the sheet another name",
                out.display()
            );
        }
        if !self.force {
            for path in [out, sheet] {
                if path.exists() {
                    bail!(
                        "{} exists: nothing was written (--force replaces it)",
                        path.display()
                    );
                }
            }
        }

        let mut secrets = Secrets::default();
        let instructor_secret = secrets.fresh()?;
        let attendees = attendees
            .into_iter()
            .map(|name| {
                Ok(Attendee {
                    name,
                    secret: secrets.fresh()?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let tokens_text = tokens_file(
            &self.instructor,
            &instructor_secret,
            &self.group,
            &attendees,
        )?;
        let sheet_text = sheet_html(&url, &attendees);

        // Both are made in full before either takes its place, the tokens
        // file checked by the reader the server uses: a refusal writes
        // nothing.
        let tokens = staged(out, &tokens_text)?;
        crate::edge::auth::check_tokens_file(tokens.path())
            .context("the tokens file made is not one the server reads (a bug)")?;
        let printable = staged(sheet, &sheet_text)?;
        // The sheet first, the tokens file last: a server may be watching
        // the tokens file, and once it is replaced the instructor's token
        // (stored only as a hash) must be printed; so nothing can fail
        // after it takes its place. A sheet placed for a tokens file that
        // then could not be is taken away again when it was new.
        let sheet_existed = sheet.exists();
        place(printable, sheet, self.force)?;
        if let Err(error) = place(tokens, out, self.force) {
            if !sheet_existed {
                let _ = std::fs::remove_file(sheet);
            }
            return Err(error);
        }

        print!(
            "{}",
            summary(&self, &url, &instructor_secret, attendees.len())
        );
        Ok(0)
    }
}

/// `attendee01` … for `count` people, the numbers as wide as `count`.
fn numbered(count: u16) -> Vec<String> {
    let width = count.to_string().len();
    (1..=count)
        .map(|n| format!("attendee{n:0width$}"))
        .collect()
}

/// Every name a namespace, none given twice (the instructor included),
/// and the group's name one too.
fn check_names(attendees: &[String], instructor: &str, group: &str) -> anyhow::Result<()> {
    let mut seen = BTreeSet::new();
    for name in std::iter::once(instructor).chain(attendees.iter().map(String::as_str)) {
        if !is_valid_namespace(name) {
            bail!("the name {name:?} is refused: {NAME_RULE}; nothing was written");
        }
        if !seen.insert(name) {
            bail!(
                "the name {name:?} is given twice: each person needs their own; nothing was written"
            );
        }
    }
    if !is_valid_namespace(group) {
        bail!("the group name {group:?} is refused: {NAME_RULE}; nothing was written");
    }
    Ok(())
}

/// Secrets from the operating system, each one distinct.
#[derive(Default)]
struct Secrets(BTreeSet<String>);

impl Secrets {
    /// 32 random bytes, base64url without padding (43 characters).
    fn fresh(&mut self) -> anyhow::Result<String> {
        loop {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes)
                .map_err(|error| anyhow::anyhow!("no randomness from the system: {error}"))?;
            let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
            if self.0.insert(secret.clone()) {
                return Ok(secret);
            }
        }
    }
}

/// The tokens file's text: a header saying what made it and how to add a
/// person, then the group, the instructor (hashed) and the attendees.
fn tokens_file(
    instructor: &str,
    instructor_secret: &str,
    group: &str,
    attendees: &[Attendee],
) -> anyhow::Result<String> {
    let digest: String = Sha256::digest(instructor_secret.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let mut token = vec![TokenEntry {
        name: instructor.to_string(),
        secret: None,
        sha256: Some(digest),
        role: Role::Admin.as_str(),
        tools: None,
    }];
    token.extend(attendees.iter().map(|attendee| TokenEntry {
        name: attendee.name.clone(),
        secret: Some(attendee.secret.clone()),
        sha256: None,
        role: Role::Publisher.as_str(),
        tools: Some(vec![format!("@{group}")]),
    }));
    let file = TokensFile {
        group: vec![GroupEntry {
            name: group.to_string(),
            tools: vec![
                "*".to_string(),
                format!("{instructor}/*"),
                "{self}/*".to_string(),
            ],
        }],
        token,
    };
    let body = toml::to_string(&file).context("writing the tokens file")?;
    Ok(format!(
        "# A workshop room, written by `toolhost tokens`; serve it with\n\
         # `toolhost serve --tokens FILE`, which reloads it when it changes.\n\
         #\n\
         # Group {group} is what attendees see: the top level (plugins dropped into\n\
         # the plugin folder; only an admin publishes there), the namespace of\n\
         # {instructor}, and their own. {instructor} is admin and sees everything;\n\
         # that token is stored as its SHA-256 and was printed once, when this\n\
         # file was made.\n\
         #\n\
         # To add a person, add a table like these (a secret of 16 characters or\n\
         # more, such as `openssl rand -base64 32`), writing a copy and renaming\n\
         # it over this file:\n\
         #\n\
         # [[token]]\n\
         # name = \"newcomer\"\n\
         # secret = \"...\"\n\
         # role = \"publisher\"\n\
         # tools = [\"@{group}\"]\n\
         \n{body}"
    ))
}

/// The server's address as attendees type it (no trailing `/`).
struct Address {
    url: String,
    host: String,
    port: Option<u16>,
}

impl Address {
    fn parse(url: &str) -> anyhow::Result<Address> {
        let url = url.trim().trim_end_matches('/');
        let uri: http::Uri = url
            .parse()
            .map_err(|error| anyhow::anyhow!("--url {url:?} is not a URL: {error}"))?;
        let (Some(scheme), Some(host)) = (uri.scheme_str(), uri.host()) else {
            bail!("--url {url:?}: give the whole address, such as http://workshop.local:8000");
        };
        if !matches!(scheme, "http" | "https") {
            bail!("--url {url:?}: the address is http:// or https://");
        }
        if uri.query().is_some() || url.contains('#') {
            bail!("--url {url:?}: the server's address, without a query");
        }
        Ok(Address {
            url: url.to_string(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: uri.port_u16(),
        })
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.url)
    }
}

/// `text` with HTML's special characters escaped, for text and attributes.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

const SHEET_STYLE: &str = "\
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; }
h1 { font-size: 1.2rem; }
.card { border: 1px dashed #666; border-radius: 6px; padding: 0.8rem 1rem; margin: 0 0 1rem; }
.card h2 { font-size: 1.3rem; margin: 0 0 0.5rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 0.8rem; margin: 0 0 0.5rem; }
dt { font-weight: 600; }
dd { margin: 0; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9rem; }
code { word-break: break-all; }
pre { background: #f3f3f3; padding: 0.5rem; margin: 0; white-space: pre-wrap; word-break: break-all; }
@media print {
  body { margin: 0; }
  .intro { display: none; }
  .card { break-inside: avoid; page-break-inside: avoid; }
  pre { background: none; border: 1px solid #ccc; }
}
";

/// The printable sheet: one card per attendee, nothing fetched from
/// anywhere, every value escaped. The instructor is not on it.
fn sheet_html(url: &Address, attendees: &[Attendee]) -> String {
    let (page, mcp) = (escape(&url.url), escape(&url.mcp()));
    let mut html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Workshop tokens</title>\n<style>\n{SHEET_STYLE}</style>\n</head>\n<body>\n\
         <h1 class=\"intro\">Workshop tokens: one card per person, cut along the lines. \
         Each token is its holder's alone.</h1>\n"
    );
    for attendee in attendees {
        let (name, token) = (escape(&attendee.name), escape(&attendee.secret));
        let _ = write!(
            html,
            "<section class=\"card\">\n<h2>{name}</h2>\n<dl>\n\
             <dt>Page</dt><dd><code>{page}</code></dd>\n\
             <dt>Token</dt><dd><code>{token}</code></dd>\n\
             <dt>MCP</dt><dd><code>{mcp}</code></dd>\n</dl>\n\
             <p>From a terminal:</p>\n\
             <pre>export TOOLHOST_SERVER={page} TOOLHOST_TOKEN={token}\n\
             toolhost new word_count --lang python &amp;&amp; cd word_count &amp;&amp; toolhost push .</pre>\n\
             </section>\n"
        );
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// `text` in a temporary file beside `path`, mode 0600, synced: ready to
/// be renamed into place.
fn staged(path: &Path, text: &str) -> anyhow::Result<tempfile::NamedTempFile> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut file = tempfile::Builder::new()
        .prefix(".toolhost-tokens-")
        .tempfile_in(folder)
        .with_context(|| format!("cannot write in {}", folder.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(text.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("cannot write beside {}", path.display()))?;
    Ok(file)
}

/// Renames a staged file into place: over what is there only when forced.
fn place(staged: tempfile::NamedTempFile, path: &Path, force: bool) -> anyhow::Result<()> {
    let placed = if force {
        staged.persist(path).map(drop)
    } else {
        staged.persist_noclobber(path).map(drop)
    };
    placed.map_err(|error| anyhow::anyhow!("cannot write {}: {}", path.display(), error.error))
}

/// Whether two paths name one file (compared as written, and by their
/// folders once those exist).
fn same_place(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let canonical = |path: &Path| -> Option<PathBuf> {
        let folder = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        Some(folder.canonicalize().ok()?.join(path.file_name()?))
    };
    matches!((canonical(a), canonical(b)), (Some(a), Some(b)) if a == b)
}

/// What is printed: the instructor's secret, once; the files; what next.
fn summary(options: &TokensOptions, url: &Address, secret: &str, attendees: usize) -> String {
    let (out, sheet) = (options.out.display(), options.sheet.display());
    let instructor = &options.instructor;
    let port = url.port.unwrap_or(8000);
    let loopback = crate::edge::guard::LOOPBACK_HOSTS.contains(&url.host.as_str());
    let allowed = if loopback {
        String::new()
    } else {
        format!(" --allowed-host {}", url.host)
    };
    format!(
        "{instructor} token (shown once, stored hashed): {secret}\n\
         \n\
         wrote {out}: group {group} (the top level, {instructor}/* and each person's own), \
         {instructor} as admin, {attendees} attendee(s) as publishers\n\
         wrote {sheet}: one card per attendee with their token, for {page}; print it and cut \
         (it holds their secrets: keep it like the tokens file)\n\
         \n\
         next:\n\
         \x20 toolhost serve --listen 0.0.0.0:{port} --tokens {out} --builds python,js{allowed}\n\
         \n\
         your own tools reach the room from namespace {instructor}:\n\
         \x20 TOOLHOST_SERVER={page} TOOLHOST_TOKEN={secret} toolhost push my_tool.wasm\n\
         or drop .wasm files into the plugin folder's top level (plugins/ by default).\n",
        group = options.group,
        page = url.url,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn names_are_namespaces_and_each_is_given_once() {
        assert!(check_names(&names(&["ada", "grace"]), "instructor", "room").is_ok());
        let refused = |attendees: &[&str], instructor: &str, group: &str| {
            format!(
                "{:#}",
                check_names(&names(attendees), instructor, group).unwrap_err()
            )
        };
        let bad = refused(&["ada", "bad name"], "instructor", "room");
        assert!(
            bad.contains("\"bad name\"") && bad.contains("1 to 24"),
            "{bad}"
        );
        for name in [
            "",
            "9lives",
            "a__b",
            "ada_",
            "ada-data",
            "x234567890123456789012345",
        ] {
            let why = refused(&[name], "instructor", "room");
            assert!(why.contains(&format!("{name:?}")), "{name}: {why}");
        }
        let twice = refused(&["ada", "grace", "ada"], "instructor", "room");
        assert!(twice.contains("\"ada\" is given twice"), "{twice}");
        let clash = refused(&["instructor"], "instructor", "room");
        assert!(clash.contains("given twice"), "{clash}");
        let instructor = refused(&["ada"], "the boss", "room");
        assert!(instructor.contains("\"the boss\""), "{instructor}");
        let group = refused(&["ada"], "instructor", "a room");
        assert!(group.contains("group name \"a room\""), "{group}");
    }

    #[test]
    fn attendees_are_numbered_to_the_width_of_the_count() {
        assert_eq!(numbered(3), names(&["attendee1", "attendee2", "attendee3"]));
        let thirty = numbered(30);
        assert_eq!(thirty.len(), 30);
        assert_eq!(
            (thirty[0].as_str(), thirty[29].as_str()),
            ("attendee01", "attendee30")
        );
        assert_eq!(numbered(100)[4], "attendee005");
    }

    #[test]
    fn the_sheet_escapes_every_value() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        let url = Address::parse("http://workshop.local:8000/?x=1").err();
        assert!(url.is_some(), "a query is refused");
        let url = Address {
            url: "http://h/<b>".into(),
            host: "h".into(),
            port: None,
        };
        let attendees = [Attendee {
            name: "ada".into(),
            secret: "s<script>&\"'".into(),
        }];
        let html = sheet_html(&url, &attendees);
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
        assert!(html.contains("s&lt;script&gt;&amp;&quot;&#39;"), "{html}");
        assert!(html.contains("http://h/&lt;b&gt;/mcp"), "{html}");
        assert!(
            !html.contains("src=") && !html.contains("<link") && !html.contains("@import"),
            "nothing is fetched: {html}"
        );
    }

    #[test]
    fn the_file_holds_the_attendees_secrets_and_the_instructors_digest() {
        let mut secrets = Secrets::default();
        let instructor = secrets.fresh().unwrap();
        let attendees: Vec<Attendee> = ["ada", "grace"]
            .into_iter()
            .map(|name| Attendee {
                name: name.into(),
                secret: secrets.fresh().unwrap(),
            })
            .collect();
        assert_eq!(instructor.len(), 43);
        assert_ne!(attendees[0].secret, attendees[1].secret);
        let text = tokens_file("instructor", &instructor, "room", &attendees).unwrap();
        assert!(text.starts_with("# A workshop room, written by `toolhost tokens`"));
        assert!(!text.contains(&instructor), "{text}");
        let parsed: toml::Table = text.parse().unwrap();
        let group = &parsed["group"][0];
        assert_eq!(
            group["tools"].as_array().unwrap().len(),
            3,
            "the top level, the instructor's and the person's own: {text}"
        );
        let tokens = parsed["token"].as_array().unwrap();
        assert_eq!(tokens[0]["role"].as_str(), Some("admin"));
        assert!(tokens[0].get("tools").is_none() && tokens[0].get("secret").is_none());
        assert_eq!(
            tokens[1]["secret"].as_str(),
            Some(attendees[0].secret.as_str())
        );
        assert_eq!(tokens[2]["tools"][0].as_str(), Some("@room"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, &text).unwrap();
        crate::edge::auth::check_tokens_file(&file).unwrap();
    }
}
