//! What a tool says beyond its `tool` record (contract 0.2.0's
//! `tool-details`): the view its results are shown in, who may call it
//! (the model, the view), and whether it runs as a task. Checked as the
//! plugin loads and set on its [`Tool`]s before a policy's `[tasks]`,
//! which overrides what the code says of tasks.

use crate::registry::catalog::Catalog;
use crate::registry::tools::{TaskSupport, Tool};
use crate::runtime::{Audience, DeclaredDetail, DeclaredTaskSupport};

/// Why a plugin's tool details were refused.
#[derive(Debug, thiserror::Error)]
pub enum DetailError {
    #[error("tool details name {0:?}, which is not one of the plugin's tools")]
    UnknownTool(String),
    #[error("tool {0:?} has its details given twice")]
    Twice(String),
    #[error("tool {tool:?} is shown in view {view:?}, which is not one of the plugin's views")]
    UnknownView { tool: String, view: String },
    #[error("tool {0:?} has an empty visibility: no one could call it")]
    NoOne(String),
}

/// Sets `details` on `tools` (as declared, before namespacing), each view
/// by the URI `catalog` serves it at.
pub(crate) fn apply(
    tools: &mut [Tool],
    details: Vec<DeclaredDetail>,
    catalog: &Catalog,
) -> Result<(), DetailError> {
    let mut seen = std::collections::HashSet::new();
    for detail in details {
        if !seen.insert(detail.tool.clone()) {
            return Err(DetailError::Twice(detail.tool));
        }
        let Some(tool) = tools.iter_mut().find(|tool| tool.declared == detail.tool) else {
            return Err(DetailError::UnknownTool(detail.tool));
        };
        if let Some(view) = detail.view {
            let Some(resource) = catalog.view_declared(&view) else {
                return Err(DetailError::UnknownView {
                    tool: detail.tool,
                    view,
                });
            };
            tool.view = Some(resource.uri.clone());
        }
        if let Some(audiences) = detail.visibility {
            if audiences.is_empty() {
                return Err(DetailError::NoOne(detail.tool));
            }
            let mut names: Vec<&'static str> = Vec::new();
            for audience in [Audience::Model, Audience::App] {
                if audiences.contains(&audience) {
                    names.push(match audience {
                        Audience::Model => "model",
                        Audience::App => "app",
                    });
                }
            }
            tool.visibility = Some(names);
        }
        tool.task_support = match detail.task {
            None | Some(DeclaredTaskSupport::Forbidden) => None,
            Some(DeclaredTaskSupport::Optional) => Some(TaskSupport::Optional),
            Some(DeclaredTaskSupport::Required) => Some(TaskSupport::Required),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tools::{ToolListLimits, build_tools, tests::spec};
    use crate::runtime::{DeclaredView, Description};

    fn plugin(views: &[&str]) -> (Vec<Tool>, Catalog) {
        let tools = build_tools(
            vec![spec("chart", r#"{"type":"object"}"#)],
            &ToolListLimits::DEFAULT,
        )
        .unwrap();
        let mut description = Description {
            views: views
                .iter()
                .map(|uri| DeclaredView {
                    uri: uri.to_string(),
                    name: "v".into(),
                    title: None,
                    description: None,
                    html: "<p>".into(),
                    csp: None,
                    prefers_border: None,
                    domain: None,
                })
                .collect(),
            ..Description::default()
        };
        let catalog =
            Catalog::build(&mut description, Some("ada"), &ToolListLimits::DEFAULT).unwrap();
        (tools, catalog)
    }

    fn detail(tool: &str, view: Option<&str>, visibility: Option<Vec<Audience>>) -> DeclaredDetail {
        DeclaredDetail {
            tool: tool.into(),
            view: view.map(str::to_string),
            visibility,
            task: Some(DeclaredTaskSupport::Optional),
        }
    }

    #[test]
    fn a_tools_view_is_served_under_its_namespace_with_its_task() {
        let (mut tools, catalog) = plugin(&["ui://chart"]);
        apply(
            &mut tools,
            vec![detail(
                "chart",
                Some("ui://chart"),
                Some(vec![Audience::App]),
            )],
            &catalog,
        )
        .unwrap();
        assert_eq!(tools[0].view.as_deref(), Some("ui://ada/chart"));
        assert_eq!(tools[0].visibility, Some(vec!["app"]));
        assert_eq!(tools[0].task_support, Some(TaskSupport::Optional));
    }

    #[test]
    fn what_does_not_fit_the_plugin_is_refused() {
        let refused = |details| {
            let (mut tools, catalog) = plugin(&["ui://chart"]);
            apply(&mut tools, details, &catalog).unwrap_err()
        };
        assert!(matches!(
            refused(vec![detail("nope", None, None)]),
            DetailError::UnknownTool(_)
        ));
        assert!(matches!(
            refused(vec![detail("chart", Some("ui://other"), None)]),
            DetailError::UnknownView { .. }
        ));
        assert!(matches!(
            refused(vec![
                detail("chart", None, None),
                detail("chart", None, None)
            ]),
            DetailError::Twice(_)
        ));
        assert!(matches!(
            refused(vec![detail("chart", None, Some(Vec::new()))]),
            DetailError::NoOne(_)
        ));
        // A view of the same URI in another plugin is not this one's.
        let (mut tools, catalog) = plugin(&[]);
        assert!(
            apply(
                &mut tools,
                vec![detail("chart", Some("ui://chart"), None)],
                &catalog
            )
            .is_err()
        );
    }
}
