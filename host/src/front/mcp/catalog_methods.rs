//! MCP resources, prompts and completion: the capabilities a session is
//! offered, each request through the shared call path (`call/catalog_path.rs`)
//! and its JSON into rmcp's types through serde, failures as JSON-RPC
//! errors (the code from `errors.rs`, the error object in `data`), and
//! what a session hears when the lists change or a resource it subscribed
//! to may have (its plugin was replaced).
//!
//! Capabilities are those of the plugins loaded when the session starts:
//! `resources` (with `subscribe` and `listChanged`) when some plugin serves
//! a resource or a template, `prompts` (with `listChanged`) when some
//! plugin has a prompt, `completions` when one of those also exports
//! `completion`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{
    CompleteRequestParams, CompleteResult, ErrorCode as RpcErrorCode, GetPromptRequestParams,
    GetPromptResult, GetSkillResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListSkillsResult, PromptsCapability, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResult, Reference,
    ResourceUpdatedNotificationParam, ResourcesCapability, ServerCapabilities,
};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Value, json};

use crate::call::Calls;
use crate::call::catalog_path::{self, Completing};
use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::registry::view::View;
use crate::registry::{CatalogChange, Registry};

/// How many resource URIs one session may subscribe to: templates make
/// URIs endless, and a session's memory is bounded.
const MAX_SUBSCRIPTIONS: usize = 1000;

/// What bounds subscriptions over every session: the longest URI, and
/// how many one person may hold in all (with tokens), with what each
/// person holds now and the sessions holding them (so that a session's
/// end gives its share back at once, not when rmcp drops its service).
pub(crate) struct CatalogLimits {
    pub(crate) max_uri_bytes: usize,
    pub(crate) per_person: usize,
    held: Mutex<HashMap<String, usize>>,
    /// By session id: a session's own catalog, and any made for one
    /// request that named the session (rmcp's stateless path).
    holders: Mutex<HashMap<String, Vec<Weak<Mutex<Subscriptions>>>>>,
}

impl CatalogLimits {
    pub(crate) fn new(max_uri_bytes: usize, per_person: usize) -> Arc<CatalogLimits> {
        Arc::new(CatalogLimits {
            max_uri_bytes,
            per_person,
            held: Mutex::default(),
            holders: Mutex::default(),
        })
    }

    /// Session `id` ended (DELETE, idle, revoked): the subscriptions it
    /// held count against its person no more, from now on.
    pub(crate) fn session_ended(&self, id: &str) {
        let holders = lock(&self.holders).remove(id).unwrap_or_default();
        for subscriptions in holders.iter().filter_map(Weak::upgrade) {
            self.give_back(&mut lock(&subscriptions));
        }
    }

    /// Empties `subscriptions`, giving their count back to their person:
    /// whichever of a session's end and its catalog's drop comes second
    /// gives back nothing.
    fn give_back(&self, subscriptions: &mut Subscriptions) {
        let count = std::mem::take(&mut subscriptions.uris).len();
        if let Some(person) = &subscriptions.person {
            self.release(person, count);
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        lock(&self.held)
    }

    fn release(&self, person: &str, count: usize) {
        let mut held = self.held();
        if let Some(now) = held.get_mut(person) {
            *now = now.saturating_sub(count);
            if *now == 0 {
                held.remove(person);
            }
        }
    }
}

/// One session's view of resources and prompts: what it was offered when it
/// started (only those lists' changes are announced to it) and the URIs it
/// subscribed to, counted against its person's share until it ends.
pub(crate) struct SessionCatalog {
    offered: Mutex<(bool, bool)>,
    subscriptions: Arc<Mutex<Subscriptions>>,
    limits: Arc<CatalogLimits>,
}

#[derive(Default)]
struct Subscriptions {
    uris: HashSet<String>,
    /// Whose they are (the session's person, with tokens).
    person: Option<String>,
    /// The session's id, once a subscription counted against a person.
    session: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl SessionCatalog {
    pub(crate) fn new(limits: Arc<CatalogLimits>) -> SessionCatalog {
        SessionCatalog {
            offered: Mutex::default(),
            subscriptions: Arc::default(),
            limits,
        }
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, Subscriptions> {
        lock(&self.subscriptions)
    }
}

impl Drop for SessionCatalog {
    fn drop(&mut self) {
        let mut subscriptions = self.subscriptions();
        self.limits.give_back(&mut subscriptions);
        let session = subscriptions.session.take();
        drop(subscriptions);
        if let Some(id) = session {
            let mut holders = lock(&self.limits.holders);
            if let Some(held) = holders.get_mut(&id) {
                let this = Arc::downgrade(&self.subscriptions);
                held.retain(|holder| !holder.ptr_eq(&this));
                if held.is_empty() {
                    holders.remove(&id);
                }
            }
        }
    }
}

/// Adds what the loaded plugins `view` sees offer to `capabilities`, and
/// remembers it for the session.
pub(crate) fn offer(
    registry: &Registry,
    session: Option<&SessionCatalog>,
    capabilities: &mut ServerCapabilities,
    view: &View,
) {
    let offered = catalog_path::offered(registry, view);
    if let Some(session) = session {
        *session.offered.lock().unwrap_or_else(|e| e.into_inner()) =
            (offered.resources, offered.prompts);
    }
    if offered.resources {
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(true);
        resources.list_changed = Some(true);
        capabilities.resources = Some(resources);
    }
    if offered.prompts {
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
    }
    if offered.completion {
        capabilities.completions = Some(Default::default());
    }
}

pub(crate) fn list_resources(
    registry: &Registry,
    view: &View,
) -> Result<ListResourcesResult, McpError> {
    typed(catalog_path::list_resources(registry, view))
}

pub(crate) fn list_templates(
    registry: &Registry,
    view: &View,
) -> Result<ListResourceTemplatesResult, McpError> {
    typed(catalog_path::list_templates(registry, view))
}

pub(crate) fn list_prompts(
    registry: &Registry,
    view: &View,
) -> Result<ListPromptsResult, McpError> {
    typed(catalog_path::list_prompts(registry, view))
}

pub(crate) async fn read_resource(
    registry: &Arc<Registry>,
    calls: &Calls,
    session: &SessionCatalog,
    request: ReadResourceRequestParams,
    view: &View,
) -> Result<ReadResourceResult, McpError> {
    catalog_path::check_uri(&request.uri, session.limits.max_uri_bytes).map_err(rpc_error)?;
    typed(
        catalog_path::read_resource(registry, calls, &request.uri, view)
            .await
            .map_err(rpc_error)?,
    )
}

/// `skills/list` (SEP-2640): one page of the skills the caller sees.
pub(crate) fn list_skills(
    registry: &Registry,
    cursor: Option<&str>,
    view: &View,
) -> Result<ListSkillsResult, McpError> {
    typed(crate::call::skills_path::list(registry, view, cursor).map_err(rpc_error)?)
}

/// `skills/get` (SEP-2640): one skill's entry; -32602 for a URI that names
/// no skill the caller sees.
pub(crate) fn get_skill(
    registry: &Registry,
    session: &SessionCatalog,
    uri: &str,
    view: &View,
) -> Result<GetSkillResult, McpError> {
    catalog_path::check_uri(uri, session.limits.max_uri_bytes).map_err(rpc_error)?;
    typed(crate::call::skills_path::get(registry, view, uri).map_err(rpc_error)?)
}

/// `resources/directory/read` (SEP-2640): the children of a skill's
/// folder; -32602 for a URI that names no folder of a skill the caller
/// sees.
pub(crate) fn read_skill_directory(
    registry: &Registry,
    session: &SessionCatalog,
    request: &ReadResourceDirectoryRequestParams,
    view: &View,
) -> Result<ReadResourceDirectoryResult, McpError> {
    catalog_path::check_uri(&request.uri, session.limits.max_uri_bytes).map_err(rpc_error)?;
    typed(
        crate::call::skills_path::directory(
            registry,
            view,
            &request.uri,
            request.cursor.as_deref(),
        )
        .map_err(rpc_error)?,
    )
}

pub(crate) async fn get_prompt(
    registry: &Arc<Registry>,
    calls: &Calls,
    request: GetPromptRequestParams,
    view: &View,
    client: crate::runtime::CallClient,
) -> Result<GetPromptResult, McpError> {
    let arguments = request.arguments.unwrap_or_default();
    typed(
        catalog_path::get_prompt(registry, calls, &request.name, arguments, view, client)
            .await
            .map_err(rpc_error)?,
    )
}

pub(crate) async fn complete(
    registry: &Arc<Registry>,
    calls: &Calls,
    request: CompleteRequestParams,
    view: &View,
) -> Result<CompleteResult, McpError> {
    let reference = match request.r#ref {
        Reference::Prompt(prompt) => Completing::Prompt(prompt.name),
        Reference::Resource(template) => Completing::Template(template.uri),
        _ => {
            return Err(McpError::invalid_params(
                "completion needs a ref/prompt or a ref/resource",
                None,
            ));
        }
    };
    let context = request
        .context
        .and_then(|context| context.arguments)
        .map(|arguments| arguments.into_iter().collect())
        .unwrap_or_default();
    typed(
        catalog_path::complete(
            registry,
            calls,
            reference,
            request.argument.name,
            request.argument.value,
            context,
            view,
        )
        .await
        .map_err(rpc_error)?,
    )
}

/// `resources/subscribe`: a URI over `--max-uri-bytes` is refused
/// (-32602), one no plugin serves (-32002), and one past
/// [`MAX_SUBSCRIPTIONS`] for the session or `--max-subscriptions-per-person`
/// for `person` over all their sessions (-32602).
pub(crate) fn subscribe(
    registry: &Registry,
    session: &SessionCatalog,
    uri: String,
    person: Option<&str>,
    session_id: Option<&str>,
    view: &View,
) -> Result<(), McpError> {
    catalog_path::check_uri(&uri, session.limits.max_uri_bytes).map_err(rpc_error)?;
    if registry.snapshot().resource_seen(&uri, view).is_none() {
        return Err(rpc_error(Envelope::host_error(
            ErrorCode::ResourceNotFound,
            format!("no resource at {uri:?}"),
            Some(json!({ "uri": uri })),
        )));
    }
    let mut subscriptions = session.subscriptions();
    if subscriptions.uris.contains(&uri) {
        return Ok(());
    }
    if subscriptions.uris.len() >= MAX_SUBSCRIPTIONS {
        return Err(rpc_error(Envelope::host_error(
            ErrorCode::InvalidRequest,
            format!("a session may subscribe to {MAX_SUBSCRIPTIONS} resources at most"),
            Some(json!({ "maxSubscriptions": MAX_SUBSCRIPTIONS })),
        )));
    }
    if let Some(person) = person {
        let limits = &session.limits;
        let mut held = limits.held();
        let count = held.entry(person.to_string()).or_default();
        if *count >= limits.per_person {
            return Err(rpc_error(Envelope::host_error(
                ErrorCode::InvalidRequest,
                format!(
                    "{person:?} holds {count} resource subscriptions over their sessions, the \
                     most one person may (--max-subscriptions-per-person {}); unsubscribe first",
                    limits.per_person
                ),
                Some(json!({ "maxSubscriptionsPerPerson": limits.per_person })),
            )));
        }
        *count += 1;
        drop(held);
        subscriptions.person = Some(person.to_string());
        if let Some(id) = session_id
            && subscriptions.session.is_none()
        {
            subscriptions.session = Some(id.to_string());
            lock(&limits.holders)
                .entry(id.to_string())
                .or_default()
                .push(Arc::downgrade(&session.subscriptions));
        }
    }
    subscriptions.uris.insert(uri);
    Ok(())
}

pub(crate) fn unsubscribe(session: &SessionCatalog, uri: &str) {
    let mut subscriptions = session.subscriptions();
    if subscriptions.uris.remove(uri)
        && let Some(person) = &subscriptions.person
    {
        session.limits.release(person, 1);
    }
}

/// Tells the session what changed since `seen`: the lists it was offered,
/// and each subscribed URI whose plugin was replaced (or is gone).
/// What a session with a tool set last saw of the resource and prompt
/// lists: a digest of each as its view shows them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct CatalogSeen {
    resources: u64,
    prompts: u64,
}

impl CatalogSeen {
    /// Whether the prompt list, and the resource list, differ.
    pub(crate) fn differs(&self, other: &CatalogSeen) -> (bool, bool) {
        (
            self.prompts != other.prompts,
            self.resources != other.resources,
        )
    }

    pub(crate) fn of(registry: &Registry, view: &View) -> CatalogSeen {
        if view.is_all() {
            // Everything: the registry's own counters tell the changes.
            return CatalogSeen {
                resources: 0,
                prompts: 0,
            };
        }
        let digest = |value: Value| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            value.to_string().hash(&mut hasher);
            hasher.finish()
        };
        CatalogSeen {
            resources: digest(json!([
                catalog_path::list_resources(registry, view),
                catalog_path::list_templates(registry, view)
            ])),
            prompts: digest(catalog_path::list_prompts(registry, view)),
        }
    }
}

/// Tells the session of the lists that differ between what it saw
/// (`before`) and what its new view shows (`after`), of those it was
/// offered.
pub(crate) async fn announce_view(
    peer: &Peer<RoleServer>,
    session: &SessionCatalog,
    before: &CatalogSeen,
    after: &CatalogSeen,
) -> Result<(), rmcp::service::ServiceError> {
    let (resources, prompts) = *session.offered.lock().unwrap_or_else(|e| e.into_inner());
    if resources && before.resources != after.resources {
        peer.notify_resource_list_changed().await?;
    }
    if prompts && before.prompts != after.prompts {
        peer.notify_prompt_list_changed().await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn announce(
    peer: &Peer<RoleServer>,
    registry: &Registry,
    session: &SessionCatalog,
    seen: &mut CatalogChange,
    now: CatalogChange,
    view: &View,
    seen_in_view: &mut CatalogSeen,
) -> Result<(), rmcp::service::ServiceError> {
    let (resources, prompts) = *session.offered.lock().unwrap_or_else(|e| e.into_inner());
    let in_view = CatalogSeen::of(registry, view);
    let changed = |global: bool, mine: bool| if view.is_all() { global } else { mine };
    if resources
        && changed(
            now.resources != seen.resources,
            in_view.resources != seen_in_view.resources,
        )
    {
        peer.notify_resource_list_changed().await?;
    }
    if prompts
        && changed(
            now.prompts != seen.prompts,
            in_view.prompts != seen_in_view.prompts,
        )
    {
        peer.notify_prompt_list_changed().await?;
    }
    *seen_in_view = in_view;
    if now.updates != seen.updates {
        let snapshot = registry.snapshot();
        let subscribed: Vec<String> = session.subscriptions().uris.iter().cloned().collect();
        for uri in subscribed {
            let updated = match snapshot.resource(&uri) {
                // Another's plugin, out of view: nothing to tell.
                Some((plugin, _)) if !view.sees(&plugin.id) => false,
                Some((plugin, _)) => now.replaced.contains(&plugin.id),
                None => true,
            };
            if updated {
                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await?;
            }
        }
    }
    *seen = now;
    Ok(())
}

/// A failed request as a JSON-RPC error: the code `errors.rs` gives, the
/// error object (`code`, `message`, `details`) REST would answer in
/// `data`.
fn rpc_error(envelope: Envelope) -> McpError {
    let Some(error) = envelope.error else {
        return McpError::internal_error("no error in a failed answer", None);
    };
    let code = error
        .host_code
        .map_or(ErrorCode::InvalidArguments.jsonrpc_request_code(), |code| {
            code.jsonrpc_request_code()
        });
    let mut data = serde_json::to_value(&error).ok();
    // MCP's resource-not-found error names the URI in `data.uri` (SEP-2164).
    if let Some(data) = data.as_mut().and_then(Value::as_object_mut)
        && let Some(uri) = data
            .get("details")
            .and_then(|details| details.get("uri"))
            .cloned()
    {
        data.insert("uri".into(), uri);
    }
    McpError::new(RpcErrorCode(code), error.message.clone(), data)
}

/// Our JSON into rmcp's result type, marked complete (the 2026-07-28
/// revision asks for `resultType`; rmcp drops it for older peers).
fn typed<T: serde::de::DeserializeOwned>(mut value: Value) -> Result<T, McpError> {
    if let Some(object) = value.as_object_mut() {
        object.insert("resultType".into(), json!("complete"));
    }
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("answer shape: {e}"), None))
}
