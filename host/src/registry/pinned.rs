//! What an approval pins beyond a plugin's listings (`--require-approval`):
//! the text an agent reads from it without calling a tool, and each view's
//! HTML and `_meta` (`app_views.rs`), which a person's browser runs. When a version
//! loads, each fixed resource is read and each prompt got (every argument
//! set to the placeholder `{name}`), and what they answer joins the
//! definitions an admin approves (`approvals.rs`): a code-only republish
//! that changes a prompt's or a resource's text waits like a changed
//! description does.
//!
//! The answers themselves are kept too ([`Answers`]): while a version's
//! definitions are approved, its fixed resources are read and its prompts
//! without arguments got from them (`call/catalog_path.rs`), never from
//! its code again, so code that answers the approved text as it loads and
//! another text later never serves the other one.
//!
//! What cannot be pinned: what a template's resources say (any URI), what a
//! prompt with arguments says, and a tool's output, which are made at call
//! time; `--require-approval all` pins the component itself.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::registry::plugin::LoadedPlugin;
use crate::runtime::{
    Answer, Ask, CallFailure, ContentBlock, PluginError, PromptResult, ResourceBody,
    ResourceContents, Role, Runtime,
};

/// How much of a text the approval record shows; the digest covers all
/// of it.
const SHOWN: usize = 2048;

/// The largest answer kept whole: the most any answer is served
/// (`call/envelope.rs`), counting a blob's bytes before base64.
pub(crate) const KEPT_BYTES: usize = 8 * 1024 * 1024;

/// The most kept whole of one version's answers together; the answers
/// past it are kept as their size.
pub(crate) const KEPT_VERSION_BYTES: usize = 32 * 1024 * 1024;

/// What a version's fixed resources and prompts answered as it loaded.
pub(crate) struct Pinned {
    /// As the approval record shows them: an object of `resources` (by
    /// URI) and `prompts` (by name), an answer that failed as its error.
    pub(crate) texts: Value,
    /// The answers themselves, served while the approval holds.
    pub(crate) answers: Arc<Answers>,
}

/// What a fixed resource answered as it was read.
pub(crate) type ResourceAnswer = Kept<Result<Vec<ResourceContents>, PluginError>>;

/// What a prompt without arguments answered as it was got.
pub(crate) type PromptAnswer = Kept<Result<PromptResult, PluginError>>;

/// The answers of one version's fixed resources (by the URI clients read)
/// and of its prompts without arguments (by the name clients get).
#[derive(Default)]
pub(crate) struct Answers {
    resources: HashMap<String, ResourceAnswer>,
    prompts: HashMap<String, PromptAnswer>,
}

impl Answers {
    /// What the fixed resource at `uri` answered.
    pub(crate) fn resource(&self, uri: &str) -> Option<&ResourceAnswer> {
        self.resources.get(uri)
    }

    /// What the prompt `name` answered, when it takes no arguments.
    pub(crate) fn prompt(&self, name: &str) -> Option<&PromptAnswer> {
        self.prompts.get(name)
    }
}

/// One answer as it was kept.
#[derive(Clone)]
pub(crate) enum Kept<T> {
    /// What the plugin answered: its contents or messages, or its error.
    Answered(T),
    /// It did not answer (it trapped, or ran past its deadline, say).
    Failed(CallFailure),
    /// It answered with more than is kept ([`KEPT_BYTES`], or past
    /// [`KEPT_VERSION_BYTES`] with the answers before it): its size.
    TooLarge { bytes: usize },
}

/// The room left for one version's answers.
struct Budget {
    left: usize,
}

impl Budget {
    /// `answer`, kept whole when its `bytes` fit.
    fn keep<T>(&mut self, answer: T, bytes: usize) -> Kept<T> {
        if bytes > KEPT_BYTES || bytes > self.left {
            return Kept::TooLarge { bytes };
        }
        self.left -= bytes;
        Kept::Answered(answer)
    }
}

/// What `plugin`'s fixed resources and prompts answer now: their texts,
/// and the answers kept of the fixed resources and of the prompts without
/// arguments.
pub(crate) async fn texts(runtime: &Arc<Runtime>, plugin: &LoadedPlugin) -> Pinned {
    let mut budget = Budget {
        left: KEPT_VERSION_BYTES,
    };
    let mut answers = Answers::default();
    let mut resources = Map::new();
    for resource in &plugin.catalog.resources {
        // A view's answer is what it declared: its HTML and `_meta`.
        if let Some(view) = &resource.view {
            let mut said = json!({ "mimeType": crate::registry::app_views::MIME_TYPE, "body": text(&view.html) });
            if let Some(meta) = &view.meta {
                said["_meta"] = meta.clone();
            }
            resources.insert(resource.uri.clone(), json!([said]));
            continue;
        }
        let ask = Ask::ReadResource {
            uri: resource.declared.clone(),
        };
        let (said, kept) = match runtime
            .ask(&plugin.compiled, &plugin.grants, ask, None)
            .await
            .0
        {
            Ok(Answer::Contents(Ok(contents))) => {
                let said = Value::Array(
                    contents
                        .iter()
                        .map(|content| {
                            json!({
                                "uri": content.uri,
                                "mimeType": content.mime_type,
                                "body": body(&content.body),
                            })
                        })
                        .collect(),
                );
                let bytes = contents
                    .iter()
                    .map(|content| content.uri.len() + body_len(&content.body))
                    .sum();
                (said, budget.keep(Ok(contents), bytes))
            }
            Ok(Answer::Contents(Err(error))) => {
                let bytes = error_len(&error);
                (
                    json!({ "error": error.code }),
                    budget.keep(Err(error), bytes),
                )
            }
            Ok(_) => (json!({ "error": "did not answer" }), other_kind()),
            Err(failure) => (json!({ "error": "did not answer" }), Kept::Failed(failure)),
        };
        resources.insert(resource.uri.clone(), said);
        answers.resources.insert(resource.uri.clone(), kept);
    }
    let mut prompts = Map::new();
    for prompt in &plugin.catalog.prompts {
        let ask = Ask::GetPrompt {
            name: prompt.declared.clone(),
            arguments: prompt
                .arguments
                .iter()
                .map(|(name, _)| (name.clone(), format!("{{{name}}}")))
                .collect(),
        };
        let (said, kept) = match runtime
            .ask(&plugin.compiled, &plugin.grants, ask, None)
            .await
            .0
        {
            Ok(Answer::Prompt(Ok(result))) => {
                let said = json!({
                    "description": result.description,
                    "messages": result.messages.iter().map(|message| json!({
                        "role": match message.role { Role::User => "user", Role::Assistant => "assistant" },
                        "content": block(&message.content),
                    })).collect::<Vec<_>>(),
                });
                let bytes = result.description.as_ref().map_or(0, String::len)
                    + result
                        .messages
                        .iter()
                        .map(|message| block_len(&message.content))
                        .sum::<usize>();
                (said, budget.keep(Ok(result), bytes))
            }
            Ok(Answer::Prompt(Err(error))) => {
                let bytes = error_len(&error);
                (
                    json!({ "error": error.code }),
                    budget.keep(Err(error), bytes),
                )
            }
            Ok(_) => (json!({ "error": "did not answer" }), other_kind()),
            Err(failure) => (json!({ "error": "did not answer" }), Kept::Failed(failure)),
        };
        prompts.insert(prompt.name.clone(), said);
        // A prompt with arguments is got with the caller's, from its code.
        if prompt.arguments.is_empty() {
            answers.prompts.insert(prompt.name.clone(), kept);
        }
    }
    Pinned {
        texts: json!({ "resources": resources, "prompts": prompts }),
        answers: Arc::new(answers),
    }
}

/// An answer of another kind than was asked for: the host's fault.
fn other_kind<T>() -> Kept<T> {
    Kept::Failed(CallFailure::Host(
        "answered another kind of request than was asked".to_string(),
    ))
}

/// A text as the record shows it: whole when short, else its start and
/// the digest of all of it.
fn text(text: &str) -> Value {
    if text.len() <= SHOWN {
        return json!(text);
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!({ "start": &text[..end], "bytes": text.len(), "sha256": sha256(text.as_bytes()) })
}

fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn body(body: &ResourceBody) -> Value {
    match body {
        ResourceBody::Text(said) => json!({ "text": text(said) }),
        ResourceBody::Blob(bytes) => json!({ "blobSha256": sha256(bytes) }),
    }
}

fn block(content: &ContentBlock) -> Value {
    match content {
        ContentBlock::Text(said) => json!({ "text": text(said) }),
        ContentBlock::Image(media) | ContentBlock::Audio(media) => {
            json!({ "mimeType": media.mime_type, "sha256": sha256(&media.data) })
        }
        ContentBlock::ResourceLink(link) => json!({
            "resourceLink": link.uri,
            "name": link.name,
            "title": link.title,
            "description": link.description.as_deref().map(text),
        }),
        ContentBlock::Resource(embedded) => json!({
            "resource": embedded.uri,
            "mimeType": embedded.mime_type,
            "body": body(&embedded.body),
        }),
    }
}

/// The bytes of a body, a blob's before base64.
fn body_len(body: &ResourceBody) -> usize {
    match body {
        ResourceBody::Text(said) => said.len(),
        ResourceBody::Blob(bytes) => bytes.len(),
    }
}

/// The bytes of a content block's texts and data.
fn block_len(content: &ContentBlock) -> usize {
    match content {
        ContentBlock::Text(said) => said.len(),
        ContentBlock::Image(media) | ContentBlock::Audio(media) => {
            media.data.len() + media.mime_type.len()
        }
        ContentBlock::ResourceLink(link) => {
            link.uri.len()
                + link.name.len()
                + [&link.title, &link.description, &link.mime_type]
                    .into_iter()
                    .flatten()
                    .map(String::len)
                    .sum::<usize>()
        }
        ContentBlock::Resource(embedded) => embedded.uri.len() + body_len(&embedded.body),
    }
}

/// The bytes of a plugin's error.
fn error_len(error: &PluginError) -> usize {
    error.code.len() + error.message.len() + error.details.as_ref().map_or(0, String::len)
}
