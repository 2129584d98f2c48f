//! Views (MCP Apps, the extension `io.modelcontextprotocol/ui`) and what a
//! tool says beyond its record: the view its results are shown in, who
//! may call it, and whether it runs as an MCP task.
//!
//! ```no_run
//! use toolhost_plugin::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Args {
//!     /// How many bars
//!     bars: u32,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Chart {
//!     bars: Vec<u32>,
//! }
//!
//! fn tools() -> Tools {
//!     Tools::new()
//!         .view(View::new("ui://chart", "<!doctype html><p>a chart</p>").prefers_border(true))
//!         .tool(
//!             Tool::new("chart", "Draws a bar chart", |a: Args| {
//!                 Ok(Chart { bars: (1..=a.bars).collect() })
//!             })
//!             .view("ui://chart")
//!             .task(TaskSupport::Optional),
//!         )
//! }
//!
//! toolhost_plugin::export!(tools, catalog);
//! ```
//!
//! Views and tool details are exported with `catalog`, as resources are.

use crate::bindings::exports::toolhost::plugin0_2_0::{tool_details, views};

/// How a tool runs as an MCP task; a policy's `[tasks]` overrides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task (as a tool that says nothing).
    Forbidden,
    /// A task for a client that asks for one.
    Optional,
    /// Only ever a task.
    Required,
}

/// Who may call a tool: the model (an agent's list) and the app (its
/// view's calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Model,
    App,
}

/// One view: a `ui://` URI and its HTML document.
pub struct View {
    uri: String,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    html: String,
    csp: Option<views::Csp>,
    prefers_border: Option<bool>,
    domain: Option<String>,
}

impl View {
    /// A view at `uri` (`ui://...`) showing `html`, a whole document
    /// (`include_str!("chart.html")` ships a file of the crate).
    pub fn new(uri: &str, html: impl Into<String>) -> Self {
        View {
            uri: uri.to_string(),
            name: None,
            title: None,
            description: None,
            html: html.into(),
            csp: None,
            prefers_border: None,
            domain: None,
        }
    }

    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_string());
        self
    }

    pub fn description(mut self, description: &str) -> Self {
        self.description = Some(description.to_string());
        self
    }

    /// The origins its fetches, XHR and WebSockets may reach.
    pub fn connect_domains(mut self, origins: &[&str]) -> Self {
        self.csp_mut().connect_domains = owned(origins);
        self
    }

    /// The origins its scripts, styles, images, fonts and media may come
    /// from.
    pub fn resource_domains(mut self, origins: &[&str]) -> Self {
        self.csp_mut().resource_domains = owned(origins);
        self
    }

    /// The origins its nested frames may show.
    pub fn frame_domains(mut self, origins: &[&str]) -> Self {
        self.csp_mut().frame_domains = owned(origins);
        self
    }

    /// The origins its document's `<base>` may name.
    pub fn base_uri_domains(mut self, origins: &[&str]) -> Self {
        self.csp_mut().base_uri_domains = owned(origins);
        self
    }

    /// Whether the host should draw a border and background around it.
    pub fn prefers_border(mut self, value: bool) -> Self {
        self.prefers_border = Some(value);
        self
    }

    /// A dedicated origin it asks the host for.
    pub fn domain(mut self, domain: &str) -> Self {
        self.domain = Some(domain.to_string());
        self
    }

    fn csp_mut(&mut self) -> &mut views::Csp {
        self.csp.get_or_insert_with(|| views::Csp {
            connect_domains: Vec::new(),
            resource_domains: Vec::new(),
            frame_domains: Vec::new(),
            base_uri_domains: Vec::new(),
        })
    }

    pub(crate) fn listing(&self) -> views::View {
        let name = self.name.clone().unwrap_or_else(|| {
            let rest = self.uri.trim_start_matches("ui://").trim_matches('/');
            if rest.is_empty() {
                self.uri.clone()
            } else {
                rest.to_string()
            }
        });
        views::View {
            uri: self.uri.clone(),
            name,
            title: self.title.clone(),
            description: self.description.clone(),
            html: self.html.clone(),
            csp: self.csp.clone(),
            prefers_border: self.prefers_border,
            domain: self.domain.clone(),
        }
    }
}

fn owned(origins: &[&str]) -> Vec<String> {
    origins.iter().map(|origin| origin.to_string()).collect()
}

/// What one tool says beyond its record.
#[derive(Default, Clone)]
pub(crate) struct Details {
    pub(crate) view: Option<String>,
    pub(crate) visibility: Option<Vec<Audience>>,
    pub(crate) task: Option<TaskSupport>,
}

impl Details {
    pub(crate) fn is_empty(&self) -> bool {
        self.view.is_none() && self.visibility.is_none() && self.task.is_none()
    }

    pub(crate) fn listing(&self, tool: &str) -> tool_details::Detail {
        tool_details::Detail {
            tool: tool.to_string(),
            view: self.view.clone(),
            visibility: self.visibility.as_ref().map(|audiences| {
                audiences
                    .iter()
                    .map(|audience| match audience {
                        Audience::Model => tool_details::Audience::Model,
                        Audience::App => tool_details::Audience::App,
                    })
                    .collect()
            }),
            task: self.task.map(|task| match task {
                TaskSupport::Forbidden => tool_details::TaskSupport::Forbidden,
                TaskSupport::Optional => tool_details::TaskSupport::Optional,
                TaskSupport::Required => tool_details::TaskSupport::Required,
            }),
        }
    }
}
