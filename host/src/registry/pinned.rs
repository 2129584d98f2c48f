//! What an approval pins beyond a plugin's listings (`--require-approval`):
//! the text an agent reads from it without calling a tool. When a version
//! loads, each fixed resource is read and each prompt got (every argument
//! set to the placeholder `{name}`), and what they answer joins the
//! definitions an admin approves (`approvals.rs`): a code-only republish
//! that changes a prompt's or a resource's text waits like a changed
//! description does.
//!
//! What cannot be pinned: what a template's resources say (any URI), what a
//! prompt says for other arguments, and a tool's output, which are made at
//! call time; `--require-approval all` pins the component itself.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::registry::plugin::LoadedPlugin;
use crate::runtime::{Answer, Ask, ContentBlock, ResourceBody, Role, Runtime};

/// How much of a text the approval record shows; the digest covers all
/// of it.
const SHOWN: usize = 2048;

/// The texts of `plugin`'s fixed resources and prompts, as an object of
/// `resources` (by URI) and `prompts` (by name); an answer that failed is
/// pinned as its error.
pub(crate) async fn texts(runtime: &Arc<Runtime>, plugin: &LoadedPlugin) -> Value {
    let mut resources = Map::new();
    for resource in &plugin.catalog.resources {
        let ask = Ask::ReadResource {
            uri: resource.declared.clone(),
        };
        let said = match runtime
            .ask(&plugin.compiled, &plugin.grants, ask, None)
            .await
            .0
        {
            Ok(Answer::Contents(Ok(contents))) => Value::Array(
                contents
                    .into_iter()
                    .map(|content| {
                        json!({
                            "uri": content.uri,
                            "mimeType": content.mime_type,
                            "body": body(&content.body),
                        })
                    })
                    .collect(),
            ),
            Ok(Answer::Contents(Err(error))) => json!({ "error": error.code }),
            Ok(_) | Err(_) => json!({ "error": "did not answer" }),
        };
        resources.insert(resource.uri.clone(), said);
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
        let said = match runtime
            .ask(&plugin.compiled, &plugin.grants, ask, None)
            .await
            .0
        {
            Ok(Answer::Prompt(Ok(result))) => json!({
                "description": result.description,
                "messages": result.messages.iter().map(|message| json!({
                    "role": match message.role { Role::User => "user", Role::Assistant => "assistant" },
                    "content": block(&message.content),
                })).collect::<Vec<_>>(),
            }),
            Ok(Answer::Prompt(Err(error))) => json!({ "error": error.code }),
            Ok(_) | Err(_) => json!({ "error": "did not answer" }),
        };
        prompts.insert(prompt.name.clone(), said);
    }
    json!({ "resources": resources, "prompts": prompts })
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
