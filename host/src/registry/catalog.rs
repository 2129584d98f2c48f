//! A plugin's resources, resource templates and prompts (contract 0.2.0),
//! checked when it is loaded and kept as clients list them: the rules for
//! URIs, templates and prompt names, the namespace rule for prompt names
//! (`<namespace>__<name>`, as for tools), and which URI a template
//! matches. Which plugin holds a URI or a prompt name is the snapshot's.

use serde_json::{Map, Value, json};

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
    pub(crate) uri: String,
    /// As `resources/list` and `GET /resources` show it.
    pub(crate) listing: Map<String, Value>,
}

/// One URI template and its parts.
#[derive(Debug)]
pub(crate) struct Template {
    pub(crate) template: String,
    parts: Vec<Part>,
    /// As `resources/templates/list` shows it.
    pub(crate) listing: Map<String, Value>,
}

#[derive(Debug, PartialEq)]
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
            let resource = resource(declared)?;
            if catalog.resources.iter().any(|r| r.uri == resource.uri) {
                return Err(CatalogError::Twice {
                    kind: "resource URI",
                    name: resource.uri,
                });
            }
            catalog.resources.push(resource);
        }
        for declared in std::mem::take(&mut description.templates) {
            let template = template(declared)?;
            if catalog
                .templates
                .iter()
                .any(|t| t.template == template.template)
            {
                return Err(CatalogError::Twice {
                    kind: "URI template",
                    name: template.template,
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

    /// The names this plugin claims, each as `kind name`, for the
    /// snapshot to keep unique across plugins.
    pub(crate) fn claims(&self) -> impl Iterator<Item = String> + '_ {
        let resources = self
            .resources
            .iter()
            .map(|r| format!("resource {:?}", r.uri));
        let templates = self
            .templates
            .iter()
            .map(|t| format!("URI template {:?}", t.template));
        let prompts = self.prompts.iter().map(|p| format!("prompt {:?}", p.name));
        resources.chain(templates).chain(prompts)
    }

    /// The prompt clients name `name` (its served name).
    pub(crate) fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompts.iter().find(|p| p.name == name)
    }

    /// Whether it serves any resource, fixed or by template.
    pub(crate) fn serves_resources(&self) -> bool {
        !self.resources.is_empty() || !self.templates.is_empty()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.templates.is_empty() && self.prompts.is_empty()
    }
}

impl Template {
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

fn resource(declared: DeclaredResource) -> Result<Resource, CatalogError> {
    if !is_absolute_uri(&declared.uri) {
        return Err(CatalogError::BadUri(declared.uri));
    }
    let listing = listing(
        ("uri", &declared.uri),
        declared.name,
        declared.title,
        declared.description,
        declared.mime_type,
    );
    Ok(Resource {
        uri: declared.uri,
        listing,
    })
}

fn template(declared: DeclaredTemplate) -> Result<Template, CatalogError> {
    let text = declared.uri_template;
    let bad = || CatalogError::BadTemplate(text.clone());
    if !is_absolute_uri(&text) {
        return Err(bad());
    }
    let mut parts = Vec::new();
    let mut rest = text.as_str();
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
    let listing = listing(
        ("uriTemplate", &text),
        declared.name,
        declared.title,
        declared.description,
        declared.mime_type,
    );
    Ok(Template {
        template: text,
        parts,
        listing,
    })
}

fn prompt(declared: DeclaredPrompt, namespace: Option<&str>) -> Result<Prompt, CatalogError> {
    let name = declared.name;
    if !is_valid_tool_name(&name) {
        return Err(CatalogError::BadPromptName(name));
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
    fn templates_match_their_variables() {
        let t = template(declared_template("test://template/{id}/data")).unwrap();
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
        let two = template(declared_template("w://{city}/on/{day}")).unwrap();
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
            assert!(template(declared_template(bad)).is_err(), "{bad}");
        }
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
