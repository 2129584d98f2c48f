//! A plugin's resources, resource templates and prompts (contract 0.2.0),
//! checked when it is loaded and kept as clients list them: the rules for
//! URIs, templates and prompt names, the namespace rules, which URI a
//! template matches, and whether two plugins' URIs overlap. Which plugin
//! holds a URI or a prompt name is the snapshot's.
//!
//! Namespaces: a plugin in namespace `ada` serves its prompts as
//! `ada__<name>` (as its tools), and its resources under the authority
//! `ada`: `scheme:rest` is served as `scheme://ada/rest` (a leading `//`
//! of `rest` dropped), so `text://slug/{t}` becomes `text://ada/slug/{t}`.
//! The plugin is asked with the URI it declared; clients only ever see the
//! served one. So no publisher can serve a URI another person's (or the
//! top level's) plugin serves, except a top-level plugin that names
//! `ada` as its authority, and the top level goes first.
//!
//! Overlap is decided by matching, not by spelling: two templates overlap
//! when some URI matches both (`test://t/{id}/data` and `test://t/{x}/data`
//! do), and a fixed URI overlaps a template that matches it.

use serde_json::{Map, Value, json};

use std::sync::Arc;

use crate::registry::app_views::{self, AppView, ViewError};
use crate::registry::invisible::{self, TextError};
use crate::registry::tools::{ToolListLimits, is_valid_tool_name};
use crate::runtime::{DeclaredPrompt, DeclaredResource, DeclaredTemplate, Description};

/// Longest resource URI or URI template.
const MAX_URI_CHARS: usize = 512;

/// What a plugin serves besides tools.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(crate) resources: Vec<Resource>,
    pub(crate) templates: Vec<Template>,
    pub(crate) prompts: Vec<Prompt>,
    /// Whether the plugin answers `completion/complete`.
    pub(crate) completion: bool,
}

/// One resource with a fixed URI.
#[derive(Debug)]
pub(crate) struct Resource {
    /// The URI clients read (in a namespace, under its authority).
    pub(crate) uri: String,
    /// The URI the plugin declared, which it is asked by.
    pub(crate) declared: String,
    /// As `resources/list` and `GET /resources` show it.
    pub(crate) listing: Map<String, Value>,
    /// A view (`app_views.rs`): its answer, known as it loaded.
    pub(crate) view: Option<Arc<AppView>>,
}

/// One URI template and its parts.
#[derive(Debug)]
pub(crate) struct Template {
    /// The template clients see (in a namespace, under its authority).
    pub(crate) template: String,
    parts: Vec<Part>,
    /// The template the plugin declared, and its parts.
    pub(crate) declared: String,
    declared_parts: Vec<Part>,
    /// As `resources/templates/list` shows it.
    pub(crate) listing: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Variable(String),
}

/// One prompt.
#[derive(Debug)]
pub(crate) struct Prompt {
    /// The name clients use (`<namespace>__<name>` in a namespace).
    pub(crate) name: String,
    /// The name the plugin declared, which it is asked by.
    pub(crate) declared: String,
    /// Its arguments: (name, required).
    pub(crate) arguments: Vec<(String, bool)>,
    /// As `prompts/list` and `GET /prompts` show it.
    pub(crate) listing: Map<String, Value>,
}

/// Why a plugin's resources or prompts were refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("resource URI {0:?} is not an absolute URI of at most 512 characters")]
    BadUri(String),
    #[error("resource URI {0:?} is served as {1:?} in its namespace, longer than 512 characters")]
    UriTooLongInNamespace(String, String),
    /// An invisible character in a title or description (`invisible.rs`);
    /// `what` says whose (`prompt "greet"`).
    #[error("{what}: {text}")]
    Invisible { what: String, text: TextError },
    #[error(
        "URI template {0:?} is not valid: `{{name}}` parts (letters, digits, `_`), not two in a row"
    )]
    BadTemplate(String),
    #[error("{kind} {name:?} is declared twice")]
    Twice { kind: &'static str, name: String },
    #[error("prompt name {0:?} is invalid: it must match ^[A-Za-z0-9_.-]{{1,64}}$")]
    BadPromptName(String),
    #[error("prompt name {0:?} contains `__`, which is kept for namespaces")]
    ReservedSeparator(String),
    #[error("prompt {name:?} is served as {served:?}, longer than 64 characters")]
    TooLongInNamespace { name: String, served: String },
    #[error("prompt {prompt:?} names argument {argument:?} twice, or an empty one")]
    BadArgument { prompt: String, argument: String },
    #[error(transparent)]
    View(#[from] ViewError),
    #[error("the plugin declares {count} {kind}, over the limit of {max}")]
    TooMany {
        kind: &'static str,
        count: usize,
        max: usize,
    },
}

impl Catalog {
    /// Checks what a plugin declared and names its prompts as served in
    /// `namespace`.
    pub(crate) fn build(
        description: &mut Description,
        namespace: Option<&str>,
        limits: &ToolListLimits,
    ) -> Result<Catalog, CatalogError> {
        for (kind, count) in [
            ("resources", description.resources.len()),
            ("resource templates", description.templates.len()),
            ("prompts", description.prompts.len()),
            ("views", description.views.len()),
        ] {
            if count > limits.max_tools {
                return Err(CatalogError::TooMany {
                    kind,
                    count,
                    max: limits.max_tools,
                });
            }
        }
        let mut catalog = Catalog {
            completion: description.provides.completion,
            ..Catalog::default()
        };
        for declared in std::mem::take(&mut description.resources) {
            let resource = resource(declared, namespace)?;
            if catalog.resources.iter().any(|r| r.uri == resource.uri) {
                return Err(CatalogError::Twice {
                    kind: "resource URI",
                    name: resource.declared,
                });
            }
            catalog.resources.push(resource);
        }
        for declared in std::mem::take(&mut description.views) {
            if !is_absolute_uri(&declared.uri) {
                return Err(CatalogError::BadUri(declared.uri));
            }
            let uri = served(namespace, &declared.uri)?;
            let declared_uri = declared.uri.clone();
            let (view, listing) = app_views::build(declared, &uri)?;
            if catalog.resources.iter().any(|r| r.uri == uri) {
                return Err(CatalogError::Twice {
                    kind: "resource URI",
                    name: declared_uri,
                });
            }
            catalog.resources.push(Resource {
                uri,
                declared: declared_uri,
                listing,
                view: Some(Arc::new(view)),
            });
        }
        for declared in std::mem::take(&mut description.templates) {
            let template = template(declared, namespace)?;
            if catalog
                .templates
                .iter()
                .any(|t| t.template == template.template)
            {
                return Err(CatalogError::Twice {
                    kind: "URI template",
                    name: template.declared,
                });
            }
            catalog.templates.push(template);
        }
        for declared in std::mem::take(&mut description.prompts) {
            let prompt = prompt(declared, namespace)?;
            if catalog.prompts.iter().any(|p| p.name == prompt.name) {
                return Err(CatalogError::Twice {
                    kind: "prompt",
                    name: prompt.declared,
                });
            }
            catalog.prompts.push(prompt);
        }
        Ok(catalog)
    }

    /// What this plugin and `other` both claim, if anything: a prompt
    /// name, a fixed URI both serve, a fixed URI the other's template
    /// matches, or two templates some URI matches both of. Described for
    /// the refusal, and whether it is the very same name or URI.
    pub(crate) fn overlap(&self, other: &Catalog) -> Option<(String, bool)> {
        if let Some(prompt) = self
            .prompts
            .iter()
            .find(|p| other.prompt(&p.name).is_some())
        {
            return Some((format!("prompt {:?}", prompt.name), true));
        }
        let fixed = |r: &Resource| format!("resource {:?}", r.uri);
        let templated = |t: &Template| format!("URI template {:?}", t.template);
        for mine in &self.resources {
            if other.resources.iter().any(|theirs| theirs.uri == mine.uri) {
                return Some((fixed(mine), true));
            }
            if let Some(theirs) = other
                .templates
                .iter()
                .find(|t| t.matches(&mine.uri).is_some())
            {
                return Some((
                    format!("{} (matched by {})", fixed(mine), templated(theirs)),
                    false,
                ));
            }
        }
        for mine in &self.templates {
            if other.templates.iter().any(|t| t.template == mine.template) {
                return Some((templated(mine), true));
            }
            if let Some(theirs) = other
                .resources
                .iter()
                .find(|r| mine.matches(&r.uri).is_some())
            {
                return Some((
                    format!("{} (matching {})", templated(mine), fixed(theirs)),
                    false,
                ));
            }
            if let Some(theirs) = other
                .templates
                .iter()
                .find(|t| overlaps(&mine.parts, &t.parts))
            {
                return Some((
                    format!("{} (overlapping {})", templated(mine), templated(theirs)),
                    false,
                ));
            }
        }
        None
    }

    /// The URI the plugin declared for the served `uri` it serves: a fixed
    /// URI first, then the first template that matches it.
    pub(crate) fn declared_uri(&self, uri: &str) -> Option<String> {
        if let Some(resource) = self.resources.iter().find(|r| r.uri == uri) {
            return Some(resource.declared.clone());
        }
        self.templates.iter().find_map(|template| {
            let values = template.matches(uri)?;
            Some(template.expand_declared(&values))
        })
    }

    /// The served form of a URI the plugin wrote in an answer (a read's
    /// contents): under the namespace's authority, as its URIs are listed.
    pub(crate) fn served_uri(&self, namespace: Option<&str>, uri: String) -> String {
        match namespace {
            Some(namespace) if is_absolute_uri(&uri) => in_namespace(namespace, &uri),
            _ => uri,
        }
    }

    /// The prompt clients name `name` (its served name).
    pub(crate) fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompts.iter().find(|p| p.name == name)
    }

    /// Whether it serves any resource, fixed or by template.
    pub(crate) fn serves_resources(&self) -> bool {
        !self.resources.is_empty() || !self.templates.is_empty()
    }

    /// The view the plugin declared as `declared`, by its served URI.
    pub(crate) fn view_declared(&self, declared: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.view.is_some() && r.declared == declared)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.templates.is_empty() && self.prompts.is_empty()
    }
}

impl Template {
    /// The URI the plugin declared for a served URI whose variables are
    /// `values` (as [`Template::matches`] gave them).
    fn expand_declared(&self, values: &[(String, String)]) -> String {
        self.declared_parts
            .iter()
            .map(|part| match part {
                Part::Literal(literal) => literal.as_str(),
                Part::Variable(name) => values
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or("", |(_, value)| value.as_str()),
            })
            .collect()
    }

    /// The variables `uri` gives this template's parts, if it matches: a
    /// variable stands for one or more characters other than `/`, `?` and
    /// `#`, up to the next literal part.
    pub(crate) fn matches(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut rest = uri;
        let mut values = Vec::new();
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
                Part::Variable(name) => {
                    let stop = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => stop,
                    };
                    if end == 0 || end > stop {
                        return None;
                    }
                    values.push((name.clone(), rest[..end].to_string()));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

fn resource(declared: DeclaredResource, namespace: Option<&str>) -> Result<Resource, CatalogError> {
    if !is_absolute_uri(&declared.uri) {
        return Err(CatalogError::BadUri(declared.uri));
    }
    check_texts(
        || format!("resource {:?}", declared.uri),
        declared.title.as_deref(),
        declared.description.as_deref(),
    )?;
    let uri = served(namespace, &declared.uri)?;
    let listing = listing(
        ("uri", &uri),
        declared.name,
        declared.title,
        declared.description,
        declared.mime_type,
    );
    Ok(Resource {
        uri,
        declared: declared.uri,
        listing,
        view: None,
    })
}

fn template(declared: DeclaredTemplate, namespace: Option<&str>) -> Result<Template, CatalogError> {
    let text = declared.uri_template;
    if !is_absolute_uri(&text) {
        return Err(CatalogError::BadTemplate(text));
    }
    check_texts(
        || format!("URI template {text:?}"),
        declared.title.as_deref(),
        declared.description.as_deref(),
    )?;
    let declared_parts = parts(&text)?;
    let template = served(namespace, &text)?;
    let parts = parts(&template)?;
    let listing = listing(
        ("uriTemplate", &template),
        declared.name,
        declared.title,
        declared.description,
        declared.mime_type,
    );
    Ok(Template {
        template,
        parts,
        declared: text,
        declared_parts,
        listing,
    })
}

/// A template's literal and variable parts.
fn parts(text: &str) -> Result<Vec<Part>, CatalogError> {
    let bad = || CatalogError::BadTemplate(text.to_string());
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let close = rest.find('}').ok_or_else(bad)?;
                let name = &rest[1..close];
                let valid = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !valid || matches!(parts.last(), Some(Part::Variable(_))) {
                    return Err(bad());
                }
                parts.push(Part::Variable(name.to_string()));
                rest = &rest[close + 1..];
            }
            found => {
                let end = found.unwrap_or(rest.len());
                if rest[..end].contains('}') {
                    return Err(bad());
                }
                parts.push(Part::Literal(rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
    }
    Ok(parts)
}

/// A declared URI or template as served in `namespace` (as is at the top
/// level), refused when that makes it too long.
fn served(namespace: Option<&str>, uri: &str) -> Result<String, CatalogError> {
    let Some(namespace) = namespace else {
        return Ok(uri.to_string());
    };
    let served = in_namespace(namespace, uri);
    if served.chars().count() > MAX_URI_CHARS {
        return Err(CatalogError::UriTooLongInNamespace(uri.to_string(), served));
    }
    Ok(served)
}

/// `scheme:rest` under the authority `namespace`: `scheme://namespace/`
/// then `rest` without its leading `//`.
fn in_namespace(namespace: &str, uri: &str) -> String {
    let (scheme, rest) = uri.split_once(':').unwrap_or((uri, ""));
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    format!("{scheme}://{namespace}/{rest}")
}

/// Refuses a title or a description that holds an invisible character
/// (`invisible.rs`); `what` names whose they are.
fn check_texts(
    what: impl Fn() -> String,
    title: Option<&str>,
    description: Option<&str>,
) -> Result<(), CatalogError> {
    for (place, text) in [("title", title), ("description", description)] {
        if let Some(text) = text {
            invisible::check(place, text)
                .map_err(|text| CatalogError::Invisible { what: what(), text })?;
        }
    }
    Ok(())
}

/// Whether some URI matches both templates (a fixed URI is a template of
/// literals alone). A variable stands for one or more characters other
/// than `/`, `?` and `#`; the search walks both patterns side by side
/// over the characters they name and one character neither names.
fn overlaps(a: &[Part], b: &[Part]) -> bool {
    let (a, b) = (tokens(a), tokens(b));
    // Literal heads and tails that differ settle it at once (URIs of other
    // schemes, authorities or namespaces).
    let head = |t: &[Token]| -> Vec<char> {
        t.iter()
            .map_while(|t| match t {
                Token::Char(c) => Some(*c),
                Token::Var => None,
            })
            .collect()
    };
    let tail = |t: &[Token]| -> Vec<char> {
        t.iter()
            .rev()
            .map_while(|t| match t {
                Token::Char(c) => Some(*c),
                Token::Var => None,
            })
            .collect()
    };
    let agree = |x: &[char], y: &[char]| x.iter().zip(y).all(|(p, q)| p == q);
    if !agree(&head(&a), &head(&b)) || !agree(&tail(&a), &tail(&b)) {
        return false;
    }
    let mut alphabet: Vec<char> = a
        .iter()
        .chain(&b)
        .filter_map(|t| match t {
            Token::Char(c) => Some(*c),
            Token::Var => None,
        })
        .collect();
    alphabet.push('\u{E000}'); // one character neither pattern names
    alphabet.sort_unstable();
    alphabet.dedup();
    // A state is (position, inside a variable that has taken a character).
    let start = ((0usize, false), (0usize, false));
    let mut seen = std::collections::HashSet::from([start]);
    let mut queue = vec![start];
    while let Some((sa, sb)) = queue.pop() {
        if accepts(&a, sa) && accepts(&b, sb) {
            return true;
        }
        for &c in &alphabet {
            for na in step(&a, sa, c) {
                for nb in step(&b, sb, c) {
                    if seen.insert((na, nb)) {
                        queue.push((na, nb));
                    }
                }
            }
        }
    }
    false
}

#[derive(Clone, Copy)]
enum Token {
    Char(char),
    Var,
}

fn tokens(parts: &[Part]) -> Vec<Token> {
    parts
        .iter()
        .flat_map(|part| match part {
            Part::Literal(literal) => literal.chars().map(Token::Char).collect::<Vec<_>>(),
            Part::Variable(_) => vec![Token::Var],
        })
        .collect()
}

type State = (usize, bool);

fn in_variable(c: char) -> bool {
    !matches!(c, '/' | '?' | '#')
}

/// Where `state` goes on `c`: inside a variable it may take `c` too, or
/// end and let the next token take it.
fn step(tokens: &[Token], (at, inside): State, c: char) -> Vec<State> {
    let from = |at: usize| match tokens.get(at) {
        Some(Token::Char(x)) if *x == c => Some((at + 1, false)),
        Some(Token::Var) if in_variable(c) => Some((at, true)),
        _ => None,
    };
    if inside {
        let stay = in_variable(c).then_some((at, true));
        stay.into_iter().chain(from(at + 1)).collect()
    } else {
        from(at).into_iter().collect()
    }
}

fn accepts(tokens: &[Token], (at, inside): State) -> bool {
    if inside {
        at + 1 == tokens.len()
    } else {
        at == tokens.len()
    }
}

fn prompt(declared: DeclaredPrompt, namespace: Option<&str>) -> Result<Prompt, CatalogError> {
    let name = declared.name;
    if !is_valid_tool_name(&name) {
        return Err(CatalogError::BadPromptName(name));
    }
    check_texts(
        || format!("prompt {name:?}"),
        declared.title.as_deref(),
        declared.description.as_deref(),
    )?;
    for argument in &declared.arguments {
        check_texts(
            || format!("prompt {name:?}: argument {:?}", argument.name),
            argument.title.as_deref(),
            argument.description.as_deref(),
        )?;
    }
    let served = match namespace {
        None if name.contains("__") => return Err(CatalogError::ReservedSeparator(name)),
        None => name.clone(),
        Some(namespace) => format!("{namespace}__{name}"),
    };
    if served.len() > 64 {
        return Err(CatalogError::TooLongInNamespace { name, served });
    }
    let mut arguments: Vec<(String, bool)> = Vec::new();
    let mut listed = Vec::new();
    for argument in declared.arguments {
        if argument.name.is_empty() || arguments.iter().any(|(n, _)| *n == argument.name) {
            return Err(CatalogError::BadArgument {
                prompt: name,
                argument: argument.name,
            });
        }
        let mut entry = Map::new();
        entry.insert("name".into(), json!(argument.name));
        if let Some(title) = argument.title {
            entry.insert("title".into(), json!(title));
        }
        if let Some(description) = argument.description {
            entry.insert("description".into(), json!(description));
        }
        entry.insert("required".into(), json!(argument.required));
        listed.push(Value::Object(entry));
        arguments.push((argument.name, argument.required));
    }
    let mut listing = Map::new();
    listing.insert("name".into(), json!(served));
    if let Some(title) = declared.title {
        listing.insert("title".into(), json!(title));
    }
    if let Some(description) = declared.description {
        listing.insert("description".into(), json!(description));
    }
    listing.insert("arguments".into(), Value::Array(listed));
    Ok(Prompt {
        name: served,
        declared: name,
        arguments,
        listing,
    })
}

/// A resource's or template's listing: its URI (or template) under `key`,
/// then `name`, `title`, `description` and `mimeType` when given.
fn listing(
    (key, uri): (&str, &str),
    name: String,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
) -> Map<String, Value> {
    let mut listing = Map::new();
    listing.insert(key.into(), json!(uri));
    listing.insert("name".into(), json!(name));
    let optional = [
        ("title", title),
        ("description", description),
        ("mimeType", mime_type),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            listing.insert(key.into(), json!(value));
        }
    }
    listing
}

/// `scheme:rest`, the scheme a letter then letters, digits, `+`, `-` or
/// `.`; no whitespace or control characters; at most 512 characters.
fn is_absolute_uri(uri: &str) -> bool {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return false;
    };
    uri.chars().count() <= MAX_URI_CHARS
        && !rest.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        && !uri.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared_template(text: &str) -> DeclaredTemplate {
        DeclaredTemplate {
            uri_template: text.into(),
            name: "t".into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }

    #[test]
    fn a_description_that_reads_other_than_it_is_is_refused() {
        let mut hidden = declared_template("test://t/{id}");
        hidden.description = Some("Reads t.\u{202E}sdrawkcab".into());
        assert!(matches!(
            template(hidden, None),
            Err(CatalogError::Invisible { .. })
        ));
        let prompt_with = |argument_description: &str| DeclaredPrompt {
            name: "p".into(),
            title: None,
            description: Some("Fine.".into()),
            arguments: vec![crate::runtime::PromptArgument {
                name: "a".into(),
                title: None,
                description: Some(argument_description.into()),
                required: false,
            }],
        };
        assert!(prompt(prompt_with("plain"), None).is_ok());
        assert!(prompt(prompt_with("x\u{2067}y"), None).is_err());
    }

    #[test]
    fn hidden_text_in_resources_and_prompts_is_refused() {
        let reason = |result: Result<(), CatalogError>| {
            result.err().map(|e| e.to_string()).unwrap_or_default()
        };
        let fixed = DeclaredResource {
            uri: "test://r".into(),
            name: "r".into(),
            title: Some("Note\u{200B}s".into()),
            description: None,
            mime_type: None,
        };
        assert!(reason(resource(fixed, None).map(drop)).contains(
            r#"resource "test://r": title: U+200B (a zero-width character) at character 5"#
        ));
        let mut templated = declared_template("test://t/{id}");
        templated.description = Some("Reads t.\u{FEFF}".into());
        assert!(reason(template(templated, None).map(drop)).contains(
            r#"URI template "test://t/{id}": description: U+FEFF (a zero-width character) at character 9"#
        ));
        let prompt_with = |title: Option<&str>, description: &str| DeclaredPrompt {
            name: "p".into(),
            title: None,
            description: Some("Fine.\n\tReally.".into()),
            arguments: vec![crate::runtime::PromptArgument {
                name: "a".into(),
                title: title.map(String::from),
                description: Some(description.into()),
                required: false,
            }],
        };
        assert_eq!(
            reason(prompt(prompt_with(Some("A"), "plain"), None).map(drop)),
            ""
        );
        assert!(
            reason(prompt(prompt_with(Some("A\u{E0041}"), "plain"), None).map(drop)).contains(
                r#"prompt "p": argument "a": title: U+E0041 (a tag character) at character 2"#
            )
        );
        assert!(
            reason(prompt(prompt_with(None, "x\u{2067}y"), None).map(drop)).contains(
                r#"prompt "p": argument "a": description: U+2067 (a bidirectional control character) at character 2"#
            )
        );
    }

    #[test]
    fn templates_match_their_variables() {
        let t = template(declared_template("test://template/{id}/data"), None).unwrap();
        assert_eq!(
            t.matches("test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        for other in [
            "test://template//data",
            "test://template/1/2/data",
            "test://template/123/datax",
            "test://other/123/data",
        ] {
            assert_eq!(t.matches(other), None, "{other}");
        }
        let two = template(declared_template("w://{city}/on/{day}"), None).unwrap();
        assert_eq!(
            two.matches("w://oslo/on/monday").unwrap(),
            vec![
                ("city".into(), "oslo".into()),
                ("day".into(), "monday".into())
            ]
        );
        for bad in [
            "no-scheme/{x}",
            "a://{x}{y}",
            "a://{x",
            "a://x}",
            "a://{}",
            "a://{a-b}",
        ] {
            assert!(template(declared_template(bad), None).is_err(), "{bad}");
        }
    }

    fn catalog(namespace: Option<&str>, fixed: &[&str], templates: &[&str]) -> Catalog {
        let mut description = Description::default();
        for uri in fixed {
            description.resources.push(DeclaredResource {
                uri: uri.to_string(),
                name: "r".into(),
                title: None,
                description: None,
                mime_type: None,
            });
        }
        for text in templates {
            description.templates.push(declared_template(text));
        }
        Catalog::build(&mut description, namespace, &ToolListLimits::DEFAULT).unwrap()
    }

    #[test]
    fn overlap_is_found_by_matching_not_by_spelling() {
        let admin = catalog(
            None,
            &["test://static-text"],
            &["test://template/{id}/data"],
        );
        let cases: [(&[&str], &[&str]); 5] = [
            (&[], &["test://template/{x}/data"]),
            (&["test://template/7/data"], &[]),
            (&["test://static-text"], &[]),
            (&[], &["test://{a}/{b}/data"]),
            (&[], &["test://template/{x}/{y}"]),
        ];
        for (fixed, templates) in cases {
            let other = catalog(None, fixed, templates);
            assert!(other.overlap(&admin).is_some(), "{fixed:?} {templates:?}");
            assert!(admin.overlap(&other).is_some(), "{fixed:?} {templates:?}");
        }
        let apart: [(&[&str], &[&str]); 4] = [
            (&["test://template/7/other"], &[]),
            (&[], &["test://template/{x}/more/data"]),
            (&[], &["other://template/{x}/data"]),
            (&[], &["test://templates/{x}"]),
        ];
        for (fixed, templates) in apart {
            let other = catalog(None, fixed, templates);
            assert_eq!(other.overlap(&admin), None, "{fixed:?} {templates:?}");
        }
    }

    #[test]
    fn a_namespace_serves_its_uris_under_its_authority() {
        let bob = catalog(
            Some("bob"),
            &["test://static-text", "urn:isbn:1"],
            &["test://template/{x}/data"],
        );
        let served: Vec<&str> = bob.resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(served, ["test://bob/static-text", "urn://bob/isbn:1"]);
        assert_eq!(bob.templates[0].template, "test://bob/template/{x}/data");
        assert_eq!(
            bob.templates[0].listing["uriTemplate"],
            "test://bob/template/{x}/data"
        );
        // The plugin is asked by what it declared.
        assert_eq!(
            bob.declared_uri("test://bob/template/42/data").as_deref(),
            Some("test://template/42/data")
        );
        assert_eq!(
            bob.declared_uri("test://bob/static-text").as_deref(),
            Some("test://static-text")
        );
        assert_eq!(bob.declared_uri("test://static-text"), None);
        // Nothing it serves overlaps the top level's same URIs.
        let admin = catalog(
            None,
            &["test://static-text"],
            &["test://template/{id}/data"],
        );
        assert_eq!(bob.overlap(&admin), None);
        // Unless the top level serves under bob's authority.
        let squatting_admin = catalog(None, &[], &["test://{who}/static-text"]);
        assert!(bob.overlap(&squatting_admin).is_some());
    }

    #[test]
    fn uris_are_absolute() {
        for good in [
            "test://static-text",
            "file:///a.txt",
            "urn:isbn:1",
            "a+b.c-d:x",
        ] {
            assert!(is_absolute_uri(good), "{good}");
        }
        for bad in ["", "no-scheme", "1a:x", "a:", "a: b", "sp ace:x"] {
            assert!(!is_absolute_uri(bad), "{bad}");
        }
        assert!(!is_absolute_uri(&format!("a:{}", "x".repeat(600))));
    }

    #[test]
    fn prompts_follow_the_namespace_rule() {
        let declared = |name: &str| DeclaredPrompt {
            name: name.into(),
            title: None,
            description: Some("d".into()),
            arguments: Vec::new(),
        };
        assert_eq!(
            prompt(declared("greet"), Some("ada")).unwrap().name,
            "ada__greet"
        );
        assert_eq!(prompt(declared("greet"), None).unwrap().name, "greet");
        assert!(prompt(declared("a__b"), None).is_err());
        assert!(prompt(declared("bad name"), None).is_err());
        assert!(prompt(declared(&"x".repeat(62)), Some("ada")).is_err());
    }
}
