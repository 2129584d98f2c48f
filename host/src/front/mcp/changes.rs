//! What an MCP session hears of changes, and only of those to what it
//! sees: `notifications/tools/list_changed` when the tool list of its view
//! changes (a tool of its set comes, goes or changes, or the tokens file
//! gives its owner another set), the resource and prompt lists' and
//! subscribed resources' notifications likewise (`catalog_methods.rs`),
//! and rejected plugins as log messages once the client enabled logging;
//! for the stateless revision, `subscriptions/listen`'s list changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::catalog_methods::{self, SessionCatalog};
use super::session_client::severity;
use crate::edge::auth::{Authority, Identity};
use crate::edge::guard::Requester;
use crate::front::lists::ToolLists;
use crate::registry::Registry;
use crate::registry::events::LoadEventKind;
use crate::registry::view::View;

/// What a session's changes are read from and told with: the parts of
/// the MCP front's handler this room needs, handed in by it.
pub(super) struct Watch {
    pub(super) registry: Arc<Registry>,
    pub(super) lists: Arc<ToolLists>,
    /// Who may use the server; `None` over stdio (everything).
    pub(super) authority: Option<Arc<Authority>>,
    /// What the session was offered of resources and prompts.
    pub(super) catalog: Arc<SessionCatalog>,
    /// Cancelled when the session ends.
    pub(super) session_ended: CancellationToken,
    pub(super) logging_enabled: Arc<AtomicBool>,
    pub(super) log_level: Arc<Mutex<LoggingLevel>>,
}

/// Tells this session's client, until the session ends:
/// - `notifications/tools/list_changed` each time the tool list it
///   sees changes (a tool of its view comes, goes or changes, or the
///   tokens file gives its owner another set), and the resource and
///   prompt lists' and subscribed resources' notifications likewise
///   (`catalog_methods.rs`);
/// - a `notifications/message` warning for each plugin file rejected,
///   once the client has enabled logging, at or above its level, with
///   the reason as `viewer` may read it (`/plugins`'s rule).
///
/// Each session has its own task, so a slow or dead client delays no
/// other.
pub(super) fn forward(watch: Watch, peer: Peer<RoleServer>, mut viewer: Requester) {
    let mut changes = watch.registry.tool_list_changes();
    let mut catalog_changes = watch.registry.catalog_changes();
    let mut seen = catalog_changes.borrow_and_update().clone();
    let mut events = watch.registry.events();
    let authority = watch.authority.clone();
    let mut tokens = authority.as_ref().map(|authority| authority.changes());
    let mut view = viewer.view();
    let (registry, session, lists) = (watch.registry, watch.catalog, watch.lists);
    let mut sees = Seen::of(&registry, &lists, &view);
    let (ended, logging_enabled, log_level) =
        (watch.session_ended, watch.logging_enabled, watch.log_level);
    tokio::spawn(async move {
        loop {
            let tokens_changed = next_change(tokens.as_mut());
            let sent = tokio::select! {
                () = ended.cancelled() => return,
                changed = changes.changed() => match changed {
                    Ok(()) if view.is_all() => peer.notify_tool_list_changed().await,
                    Ok(()) => {
                        let now = tools_digest(&registry, &lists, &view);
                        if now != sees.tools {
                            sees.tools = now;
                            peer.notify_tool_list_changed().await
                        } else {
                            Ok(())
                        }
                    }
                    Err(_) => return,
                },
                changed = catalog_changes.changed() => match changed {
                    Ok(()) => {
                        let now = catalog_changes.borrow_and_update().clone();
                        catalog_methods::announce(&peer, &registry, &session, &mut seen, now, &view, &mut sees.catalog).await
                    }
                    Err(_) => return,
                },
                changed = tokens_changed => match (changed, &authority) {
                    (Ok(()), Some(authority)) => {
                        let now_view = authority.view_now(viewer.0.as_ref());
                        if now_view == view {
                            continue;
                        }
                        view = now_view;
                        if let Some(identity) = viewer.0.as_mut() {
                            identity.tools = view.clone();
                        }
                        let now = Seen::of(&registry, &lists, &view);
                        let told = catalog_methods::announce_view(&peer, &session, &sees.catalog, &now.catalog).await;
                        let told = match told {
                            Ok(()) if now.tools != sees.tools => peer.notify_tool_list_changed().await,
                            other => other,
                        };
                        sees = now;
                        told
                    }
                    _ => {
                        tokens = None;
                        continue;
                    }
                },
                event = events.recv() => match event {
                    Ok(event) if event.kind != LoadEventKind::Rejected => continue,
                    // Out of the session's view: not its to hear of.
                    Ok(rejected) if viewer.hides(&rejected.report) => continue,
                    Ok(rejected) => {
                        let threshold = *log_level.lock().unwrap_or_else(|e| e.into_inner());
                        if !logging_enabled.load(Ordering::Relaxed)
                            || severity(LoggingLevel::Warning) < severity(threshold)
                        {
                            continue;
                        }
                        // Another person's reasons (and server paths)
                        // are theirs and the admins'.
                        let report = viewer.sees_plugin(rejected.report);
                        let data = json!({
                            "event": "plugin rejected",
                            "plugin": rejected.plugin,
                            "reason": report.reason.unwrap_or_default(),
                        });
                        let params = LoggingMessageNotificationParam::new(LoggingLevel::Warning, data)
                            .with_logger("toolhost");
                        peer.notify_logging_message(params).await
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            };
            if sent.is_err() || peer.is_transport_closed() {
                return;
            }
        }
    });
}

/// A `subscriptions/listen` stream (the stateless revision): the tool,
/// prompt and resource lists' changes it asked for (`accepted`), each
/// only when the list its sender sees changed (their set, read again when
/// the tokens file changes), as a session gets them. `identity` is the
/// listener's.
pub(super) async fn listen(
    watch: Watch,
    identity: Option<Identity>,
    context: SubscriptionContext,
) -> Result<(), McpError> {
    let accepted = context.accepted().clone();
    let wants = |flag: Option<bool>| flag == Some(true);
    let (tools_wanted, prompts_wanted, resources_wanted) = (
        wants(accepted.tools_list_changed),
        wants(accepted.prompts_list_changed),
        wants(accepted.resources_list_changed),
    );
    let mut changes = watch.registry.tool_list_changes();
    let mut catalog_changes = watch.registry.catalog_changes();
    let mut catalog_now = catalog_changes.borrow_and_update().clone();
    let mut tokens = watch
        .authority
        .as_ref()
        .map(|authority| authority.changes());
    let view_now = || match &watch.authority {
        Some(authority) => authority.view_now(identity.as_ref()),
        None => View::all(),
    };
    // Everything: the registry's own signals are the changes; a set: a
    // digest of each list as it shows it.
    let digest =
        |view: &View| (!view.is_all()).then(|| tools_digest(&watch.registry, &watch.lists, view));
    let mut view = view_now();
    let mut seen = digest(&view);
    let mut catalog_seen = catalog_methods::CatalogSeen::of(&watch.registry, &view);
    loop {
        let tokens_changed = next_change(tokens.as_mut());
        let (mut tools, mut prompts, mut resources) = (false, false, false);
        tokio::select! {
            () = context.cancelled() => return Ok(()),
            changed = changes.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let now = digest(&view);
                tools = now.is_none() || now != seen;
                seen = now;
            }
            changed = catalog_changes.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let then = std::mem::replace(&mut catalog_now, catalog_changes.borrow_and_update().clone());
                let now = catalog_methods::CatalogSeen::of(&watch.registry, &view);
                if view.is_all() {
                    prompts = catalog_now.prompts != then.prompts;
                    resources = catalog_now.resources != then.resources;
                } else {
                    (prompts, resources) = catalog_seen.differs(&now);
                }
                catalog_seen = now;
            }
            changed = tokens_changed => {
                if changed.is_err() {
                    tokens = None;
                    continue;
                }
                view = view_now();
                let now = digest(&view);
                tools = now != seen;
                seen = now;
                let catalog = catalog_methods::CatalogSeen::of(&watch.registry, &view);
                (prompts, resources) = catalog_seen.differs(&catalog);
                catalog_seen = catalog;
            }
        }
        let sink = context.sink();
        let sent = async {
            if tools && tools_wanted {
                sink.notify_tool_list_changed().await?;
            }
            if prompts && prompts_wanted {
                sink.notify_prompt_list_changed().await?;
            }
            if resources && resources_wanted {
                sink.notify_resource_list_changed().await?;
            }
            Ok::<(), rmcp::service::SubscriptionSendError>(())
        };
        if sent.await.is_err() {
            return Ok(());
        }
    }
}

/// The next reload of the tokens file; never, without one (stdio).
async fn next_change(
    tokens: Option<&mut tokio::sync::watch::Receiver<u64>>,
) -> Result<(), tokio::sync::watch::error::RecvError> {
    match tokens {
        Some(tokens) => tokens.changed().await,
        None => std::future::pending().await,
    }
}

/// What a session last saw of the lists, to tell its client only of the
/// changes to what it sees.
struct Seen {
    tools: u64,
    catalog: catalog_methods::CatalogSeen,
}

impl Seen {
    fn of(registry: &Registry, lists: &ToolLists, view: &View) -> Seen {
        Seen {
            tools: tools_digest(registry, lists, view),
            catalog: catalog_methods::CatalogSeen::of(registry, view),
        }
    }
}

/// The digest of the tool list `view` shows (shared by every session of
/// that view: `lists.rs`); 0 for everything, whose changes the registry's
/// own signal tells.
fn tools_digest(registry: &Registry, lists: &ToolLists, view: &View) -> u64 {
    if view.is_all() {
        0
    } else {
        lists.digest(&registry.snapshot(), view)
    }
}
