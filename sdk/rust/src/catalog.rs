//! Resources, resource templates and prompts (contract 0.2.0), declared
//! like tools: each is a typed function added to `Tools` (`tool.rs`).
//!
//! ```no_run
//! use toolhost_plugin::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct City {
//!     /// The city to describe
//!     city: String,
//! }
//!
//! fn tools() -> Tools {
//!     Tools::new()
//!         .resource(
//!             Resource::new("notes://today", "today", "Today's notes", || Ok("Buy milk"))
//!                 .mime_type("text/plain"),
//!         )
//!         .template(Template::new(
//!             "weather://{city}",
//!             "weather",
//!             "The weather in a city",
//!             |c: City| Ok(format!("Sunny in {}", c.city)),
//!         ))
//!         .prompt(
//!             Prompt::new("visit", "Plans a visit", |c: City| {
//!                 Ok(format!("Plan a day in {}", c.city))
//!             })
//!             .complete("city", |typed| {
//!                 ["Oslo", "Osaka", "Paris"]
//!                     .into_iter()
//!                     .filter(|c| c.starts_with(typed))
//!                     .map(String::from)
//!                     .collect()
//!             }),
//!         )
//! }
//!
//! // `catalog`: resources and prompts are exported beside the tools.
//! toolhost_plugin::export!(tools, catalog);
//! ```

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::bindings::exports::toolhost::plugin0_1_0::tools as wit;
use crate::bindings::exports::toolhost::plugin0_2_0::{completion, prompts, resources};
use crate::content::{Content, ToolError};
use crate::schema;
use schemars::JsonSchema;

type Reader = Box<dyn Fn(&str, &Map<String, Value>) -> Result<Body, ToolError>>;
type Completer = Box<dyn Fn(&str) -> Vec<String>>;

/// What reading a resource gives: text or bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    Blob(Vec<u8>),
}

/// What a resource's function may return.
pub trait IntoBody {
    fn into_body(self) -> Body;
}

impl IntoBody for Body {
    fn into_body(self) -> Body {
        self
    }
}

impl IntoBody for String {
    fn into_body(self) -> Body {
        Body::Text(self)
    }
}

impl IntoBody for &str {
    fn into_body(self) -> Body {
        Body::Text(self.to_string())
    }
}

impl IntoBody for Vec<u8> {
    fn into_body(self) -> Body {
        Body::Blob(self)
    }
}

/// A resource with a fixed URI, read by a function of no arguments.
pub struct Resource {
    uri: String,
    name: String,
    title: Option<String>,
    description: String,
    mime_type: Option<String>,
    read: Reader,
}

impl Resource {
    /// The resource at `uri` (an absolute URI, unique on the host).
    pub fn new<B, F>(uri: &str, name: &str, description: &str, read: F) -> Self
    where
        B: IntoBody,
        F: Fn() -> Result<B, ToolError> + 'static,
    {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: description.into(),
            mime_type: None,
            read: Box::new(move |_, _| read().map(IntoBody::into_body)),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn mime_type(mut self, mime_type: &str) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A family of resources: a URI template (`{name}` parts) read by a
/// function of its variables, deserialized into `A` (a struct of `String`
/// fields, say).
pub struct Template {
    template: String,
    name: String,
    title: Option<String>,
    description: String,
    mime_type: Option<String>,
    read: Reader,
    completers: Vec<(String, Completer)>,
}

impl Template {
    pub fn new<A, B, F>(template: &str, name: &str, description: &str, read: F) -> Self
    where
        A: DeserializeOwned,
        B: IntoBody,
        F: Fn(A) -> Result<B, ToolError> + 'static,
    {
        Template {
            template: template.into(),
            name: name.into(),
            title: None,
            description: description.into(),
            mime_type: None,
            read: Box::new(move |_, variables| {
                let arguments = serde_json::from_value(Value::Object(variables.clone()))
                    .map_err(|e| ToolError::new("NOT_FOUND", format!("no such resource: {e}")))?;
                read(arguments).map(IntoBody::into_body)
            }),
            completers: Vec::new(),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn mime_type(mut self, mime_type: &str) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Suggests values for `variable` from what the user typed so far.
    pub fn complete(
        mut self,
        variable: &str,
        complete: impl Fn(&str) -> Vec<String> + 'static,
    ) -> Self {
        self.completers.push((variable.into(), Box::new(complete)));
        self
    }

    /// The variables `uri` gives this template, if it matches (`{name}`
    /// stands for one or more characters other than `/`, `?` and `#`).
    fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        let mut rest = uri;
        let mut values = Map::new();
        let mut template = self.template.as_str();
        while !template.is_empty() {
            if let Some(after) = template.strip_prefix('{') {
                let close = after.find('}')?;
                let name = &after[..close];
                template = &after[close + 1..];
                let next = template.find('{').unwrap_or(template.len());
                let literal = &template[..next];
                let stop = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                let end = if literal.is_empty() {
                    stop
                } else {
                    rest.find(literal)?
                };
                if end == 0 || end > stop {
                    return None;
                }
                values.insert(name.into(), Value::String(rest[..end].into()));
                rest = &rest[end..];
            } else {
                let next = template.find('{').unwrap_or(template.len());
                rest = rest.strip_prefix(&template[..next])?;
                template = &template[next..];
            }
        }
        rest.is_empty().then_some(values)
    }
}

/// The messages a prompt gives: each content block of a [`Content`] is one
/// message.
#[derive(Default)]
pub struct Messages {
    description: Option<String>,
    messages: Vec<prompts::Message>,
}

impl Messages {
    pub fn new() -> Self {
        Messages::default()
    }

    /// Each block of `content` as a message from the user.
    pub fn user(self, content: Content) -> Self {
        self.push(prompts::Role::User, content)
    }

    /// Each block of `content` as a message from the assistant.
    pub fn assistant(self, content: Content) -> Self {
        self.push(prompts::Role::Assistant, content)
    }

    /// A description of the prompt as filled in.
    pub fn description(mut self, description: &str) -> Self {
        self.description = Some(description.into());
        self
    }

    fn push(mut self, role: prompts::Role, content: Content) -> Self {
        for block in content.into_wit().content {
            self.messages.push(prompts::Message {
                role,
                content: block,
            });
        }
        self
    }
}

/// What a prompt's function may return.
pub trait IntoMessages {
    fn into_messages(self) -> Messages;
}

impl IntoMessages for Messages {
    fn into_messages(self) -> Messages {
        self
    }
}

impl IntoMessages for String {
    fn into_messages(self) -> Messages {
        Messages::new().user(Content::new().text(self))
    }
}

impl IntoMessages for &str {
    fn into_messages(self) -> Messages {
        self.to_string().into_messages()
    }
}

impl IntoMessages for Content {
    fn into_messages(self) -> Messages {
        Messages::new().user(self)
    }
}

type PromptHandler = Box<dyn Fn(Map<String, Value>) -> Result<Messages, ToolError>>;

/// A prompt: a function from its arguments (a struct of `String` and
/// `Option<String>` fields; doc comments become their descriptions, and a
/// field that is not an `Option` is required) to messages.
pub struct Prompt {
    name: String,
    title: Option<String>,
    description: String,
    arguments: fn() -> Value,
    handler: PromptHandler,
    completers: Vec<(String, Completer)>,
}

impl Prompt {
    pub fn new<A, R, F>(name: &str, description: &str, function: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoMessages,
        F: Fn(A) -> Result<R, ToolError> + 'static,
    {
        Prompt {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: schema::input_schema::<A>,
            handler: Box::new(move |arguments| {
                let arguments: A =
                    serde_json::from_value(Value::Object(arguments)).map_err(|error| {
                        ToolError::new(
                            "INVALID_ARGUMENTS",
                            format!("the arguments do not fit this prompt: {error}"),
                        )
                    })?;
                function(arguments).map(IntoMessages::into_messages)
            }),
            completers: Vec::new(),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Suggests values for `argument` from what the user typed so far.
    pub fn complete(
        mut self,
        argument: &str,
        complete: impl Fn(&str) -> Vec<String> + 'static,
    ) -> Self {
        self.completers.push((argument.into(), Box::new(complete)));
        self
    }

    fn listing(&self) -> prompts::Prompt {
        let schema = (self.arguments)();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let arguments = schema["properties"]
            .as_object()
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| prompts::PromptArgument {
                        name: name.clone(),
                        title: None,
                        description: property["description"].as_str().map(String::from),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        prompts::Prompt {
            name: self.name.clone(),
            title: self.title.clone(),
            description: Some(self.description.clone()),
            arguments,
        }
    }
}

/// What a plugin declares besides tools; held by `Tools` (`tool.rs`).
#[derive(Default)]
pub(crate) struct Catalog {
    pub(crate) resources: Vec<Resource>,
    pub(crate) templates: Vec<Template>,
    pub(crate) prompts: Vec<Prompt>,
    pub(crate) views: Vec<crate::views::View>,
}

/// Why a plugin with a catalog exported as tools only does not load;
/// `tools` is the function `export!` was given.
pub(crate) fn not_exported(tools: &str) -> String {
    format!(
        "this plugin has resources, templates, prompts, views or tool details \
         (a view, a visibility or a task), but \
         `toolhost_plugin::export!({tools})` exports its tools only: write \
         `toolhost_plugin::export!({tools}, catalog)` to export them too"
    )
}

impl Catalog {
    /// Whether there is nothing but tools.
    pub(crate) fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.templates.is_empty()
            && self.prompts.is_empty()
            && self.views.is_empty()
    }

    pub(crate) fn list_resources(&self) -> Vec<resources::Resource> {
        self.resources
            .iter()
            .map(|r| resources::Resource {
                uri: r.uri.clone(),
                name: r.name.clone(),
                title: r.title.clone(),
                description: Some(r.description.clone()),
                mime_type: r.mime_type.clone(),
            })
            .collect()
    }

    pub(crate) fn list_templates(&self) -> Vec<resources::ResourceTemplate> {
        self.templates
            .iter()
            .map(|t| resources::ResourceTemplate {
                uri_template: t.template.clone(),
                name: t.name.clone(),
                title: t.title.clone(),
                description: Some(t.description.clone()),
                mime_type: t.mime_type.clone(),
            })
            .collect()
    }

    pub(crate) fn read(&self, uri: &str) -> Result<Vec<resources::Contents>, ToolError> {
        let (read, variables, mime_type) =
            if let Some(r) = self.resources.iter().find(|r| r.uri == uri) {
                (&r.read, Map::new(), r.mime_type.clone())
            } else {
                self.templates
                    .iter()
                    .find_map(|t| Some((&t.read, t.matches(uri)?, t.mime_type.clone())))
                    .ok_or_else(|| ToolError::new("NOT_FOUND", format!("no resource at {uri}")))?
            };
        let body = match read(uri, &variables)? {
            Body::Text(text) => wit::ResourceBody::Text(text),
            Body::Blob(bytes) => wit::ResourceBody::Blob(bytes),
        };
        Ok(vec![resources::Contents {
            uri: uri.into(),
            mime_type,
            body,
        }])
    }

    pub(crate) fn list_prompts(&self) -> Vec<prompts::Prompt> {
        self.prompts.iter().map(Prompt::listing).collect()
    }

    pub(crate) fn get(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
    ) -> Result<prompts::PromptResult, ToolError> {
        let prompt = self
            .prompts
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ToolError::new("NOT_FOUND", format!("no prompt named {name}")))?;
        let arguments = arguments
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect();
        let messages = (prompt.handler)(arguments)?;
        Ok(prompts::PromptResult {
            description: messages.description,
            messages: messages.messages,
        })
    }

    pub(crate) fn complete(
        &self,
        reference: &completion::Reference,
        argument: &str,
        value: &str,
    ) -> completion::Completions {
        let completers = match reference {
            completion::Reference::Prompt(name) => self
                .prompts
                .iter()
                .find(|p| p.name == *name)
                .map(|p| &p.completers),
            completion::Reference::ResourceTemplate(template) => self
                .templates
                .iter()
                .find(|t| t.template == *template)
                .map(|t| &t.completers),
        };
        let values = completers
            .and_then(|list| list.iter().find(|(name, _)| name == argument))
            .map(|(_, complete)| complete(value))
            .unwrap_or_default();
        completion::Completions {
            total: Some(values.len() as u32),
            has_more: false,
            values,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_give_their_variables() {
        let t = Template::new(
            "test://template/{id}/data",
            "t",
            "d",
            |v: Map<String, Value>| Ok(format!("{v:?}")),
        );
        let vars = t.matches("test://template/123/data").unwrap();
        assert_eq!(vars["id"], "123");
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/1/2/data").is_none());
    }

    #[test]
    fn a_catalog_exported_as_tools_only_fails_to_load_saying_how_to_export_it() {
        use crate::{NoArguments, Tool, Tools};
        let tools = || Tools::new().tool(Tool::new("t", "d", |_: NoArguments| Ok("x")));
        assert_eq!(
            crate::__private::list_exported(&tools(), false, "tools").len(),
            1
        );
        let with_resource =
            || tools().resource(Resource::new("notes://a", "a", "d", || Ok("text")));
        assert_eq!(
            crate::__private::list_exported(&with_resource(), true, "tools").len(),
            1
        );
        let refused = std::panic::catch_unwind(|| {
            crate::__private::list_exported(&with_resource(), false, "plugin")
        })
        .unwrap_err();
        let message = refused.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("`toolhost_plugin::export!(plugin, catalog)`"),
            "{message}"
        );
    }
}
