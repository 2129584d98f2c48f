//! Declaring tools: a [`Tool`] is a name, a description and a typed
//! function; [`Tools`] is the plugin's list of them. From these the SDK
//! answers `list-tools` (with derived schemas) and dispatches `call-tool` by
//! name, parsing the arguments into the function's argument type.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::exports::toolhost::plugin0_1_0::tools as wit;
use crate::catalog::{Body, Catalog, Prompt, Resource, Template};
use crate::content::{Content, ToolError};
use crate::schema::{self, JsonSchema};
use crate::views::{Audience, Details, TaskSupport, View};

/// The arguments of a tool that takes none: `{}` (and nothing else).
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// What a tool function may return (inside `Result<_, ToolError>`).
///
/// Implemented for every `Serialize + JsonSchema` type: an object becomes
/// structured content (its schema the tool's output schema), anything else
/// (a `String`, a number) one text block. [`Content`] says exactly which
/// blocks to send.
pub trait IntoOutput {
    /// The output schema, when results of this type are structured.
    fn output_schema() -> Option<Value>;
    /// The result, as the host receives it.
    fn into_content(self) -> Result<Content, ToolError>;
}

impl<T: Serialize + JsonSchema> IntoOutput for T {
    fn output_schema() -> Option<Value> {
        let schema = schema::output_schema::<T>();
        (schema.get("type") == Some(&Value::from("object"))).then_some(schema)
    }

    fn into_content(self) -> Result<Content, ToolError> {
        let value = serde_json::to_value(&self).map_err(|error| {
            ToolError::new(
                "INVALID_RESULT",
                format!("the result could not be serialised: {error}"),
            )
        })?;
        Ok(match value {
            Value::Object(_) => Content::new().structured_value(value),
            Value::String(text) => Content::new().text(text),
            other => Content::new().text(other.to_string()),
        })
    }
}

/// Structured data with the text a person reads beside it (when the
/// host's rendering of the data is not what you want to show).
pub struct Structured<T> {
    data: T,
    text: Option<String>,
}

impl<T: Serialize + JsonSchema> Structured<T> {
    pub fn new(data: T) -> Self {
        Structured { data, text: None }
    }

    /// The text block sent beside the data.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
}

impl<T: Serialize + JsonSchema> IntoOutput for Structured<T> {
    fn output_schema() -> Option<Value> {
        T::output_schema()
    }

    fn into_content(self) -> Result<Content, ToolError> {
        let content = self.data.into_content()?;
        Ok(match self.text {
            Some(text) => content.text(text),
            None => content,
        })
    }
}

impl IntoOutput for Content {
    fn output_schema() -> Option<Value> {
        None
    }

    fn into_content(self) -> Result<Content, ToolError> {
        Ok(self)
    }
}

type Handler = Box<dyn Fn(&str) -> Result<Content, ToolError>>;

/// One tool: its name, description, optional title and hints, and the
/// function that runs it.
pub struct Tool {
    name: String,
    title: Option<String>,
    description: String,
    annotations: wit::Annotations,
    input_schema: fn() -> Value,
    standard_input_schema: fn() -> Value,
    standard: bool,
    /// A schema given as written, served unchanged.
    written: Option<Value>,
    output_schema: fn() -> Option<Value>,
    handler: Handler,
    pub(crate) details: Details,
}

impl Tool {
    /// A tool named `name` (unique on the host; letters, digits, `_`, `.`
    /// and `-`, at most 64) that runs `function`. The input schema is
    /// derived from `A` and the output schema from `R`; doc comments on
    /// their fields become the schema's descriptions.
    pub fn new<A, R, F>(name: &str, description: &str, function: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoOutput,
        F: Fn(A) -> Result<R, ToolError> + 'static,
    {
        Tool {
            name: name.to_string(),
            title: None,
            description: description.to_string(),
            annotations: wit::Annotations {
                read_only: None,
                destructive: None,
                idempotent: None,
                open_world: None,
            },
            input_schema: schema::input_schema::<A>,
            standard_input_schema: schema::standard_input_schema::<A>,
            standard: false,
            written: None,
            output_schema: R::output_schema,
            details: Details::default(),
            handler: Box::new(move |arguments| {
                let arguments: A = serde_json::from_str(arguments).map_err(|error| {
                    ToolError::new(
                        "INVALID_ARGUMENTS",
                        format!("the arguments do not fit this tool: {error}"),
                    )
                })?;
                function(arguments)?.into_content()
            }),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Shows its results in the view at `uri` (one of the plugin's
    /// [`View`]s).
    pub fn view(mut self, uri: &str) -> Self {
        self.details.view = Some(uri.to_string());
        self
    }

    /// Who may call it (the model, the app); both by default.
    pub fn visibility(mut self, audiences: &[Audience]) -> Self {
        self.details.visibility = Some(audiences.to_vec());
        self
    }

    /// Whether it runs as an MCP task.
    pub fn task(mut self, support: TaskSupport) -> Self {
        self.details.task = Some(support);
        self
    }

    /// A short human-readable name for user interfaces.
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_string());
        self
    }

    /// Hint: the tool changes nothing outside itself.
    pub fn read_only(mut self, value: bool) -> Self {
        self.annotations.read_only = Some(value);
        self
    }

    /// Hint: the tool may delete or overwrite things.
    pub fn destructive(mut self, value: bool) -> Self {
        self.annotations.destructive = Some(value);
        self
    }

    /// Hint: calling it twice with the same arguments has no further effect.
    pub fn idempotent(mut self, value: bool) -> Self {
        self.annotations.idempotent = Some(value);
        self
    }

    /// Hint: the tool talks to an open world (the internet, other people's
    /// systems).
    pub fn open_world(mut self, value: bool) -> Self {
        self.annotations.open_world = Some(value);
        self
    }

    /// Sends the input schema as schemars derives it for draft 2020-12,
    /// with `$schema`, and `$defs` and `$ref` for nested types, instead of
    /// the inlined form LLM APIs accept. For clients known to resolve
    /// references; `toolhost check` warns about it.
    pub fn standard_schema(mut self) -> Self {
        self.standard = true;
        self
    }

    /// Serves `schema` as the input schema, exactly as written (JSON
    /// Schema 2020-12: `allOf`, `if`/`then`/`else`, `$anchor` and the
    /// rest), instead of the one derived from the arguments' type. The
    /// host validates calls against it; the arguments' type must still
    /// read what it accepts.
    pub fn input_schema_as_written(mut self, schema: Value) -> Self {
        self.written = Some(schema);
        self
    }

    /// The derived input schema (what `list-tools` sends), for tests.
    pub fn input_schema(&self) -> Value {
        if let Some(written) = &self.written {
            return written.clone();
        }
        if self.standard {
            (self.standard_input_schema)()
        } else {
            (self.input_schema)()
        }
    }

    /// The derived output schema, if results are structured, for tests.
    pub fn output_schema(&self) -> Option<Value> {
        (self.output_schema)()
    }

    fn listing(&self) -> wit::Tool {
        let a = &self.annotations;
        let hinted = a.read_only.is_some()
            || a.destructive.is_some()
            || a.idempotent.is_some()
            || a.open_world.is_some();
        wit::Tool {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema().to_string(),
            output_schema: self.output_schema().map(|schema| schema.to_string()),
            annotations: hinted.then_some(*a),
        }
    }
}

/// The plugin's tools, in the order `list-tools` gives them, and its
/// resources, templates and prompts (see [`catalog`](crate::catalog)).
#[derive(Default)]
pub struct Tools {
    tools: Vec<Tool>,
    pub(crate) catalog: Catalog,
}

impl Tools {
    pub fn new() -> Self {
        Tools::default()
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a view (MCP Apps).
    pub fn view(mut self, view: View) -> Self {
        self.catalog.views.push(view);
        self
    }

    /// Adds a resource with a fixed URI.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.catalog.resources.push(resource);
        self
    }

    /// Adds a resource template.
    pub fn template(mut self, template: Template) -> Self {
        self.catalog.templates.push(template);
        self
    }

    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.catalog.prompts.push(prompt);
        self
    }

    /// Reads resource `uri` as the host's `read-resource` does: useful in a
    /// plugin's own tests.
    pub fn read_resource(&self, uri: &str) -> Result<Body, ToolError> {
        let contents = self.catalog.read(uri)?;
        Ok(match contents.into_iter().next().map(|c| c.body) {
            Some(wit::ResourceBody::Blob(bytes)) => Body::Blob(bytes),
            Some(wit::ResourceBody::Text(text)) => Body::Text(text),
            None => Body::Text(String::new()),
        })
    }

    /// Runs the tool `name` with `arguments` (JSON text), as the host's
    /// `call-tool` does: useful in a plugin's own tests.
    pub fn call(&self, name: &str, arguments: &str) -> Result<Content, ToolError> {
        let tool = self
            .tools
            .iter()
            .find(|tool| tool.name == name)
            .ok_or_else(|| {
                ToolError::new(
                    "UNKNOWN_TOOL",
                    format!("this plugin has no tool named {name}"),
                )
            })?;
        (tool.handler)(arguments)
    }

    /// The tools, for tests.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    /// Whether a tool says more than its record (a view, a visibility, a
    /// task), which only `export!(tools, catalog)` exports.
    pub(crate) fn has_details(&self) -> bool {
        self.tools.iter().any(|tool| !tool.details.is_empty())
    }

    /// `list-views`, for `export!`.
    pub(crate) fn list_views(
        &self,
    ) -> Vec<crate::bindings::exports::toolhost::plugin0_2_0::views::View> {
        self.catalog.views.iter().map(View::listing).collect()
    }

    /// `list-tool-details`, for `export!`.
    pub(crate) fn list_details(
        &self,
    ) -> Vec<crate::bindings::exports::toolhost::plugin0_2_0::tool_details::Detail> {
        self.tools
            .iter()
            .filter(|tool| !tool.details.is_empty())
            .map(|tool| tool.details.listing(&tool.name))
            .collect()
    }
}

/// `list-tools`, for `export!`.
pub fn list(tools: &Tools) -> Vec<wit::Tool> {
    tools.tools.iter().map(Tool::listing).collect()
}

/// `call-tool`, for `export!`.
pub fn call(tools: &Tools, name: &str, arguments: &str) -> Result<wit::Output, wit::ToolError> {
    tools
        .call(name, arguments)
        .map(Content::into_wit)
        .map_err(ToolError::into_wit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Deserialize, json};

    #[derive(Deserialize, schemars::JsonSchema)]
    struct Pair {
        a: f64,
        b: f64,
    }

    #[derive(Serialize, schemars::JsonSchema)]
    struct Sum {
        sum: f64,
    }

    fn tools() -> Tools {
        Tools::new()
            .tool(Tool::new("add", "Adds", |p: Pair| Ok(Sum { sum: p.a + p.b })).read_only(true))
            .tool(Tool::new("hello", "Greets", |_: NoArguments| Ok("hello")))
    }

    #[test]
    fn a_struct_result_is_structured_and_a_string_is_text() {
        let tools = tools();
        let sum = tools.call("add", r#"{"a":1,"b":2}"#).unwrap().into_wit();
        assert_eq!(sum.structured.as_deref(), Some(r#"{"sum":3.0}"#));
        assert!(sum.content.is_empty(), "the host renders the text");
        let hello = tools.call("hello", "{}").unwrap().into_wit();
        assert!(matches!(&hello.content[..], [wit::ContentBlock::Text(t)] if t == "hello"));
        assert_eq!(hello.structured, None);
    }

    #[test]
    fn listing_carries_derived_schemas_and_hints() {
        let listed = list(&tools());
        assert_eq!(listed.len(), 2);
        let input: Value = serde_json::from_str(&listed[0].input_schema).unwrap();
        assert_eq!(input["type"], "object");
        assert_eq!(input["required"], json!(["a", "b"]));
        let output: Value =
            serde_json::from_str(listed[0].output_schema.as_ref().unwrap()).unwrap();
        assert_eq!(output["properties"]["sum"]["type"], "number");
        assert_eq!(listed[0].annotations.unwrap().read_only, Some(true));
        assert_eq!(
            listed[1].output_schema, None,
            "a string result has no schema"
        );
        assert!(listed[1].annotations.is_none());
    }

    #[test]
    fn bad_arguments_and_unknown_tools_are_tool_errors() {
        let tools = tools();
        let error = tools.call("add", r#"{"a":"x"}"#).err().unwrap();
        assert_eq!(error.code(), "INVALID_ARGUMENTS");
        let error = tools.call("nope", "{}").err().unwrap();
        assert_eq!(error.code(), "UNKNOWN_TOOL");
        let error = tools.call("hello", r#"{"extra":1}"#).err().unwrap();
        assert_eq!(error.code(), "INVALID_ARGUMENTS");
    }
}
