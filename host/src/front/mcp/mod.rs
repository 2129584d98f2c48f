//! The MCP front, over rmcp (the official Rust SDK): `tools/list` and
//! `tools/call` from the shared registry, through the same call path and
//! normalizer as REST; `logging/setLevel`; `notifications/tools/list_changed`
//! whenever the tool list changes; and the link that lets a running plugin
//! log, report progress, and ask the client for sampling and elicitation.
//!
//! rmcp owns the protocol (JSON-RPC framing, version negotiation, sessions,
//! the stdio and Streamable HTTP transports). This file only maps between
//! rmcp's model and ours, mostly through serde, so the wire shape stays the
//! one the normalizer built.

// rmcp marks logging and sampling deprecated because the stateless 2026-07-28
// revision drops them (SEP-2577); the 2025 revisions toolhost serves first
// still have them, and MCP clients use them.
#![allow(deprecated)]

mod answer_stream;
mod call_answer;
mod catalog_methods;
mod changes;
mod fast;
mod input_keys;
mod input_round;
pub(crate) mod jsonrpc;
mod legacy_tasks;
mod session_client;
mod sessions;
pub(crate) mod stdio;
pub(crate) mod streamable;
mod tasks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse, ResultType,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::json;
use tokio_util::sync::{CancellationToken, DropGuard};

use tracing::Instrument;

pub(crate) use self::catalog_methods::CatalogLimits;
pub(crate) use self::input_keys::InputKeys;
pub(crate) use self::input_round::{InputRound, Relay, bind, overrides};
use self::session_client::SessionClient;
pub(crate) use self::tasks::{Caller, RunPath, answer_fits, run_deadline, start_run};

use crate::call::Calls;
use crate::call::envelope::{Envelope, TextFormat};
use crate::call::invoke;
use crate::edge::auth::Authority;
use crate::front::lists::ToolLists;
use crate::ops::trace::{self, TraceParent};
use crate::registry::Registry;
use crate::registry::view::View;
use crate::runtime::CallClient;

/// One MCP session's handler. Streamable HTTP makes one per session and
/// stdio one per process, so per-session state (the log level) lives here.
#[derive(Clone)]
pub(crate) struct McpFront {
    registry: Arc<Registry>,
    /// The call path's books (the ledger, the call slots).
    calls: Arc<Calls>,
    text_format: TextFormat,
    /// The tool list, made once per registry change for every session.
    lists: Arc<ToolLists>,
    log_level: Arc<Mutex<LoggingLevel>>,
    /// Set once the client sends `logging/setLevel`: only then is it told
    /// about rejected plugin files.
    logging_enabled: Arc<AtomicBool>,
    /// What this session was offered of resources and prompts, and the
    /// URIs it subscribed to.
    catalog: Arc<catalog_methods::SessionCatalog>,
    /// Cancelled when the last clone of this handler is dropped, that is,
    /// when the session ends (closed, deleted or expired): the session's
    /// notification task ends with it instead of waiting for the next
    /// change and keeping the session's memory until then.
    session_ended: CancellationToken,
    _end_session: Arc<DropGuard>,
    /// Who may use the server, to ask what a session's owner sees now
    /// when the tokens file changes; `None` over stdio (everything).
    authority: Option<Arc<Authority>>,
    /// What `requestState` is sealed with (`input_round.rs`).
    input_keys: Arc<InputKeys>,
    /// The server's tasks; `None` where there are none (stdio).
    tasks: Option<Arc<crate::tasks::Tasks>>,
}

/// What the 2026-07-28 revision's longer calls need: the keys
/// `requestState` is sealed with, and the tasks.
#[derive(Clone)]
pub(crate) struct Rounds {
    pub(crate) input_keys: Arc<InputKeys>,
    pub(crate) tasks: Option<Arc<crate::tasks::Tasks>>,
}

impl McpFront {
    pub(crate) fn new(
        registry: Arc<Registry>,
        calls: Arc<Calls>,
        text_format: TextFormat,
        lists: Arc<ToolLists>,
        limits: Arc<catalog_methods::CatalogLimits>,
        authority: Option<Arc<Authority>>,
        rounds: Rounds,
    ) -> Self {
        let session_ended = CancellationToken::new();
        McpFront {
            authority,
            input_keys: rounds.input_keys,
            tasks: rounds.tasks,
            registry,
            calls,
            text_format,
            lists,
            log_level: Arc::new(Mutex::new(LoggingLevel::Info)),
            logging_enabled: Arc::new(AtomicBool::new(false)),
            catalog: Arc::new(catalog_methods::SessionCatalog::new(limits)),
            _end_session: Arc::new(session_ended.clone().drop_guard()),
            session_ended,
        }
    }

    /// Who sent the request, for the tasks room.
    fn caller(&self, context: &RequestContext<RoleServer>) -> tasks::Caller {
        let owner = requester(context).map(|identity| identity.name.clone());
        tasks::Caller::new(&self.registry, owner, view_in(context))
    }

    /// What a task's run needs of this front (`tasks.rs`).
    fn run_path(&self) -> tasks::RunPath {
        tasks::RunPath {
            registry: self.registry.clone(),
            calls: self.calls.clone(),
            text_format: self.text_format,
            keys: self.input_keys.clone(),
            front: crate::call::invoke::Front::Mcp,
        }
    }

    /// What `changes.rs` reads a session's changes from.
    fn watch(&self) -> changes::Watch {
        changes::Watch {
            registry: self.registry.clone(),
            lists: self.lists.clone(),
            authority: self.authority.clone(),
            catalog: self.catalog.clone(),
            session_ended: self.session_ended.clone(),
            logging_enabled: self.logging_enabled.clone(),
            log_level: self.log_level.clone(),
        }
    }

    /// Tells this session's client of the changes it sees, until the
    /// session ends (`changes.rs`).
    fn forward_changes(&self, peer: Peer<RoleServer>, viewer: crate::edge::guard::Requester) {
        changes::forward(self.watch(), peer, viewer);
    }
}

impl McpFront {
    /// What the server offers a caller who sees `view`; with `session`,
    /// remembered as what that session was offered (`initialize`).
    fn info(&self, view: &View, session: Option<&catalog_methods::SessionCatalog>) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if self.tasks.is_some() {
            capabilities.extensions = ServerCapabilities::builder()
                .enable_tasks()
                .build()
                .extensions;
        }
        catalog_methods::offer(&self.registry, session, &mut capabilities, view);
        // Skills (SEP-2640), for a caller who sees one: declaring the
        // extension commits the server to `skills/list` and `skills/get`,
        // and `directoryRead` to `resources/directory/read`.
        if self.registry.skills().any_seen(view) {
            let mut settings = rmcp::model::JsonObject::new();
            settings.insert("directoryRead".into(), serde_json::Value::Bool(true));
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(crate::registry::skills::EXTENSION.to_string(), settings);
        }
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools served from WebAssembly plugins; the list changes as plugins are \
                 dropped into or removed from the plugin folder.",
            )
    }
}

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        self.info(&View::all(), None)
    }

    /// `initialize`, with the resources, prompts and completion offered
    /// as the caller's view has them (a set without resources is offered
    /// none, so no hidden plugin is told of).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        let view = view_in(&context);
        result.capabilities = self.info(&view, Some(&self.catalog)).capabilities;
        // Views (MCP Apps), for a client that says it shows them.
        let ui = crate::registry::app_views::EXTENSION;
        if request
            .capabilities
            .extensions
            .as_ref()
            .is_some_and(|extensions| extensions.contains_key(ui))
        {
            result
                .capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(ui.to_string(), Default::default());
        }
        Ok(result)
    }

    /// One page of the tools ([`TOOLS_PAGE`](crate::front::lists::TOOLS_PAGE)
    /// at most), with `nextCursor` while more follow; a cursor this server
    /// never gave is refused as invalid params.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let cursor = request.as_ref().and_then(|params| params.cursor.as_deref());
        list_tools_page(&self.lists, &self.registry, cursor, &view_in(&context))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let headers = context
            .extensions
            .get::<axum::http::request::Parts>()
            .map(|parts| &parts.headers);
        // rmcp moves `params._meta` into the request context.
        let meta = &context.meta;
        let view = view_in(&context);
        let path = CallPath {
            registry: &self.registry,
            calls: &self.calls,
            text_format: self.text_format,
        };
        let trace_parent = || TraceParent {
            traceparent: meta.get_traceparent().map(str::to_string),
            tracestate: meta.get_tracestate().map(str::to_string),
        };
        if let Some(capabilities) = stateless_capabilities(meta) {
            // 2026-07-28: the plugin's requests become an input-required
            // result (`input_round.rs`).
            let relay = input_round::Relay {
                log_level: meta.log_level(),
                to: Arc::new(SessionClient {
                    peer: context.peer.clone(),
                    progress_token: meta.get_progress_token(),
                    // The round filters by the request's level.
                    log_level: Arc::new(Mutex::new(LoggingLevel::Debug)),
                }),
            };
            let bound = bound_to(
                "tools/call",
                &request.name,
                request.arguments.as_ref(),
                &context,
            );
            let round = Arc::new(InputRound::open(
                &self.input_keys,
                &bound,
                Some(capabilities.clone()),
                request.request_state.take().as_deref(),
                request.input_responses.take().as_ref(),
                relay,
            )?);
            let caller = self.caller(&context);
            if let Some(task) = tasks::maybe_task(
                self.run_path(),
                self.tasks.as_ref(),
                &request,
                &capabilities,
                &round,
                &bound,
                &caller,
            )
            .await
            {
                return task;
            }
            let client: CallClient = Some(round.clone());
            let envelope = answer_call(path, request, trace_parent, client, headers, &view).await;
            return match input_round::overrides(&round, &self.input_keys, &bound, envelope.is_error)
            {
                Some(answer) => answer.map(CallToolResponse::InputRequired),
                None => call_answer::call_tool_result(envelope).map(Into::into),
            };
        }
        let client = Arc::new(SessionClient {
            peer: context.peer.clone(),
            progress_token: context.meta.get_progress_token(),
            log_level: self.log_level.clone(),
        });
        let envelope = answer_call(path, request, trace_parent, Some(client), headers, &view).await;
        call_answer::call_tool_result(envelope).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut result = catalog_methods::list_resources(&self.registry, &view_in(&context))?;
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut result = catalog_methods::list_templates(&self.registry, &view_in(&context))?;
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let cursor = request.as_ref().and_then(|params| params.cursor.as_deref());
        let mut result = catalog_methods::list_skills(&self.registry, cursor, &view_in(&context))?;
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let mut result = catalog_methods::get_skill(
            &self.registry,
            &self.catalog,
            &request.uri,
            &view_in(&context),
        )?;
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let mut result = catalog_methods::read_skill_directory(
            &self.registry,
            &self.catalog,
            &request,
            &view_in(&context),
        )?;
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let view = view_in(&context);
        catalog_methods::read_resource(&self.registry, &self.calls, &self.catalog, request, &view)
            .await
            .map(ReadResourceResponse::Complete)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let person = requester(&context).map(|identity| identity.name.clone());
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(sessions::SESSION_HEADER))
            .and_then(|id| id.to_str().ok());
        catalog_methods::subscribe(
            &self.registry,
            &self.catalog,
            request.uri,
            person.as_deref(),
            session,
            &view_in(&context),
        )
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        catalog_methods::unsubscribe(&self.catalog, &request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut result = catalog_methods::list_prompts(&self.registry, &view_in(&context))?;
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let view = view_in(&context);
        let Some(capabilities) = stateless_capabilities(&context.meta) else {
            let client: CallClient = Some(Arc::new(SessionClient {
                peer: context.peer.clone(),
                progress_token: context.meta.get_progress_token(),
                log_level: self.log_level.clone(),
            }));
            return catalog_methods::get_prompt(
                &self.registry,
                &self.calls,
                request,
                &view,
                client,
            )
            .await
            .map(GetPromptResponse::Complete);
        };
        // 2026-07-28: a prompt asks for input as a tool does.
        let bound = bound_to(
            "prompts/get",
            &request.name,
            request.arguments.as_ref(),
            &context,
        );
        let round = Arc::new(InputRound::open(
            &self.input_keys,
            &bound,
            Some(capabilities),
            request.request_state.take().as_deref(),
            request.input_responses.take().as_ref(),
            input_round::Relay::silent(),
        )?);
        let client: CallClient = Some(round.clone());
        let answer =
            catalog_methods::get_prompt(&self.registry, &self.calls, request, &view, client).await;
        match input_round::overrides(&round, &self.input_keys, &bound, answer.is_err()) {
            Some(input) => input.map(GetPromptResponse::InputRequired),
            None => answer.map(GetPromptResponse::Complete),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let view = view_in(&context);
        catalog_methods::complete(&self.registry, &self.calls, request, &view).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = request.level;
        self.logging_enabled.store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Who opened the session: what they may read of rejections.
        let viewer = crate::edge::guard::Requester(
            context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<crate::edge::guard::Requester>())
                .and_then(|requester| requester.0.clone()),
        );
        self.forward_changes(context.peer, viewer);
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        tasks::get(tasks, request, &self.caller(&context).asker()).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        let caller = self.caller(&context);
        tasks::update(
            self.run_path(),
            tasks,
            request,
            &caller.asker(),
            caller.view.clone(),
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        tasks::cancel(tasks, request, &self.caller(&context).asker()).await
    }

    /// A tool's definition, for rmcp's check of SEP-2243's `Mcp-Param-*`
    /// headers against the arguments of a call to a tool whose schema
    /// marks them (`x-mcp-header`).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let snapshot = self.registry.snapshot();
        let entry = snapshot.tool(name)?;
        serde_json::from_value(serde_json::Value::Object(entry.tool.listing())).ok()
    }

    /// The stateless 2026-07-28 revision has no sessions to push to: clients
    /// ask for list changes with `subscriptions/listen`.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::builder();
        if requested.tools_list_changed == Some(true) {
            accepted = accepted.tools_list_changed();
        }
        if requested.prompts_list_changed == Some(true) {
            accepted = accepted.prompts_list_changed();
        }
        if requested.resources_list_changed == Some(true) {
            accepted = accepted.resources_list_changed();
        }
        Some(accepted.build())
    }

    /// Tells the listener when the lists it sees change (`changes.rs`).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let identity = requester(context.request_context()).cloned();
        changes::listen(self.watch(), identity, context).await
    }
}

/// One page of the tools ([`TOOLS_PAGE`](crate::front::lists::TOOLS_PAGE)
/// at most) that `view` sees, with `nextCursor` while more follow; a
/// cursor this server never gave is refused as invalid params. For a
/// session and for the stateless fast path (`fast/`) alike.
fn list_tools_page(
    lists: &ToolLists,
    registry: &Registry,
    cursor: Option<&str>,
    view: &View,
) -> Result<ListToolsResult, McpError> {
    let Some((tools, next_cursor)) = lists.mcp_page(&registry.snapshot(), cursor, view) else {
        return Err(McpError::invalid_params(
            "the cursor is not one this server gave; list from the start without one",
            Some(json!({ "cursor": cursor })),
        ));
    };
    Ok(ListToolsResult {
        tools,
        next_cursor,
        result_type: Some(ResultType::COMPLETE),
        cache_scope: Some(CacheScope::Private),
        ..Default::default()
    })
}

/// What a `tools/call` goes through: the registry, the call path's books
/// and the text format.
struct CallPath<'a> {
    registry: &'a Arc<Registry>,
    calls: &'a Arc<Calls>,
    text_format: TextFormat,
}

/// `tools/call` through the call path, in the caller's trace
/// (`from_meta`'s, read from the request's `_meta` by MCP's convention,
/// only when a span is exported; else the HTTP request's headers): for a
/// session and for the stateless fast path (`fast/`) alike. The
/// envelope becomes MCP's answer in `call_answer.rs`.
async fn answer_call(
    CallPath {
        registry,
        calls,
        text_format,
    }: CallPath<'_>,
    request: CallToolRequestParams,
    from_meta: impl FnOnce() -> TraceParent,
    client: CallClient,
    headers: Option<&axum::http::HeaderMap>,
    view: &View,
) -> Envelope {
    let arguments = request.arguments.unwrap_or_default();
    let session = headers
        .and_then(|headers| headers.get("mcp-session-id"))
        .and_then(|value| value.to_str().ok());
    let span = trace::request_span(
        || format!("tools/call {}", request.name),
        &request.name,
        session,
        || {
            let from_meta = from_meta();
            match headers {
                Some(headers) => from_meta.or(TraceParent::from_headers(headers)),
                None => from_meta,
            }
        },
    );
    let envelope = invoke::call_tool(
        registry,
        calls,
        &request.name,
        arguments,
        text_format,
        client,
        invoke::Front::Mcp,
        view,
    )
    .instrument(span.clone())
    .await;
    trace::record_outcome(&span, &envelope);
    envelope
}

fn no_tasks() -> McpError {
    McpError::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        "this server keeps no tasks here (MCP over stdio)",
        None,
    )
}

/// The client's capabilities, when the request is of the stateless
/// 2026-07-28 revision (or later), which carries them in `_meta`.
fn stateless_capabilities(
    meta: &rmcp::model::RequestMetaObject,
) -> Option<rmcp::model::ClientCapabilities> {
    let version = meta.protocol_version()?;
    (version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
        .then(|| meta.client_capabilities().unwrap_or_default())
}

/// What a `requestState` of this request is bound to.
fn bound_to(
    method: &str,
    name: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    context: &RequestContext<RoleServer>,
) -> String {
    input_round::bind(
        method,
        name,
        requester(context).map(|identity| identity.name.as_str()),
        arguments,
    )
}

/// What the sender of the request sees: their tool set as the guard found
/// it for this very request (so an edited tokens file counts at once);
/// everything on an open server and over stdio.
fn view_in(context: &RequestContext<RoleServer>) -> View {
    requester(context).map_or_else(View::all, |identity| identity.tools.clone())
}

/// Who sent the request (the guard's finding, carried in the HTTP request
/// rmcp keeps): `None` on an open server and over stdio.
fn requester(context: &RequestContext<RoleServer>) -> Option<&crate::edge::auth::Identity> {
    context
        .extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<crate::edge::guard::Requester>()?
        .0
        .as_ref()
}
