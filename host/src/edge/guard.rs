//! Guards every HTTP route, REST and MCP alike, before any handler runs:
//!
//! - DNS-rebinding protection: the request's host (the `Host` header, or
//!   the target's own host when the request line has an absolute URI), and
//!   the `Origin` header when a browser sends one, must name an allowed
//!   host. By default that is the loopback names (`localhost`,
//!   `127.0.0.1`, `::1`) plus the address toolhost listens on, so a web page
//!   on another site cannot reach a local toolhost through a rebound DNS
//!   name. Refused with 403; a request with two `Host` headers with 400.
//! - Who is asking (`auth/`, the one place a token is checked): with
//!   `--token` or `--tokens`, every route of a router guarded with a role
//!   needs `Authorization: Bearer <token>` of a person holding at least
//!   that role (`/health` is on a router guarded without). No or an
//!   unknown token is refused with 401, a known one without the role with
//!   403, each with its `WWW-Authenticate` challenge (with OAuth, naming
//!   the resource metadata and the scope needed). The person is handed to
//!   the handlers as a [`Requester`].
//!
//! - Other sites' pages: a browser request from another site's page
//!   (`Sec-Fetch-Site: cross-site` or `same-site`, which includes another
//!   port of the same host) is refused with 403 unless its `Origin` is one
//!   `--cors-origin` names: an `<img>`, a link or a form on any page can
//!   then run no tool. Only the page itself (`/`) may be navigated to from
//!   elsewhere.
//! - On a server without tokens (one person on loopback), a body a browser
//!   may send from any page without asking first (`text/plain`, a form, or
//!   no `Content-Type`) is refused with 415: every route takes JSON or a
//!   component, and a token-less server is not for other origins.
//!
//! The guard is a layer on each router, not a match on paths: the REST
//! router's guard refuses with the usual JSON envelope, the MCP router's
//! with a JSON-RPC error object ([`Refusals`]). After the checks, an
//! absolute-form target's host replaces the Host header, so that every
//! handler (rmcp checks Host again) sees the host that was checked.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::edge::auth::{Authority, Identity, Refusal, Role};
use crate::edge::cors::CorsOrigins;
use crate::edge::holds::{Refused, Ticket};
use crate::registry::report::{PluginReport, PluginsReport};
use crate::registry::view::View;

#[derive(Clone)]
pub(crate) struct GuardSettings {
    /// Host names (no port) that `Host` and `Origin` may name.
    pub(crate) allowed_hosts: Vec<String>,
    /// Other sites' origins allowed to call from a browser (`cors.rs`).
    pub(crate) cors_origins: Arc<CorsOrigins>,
    /// Everyone who may use the server (open when nobody is named and no
    /// issuer is).
    pub(crate) authority: Arc<Authority>,
    /// The role the guarded routes need; `None` for routes open to anyone
    /// who passes the Host checks (`/health`).
    pub(crate) needs: Option<Role>,
    /// The role requests that change something (any method but GET, HEAD
    /// and OPTIONS) need instead, when it is more (publishing).
    pub(crate) writes_need: Option<Role>,
    /// How the guarded router's clients are told no.
    pub(crate) refusals: Refusals,
    /// Whether `Host` and `Origin` are checked (all routes but the probes).
    pub(crate) check_host: bool,
    /// Whether a top-level navigation from another site may reach these
    /// routes (the page at `/`); no other request from another site's page
    /// may, unless `--cors-origin` names it.
    pub(crate) navigable: bool,
}

/// The shape of a refusal, as the guarded router's clients read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusals {
    /// REST: the JSON envelope with its error code.
    Envelope,
    /// MCP: a JSON-RPC error object (-32600) with the same HTTP status.
    JsonRpc,
}

impl GuardSettings {
    /// The same checks without a token: for routes every client may reach
    /// (`/health`).
    pub(crate) fn without_token(&self) -> GuardSettings {
        GuardSettings {
            needs: None,
            writes_need: None,
            ..self.clone()
        }
    }

    /// For the page: no token, and a link from another site may open it.
    pub(crate) fn for_the_page(&self) -> GuardSettings {
        GuardSettings {
            navigable: true,
            ..self.without_token()
        }
    }

    /// For the probes (`/health`, `/ready`): no token and no Host check. A
    /// balancer's health check may send no Host header, and Kubernetes
    /// sends the pod's address; they reveal counts, nothing a rebound DNS
    /// name could use.
    pub(crate) fn for_probes(&self) -> GuardSettings {
        GuardSettings {
            needs: None,
            writes_need: None,
            check_host: false,
            ..self.clone()
        }
    }

    /// The same checks, refusing in the other shape.
    pub(crate) fn refusing_as(&self, refusals: Refusals) -> GuardSettings {
        GuardSettings {
            refusals,
            ..self.clone()
        }
    }
}

/// The loopback names always allowed.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Who made a request, as the guard found them: `None` on an open server
/// (no tokens configured), where everyone may do everything.
#[derive(Debug, Clone)]
pub(crate) struct Requester(pub(crate) Option<Identity>);

/// What a handler's requester sees (everything when the guard set none:
/// an open server, or a front without it).
pub(crate) fn view_of(requester: Option<&axum::Extension<Requester>>) -> View {
    requester.map_or_else(View::all, |axum::Extension(requester)| requester.view())
}

impl Requester {
    /// Whether the requester may publish into `namespace` (`None`: the top
    /// level): an admin anywhere, a publisher into their own namespace,
    /// anyone on an open server.
    pub(crate) fn may_publish(&self, namespace: Option<&str>) -> bool {
        match &self.0 {
            None => true,
            Some(identity) => {
                identity.role == Role::Admin
                    || (identity.role == Role::Publisher
                        && namespace.is_some()
                        && namespace == identity.namespace.as_deref())
            }
        }
    }

    /// Whether the requester may read why plugin `id` was refused or did
    /// not build: an admin, anyone on an open server, and anyone for the
    /// plugins of their own namespace.
    pub(crate) fn sees_reasons_of(&self, id: &str) -> bool {
        match &self.0 {
            None => true,
            Some(identity) => {
                identity.role == Role::Admin
                    || identity.namespace.as_deref().is_some_and(|namespace| {
                        crate::registry::layout::namespace_of(id) == Some(namespace)
                    })
            }
        }
    }

    /// What the requester sees of the tools, resources and prompts: their
    /// tool set, everything on an open server.
    pub(crate) fn view(&self) -> View {
        self.0
            .as_ref()
            .map_or_else(View::all, |identity| identity.tools.clone())
    }

    /// Whether the requester is limited to a tool set (an admin never is
    /// for what they administer).
    pub(crate) fn has_a_set(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|identity| identity.role != Role::Admin && !identity.tools.is_all())
    }

    /// Whether the requester sees plugin `id` in `/plugins` and its feed:
    /// an admin (and anyone on an open server) every one; anyone else
    /// those of their view and of their own namespace.
    pub(crate) fn sees_plugin_id(&self, id: &str) -> bool {
        match &self.0 {
            None => true,
            Some(identity) => {
                identity.role == Role::Admin
                    || identity.tools.sees(id)
                    || identity.namespace.as_deref().is_some_and(|namespace| {
                        crate::registry::layout::namespace_of(id) == Some(namespace)
                    })
            }
        }
    }

    /// The plugins report as the requester may see it: whole for an admin
    /// (and on an open server); for anyone else the plugins they see (see
    /// [`Self::sees_plugin_id`]), without server paths, and with refusals'
    /// reasons for their own namespace only.
    pub(crate) fn sees(&self, mut report: PluginsReport) -> PluginsReport {
        match &self.0 {
            Some(identity) if identity.role != Role::Admin => {
                report
                    .plugins
                    .retain(|plugin| self.sees_plugin_id(&plugin.id));
                report.for_person(identity.namespace.as_deref())
            }
            _ => report,
        }
    }

    /// Whether the requester does not see this plugin at all: out of
    /// their view, or new and held for approval, not theirs.
    pub(crate) fn hides(&self, report: &PluginReport) -> bool {
        match &self.0 {
            Some(identity) if identity.role != Role::Admin => {
                !self.sees_plugin_id(&report.id)
                    || report.hidden_from(identity.namespace.as_deref())
            }
            _ => false,
        }
    }

    /// A publish's record (the room's view) as the requester may see it:
    /// none of a plugin they do not see (`known` says which are held for
    /// approval), and the reason and line only of their own.
    pub(crate) fn sees_noted(
        &self,
        mut noted: crate::publishing::publish::Noted,
        known: &PluginsReport,
    ) -> Option<crate::publishing::publish::Noted> {
        let shown = (noted.outcome != crate::publishing::publish::PublishOutcome::Pending
            || self.sees_reasons_of(&noted.plugin))
            && self.sees_plugin_id(&noted.plugin)
            && known
                .plugin(&noted.plugin)
                .is_none_or(|report| !self.hides(report));
        if !shown {
            return None;
        }
        if !self.sees_reasons_of(&noted.plugin) {
            noted.reason = None;
            noted.line = None;
        }
        Some(noted)
    }

    /// Whether the requester hears of a build of plugin `id` (its stages
    /// and its place in line): a plugin they see, and, where approvals
    /// hold new versions (`known` is then the plugins report), one that
    /// already serves unless it is theirs: a new plugin held for an admin
    /// is absent for everyone else, being built or not.
    pub(crate) fn sees_build_of(&self, id: &str, known: Option<&PluginsReport>) -> bool {
        if !self.sees_plugin_id(id) {
            return false;
        }
        let Some(known) = known else {
            return true;
        };
        self.sees_reasons_of(id)
            || known.plugin(id).is_some_and(|report| {
                !self.hides(report)
                    && (report.serving.is_some()
                        || report.state == crate::registry::report::PluginState::Loaded)
            })
    }

    /// One plugin's report as the requester may see it (see [`Self::sees`]).
    pub(crate) fn sees_plugin(&self, report: PluginReport) -> PluginReport {
        match &self.0 {
            Some(identity) if identity.role != Role::Admin => {
                report.for_person(identity.namespace.as_deref())
            }
            _ => report,
        }
    }
}

/// The guard as a layer: [`admit`], then the route.
pub(crate) async fn check(
    State(settings): State<Arc<GuardSettings>>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&settings, &mut request).await {
        Ok(()) => next.run(request).await,
        Err(refused) => refused,
    }
}

/// Every check above on `request`: the refusal, or `Ok` with the
/// requester handed on in its extensions and the checked host in `Host`.
/// The listener's shortcut for tool calls (`front/rest.rs`) asks it
/// directly, as the layer does.
pub(crate) async fn admit(settings: &GuardSettings, request: &mut Request) -> Result<(), Response> {
    let mcp = settings.refusals == Refusals::JsonRpc;
    let headers = request.headers();
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Err(refuse(
            mcp,
            ErrorCode::InvalidRequest,
            "the request has more than one Host header".into(),
        ));
    }
    // An absolute-form target (`GET http://host/path`) names the host
    // itself, and then the Host header is to be ignored (RFC 9112 3.2.2).
    let target_host = request
        .uri()
        .authority()
        .map(|authority| authority.as_str().to_string());
    if settings.check_host
        && let Err(message) = check_host_and_origin(
            target_host.as_deref(),
            headers,
            &settings.allowed_hosts,
            &settings.cors_origins,
        )
    {
        return Err(refuse(mcp, ErrorCode::Forbidden, message.to_string()));
    }
    if settings.check_host
        && let Err(message) = check_site(headers, &settings.cors_origins, settings.navigable)
    {
        return Err(refuse(mcp, ErrorCode::Forbidden, message.to_string()));
    }
    let writes = !matches!(
        *request.method(),
        axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
    );
    if writes
        && settings.authority.is_open()
        && let Some(kind) = simple_body(headers)
    {
        return Err(refuse(
            mcp,
            ErrorCode::UnsupportedMediaType,
            format!(
                "a server without tokens takes no {kind} body, which any web page could send: \
                 send Content-Type: application/json (curl --json '{{...}}', or -H \
                 'Content-Type: application/json')"
            ),
        ));
    }
    let needs = match settings.writes_need {
        Some(role) if writes => Some(role),
        _ => settings.needs,
    };
    if let Some(needs) = needs {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        match settings.authority.check(authorization, needs).await {
            Ok(identity) => {
                request.extensions_mut().insert(Requester(identity));
            }
            Err(refusal) => {
                let host = target_host
                    .as_deref()
                    .or_else(|| headers.get(header::HOST).and_then(|v| v.to_str().ok()))
                    .unwrap_or("localhost");
                let challenge = settings.authority.challenge(&refusal, host);
                let (code, message) = match refusal {
                    Refusal::Unauthenticated => (
                        ErrorCode::Unauthorized,
                        "this server needs Authorization: Bearer <token> with a token it knows"
                            .to_string(),
                    ),
                    Refusal::InvalidToken(why) => (
                        ErrorCode::Unauthorized,
                        format!("the access token is refused: {why}"),
                    ),
                    // The OAuth scope is named only where OAuth is on: on
                    // a tokens-file server it means nothing to the reader.
                    Refusal::NotAllowed { name, needs } if settings.authority.oauth.is_some() => (
                        ErrorCode::Forbidden,
                        format!(
                            "{name:?} may not do this: it needs the {} role (OAuth scope {})",
                            needs.as_str(),
                            crate::edge::auth::scope_of(needs)
                        ),
                    ),
                    Refusal::NotAllowed { name, needs } => (
                        ErrorCode::Forbidden,
                        format!(
                            "{name:?} may not do this: it needs the {} role",
                            needs.as_str()
                        ),
                    ),
                };
                let mut response = refuse(mcp, code, message);
                if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                return Err(response);
            }
        }
    }
    // What was checked is what the handlers see: rmcp checks Host again.
    if let Some(host) = target_host.and_then(|host| HeaderValue::from_str(&host).ok()) {
        request.headers_mut().insert(header::HOST, host);
    }
    // Counted for its person until answered (`holds.rs`), or refused
    // before a byte of its body is read.
    if let Some(ticket) = request.extensions().get::<Ticket>() {
        let identity = request
            .extensions()
            .get::<Requester>()
            .and_then(|requester| requester.0.as_ref());
        if let Err(refused) = ticket.claim(identity, !settings.check_host) {
            return Err(busy(mcp, &refused));
        }
    }
    Ok(())
}

/// A refusal of `holds.rs`'s: 503 `BUSY` naming the limit, with
/// `Retry-After`.
pub(crate) fn busy(mcp: bool, refused: &Refused) -> Response {
    let mut response = if mcp {
        let body = crate::edge::responses::json_rpc_error(
            serde_json::Value::Null,
            crate::edge::responses::JSON_RPC_SERVER_BUSY,
            &refused.to_string(),
        );
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    } else {
        Envelope::host_error(
            ErrorCode::Busy,
            refused.to_string(),
            Some(serde_json::json!({ "limit": refused.limit(), "retryAfterMs": 1000 })),
        )
        .into_response()
    };
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A refusal: the JSON envelope, or on `/mcp` a JSON-RPC error object
/// (-32600) with the same status, so that MCP clients read it as one.
fn refuse(mcp: bool, code: ErrorCode, message: String) -> Response {
    if mcp {
        let status = StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let body = crate::edge::responses::json_rpc_error(
            serde_json::Value::Null,
            crate::edge::responses::JSON_RPC_INVALID_REQUEST,
            &message,
        );
        return (status, axum::Json(body)).into_response();
    }
    Envelope::host_error(code, message, None).into_response()
}

/// Why a request is refused for where it is addressed or comes from
/// (403, with this sentence).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotHere {
    #[error("the request has no Host header")]
    NoHost,
    /// Its host is not one this server answers to.
    #[error(
        "Host {host:?} is not allowed: this server answers to its loopback names and the \
         address it listens on; start it with --allowed-host {name} to admit this name"
    )]
    Host { host: String, name: String },
    /// A page from another host, not named with `--cors-origin`.
    #[error(
        "Origin {0:?} is not allowed: a page from another host may call this server only if \
         it is started with --cors-origin {0} (or, for another name of this server, \
         --allowed-host)"
    )]
    Origin(String),
    /// A browser request from another site's page (`Sec-Fetch-Site`).
    #[error(
        "a request from another site's page ({0}) is not served here; a browser client on \
         another origin needs that origin named with --cors-origin"
    )]
    OtherSite(String),
}

/// Refuses a request a browser sent from another site's page (another
/// host, or another port of this one: `Sec-Fetch-Site` says which) unless
/// its `Origin` is one `--cors-origin` names, or it is a top-level
/// navigation to a `navigable` route. Clients that are not browsers send
/// no `Sec-Fetch-Site` and pass.
fn check_site(headers: &HeaderMap, cors: &CorsOrigins, navigable: bool) -> Result<(), NotHere> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(site) = value("sec-fetch-site") else {
        return Ok(());
    };
    if !matches!(site, "cross-site" | "same-site") {
        return Ok(());
    }
    if value("origin").is_some_and(|origin| cors.allows(origin)) {
        return Ok(());
    }
    if navigable && value("sec-fetch-mode") == Some("navigate") {
        return Ok(());
    }
    Err(NotHere::OtherSite(site.to_string()))
}

/// The kind of a body any web page may send without a preflight (a CORS
/// "simple" request): `text/plain`, a form, or one with no `Content-Type`.
/// `None` for anything else, or no body.
fn simple_body(headers: &HeaderMap) -> Option<&'static str> {
    let Some(kind) = headers.get(header::CONTENT_TYPE) else {
        let has_body = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|length| length.trim() != "0")
            || headers.contains_key(header::TRANSFER_ENCODING);
        return has_body.then_some("untyped");
    };
    let essence = kind
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/plain" => Some("text/plain"),
        "application/x-www-form-urlencoded" | "multipart/form-data" => Some("form"),
        _ => None,
    }
}

/// `target_host` is the authority of an absolute-form request target; when
/// present it is the request's host, whatever the Host header says.
fn check_host_and_origin(
    target_host: Option<&str>,
    headers: &HeaderMap,
    allowed: &[String],
    cors: &CorsOrigins,
) -> Result<(), NotHere> {
    let host = match target_host {
        Some(host) => host,
        None => headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .ok_or(NotHere::NoHost)?,
    };
    if !is_allowed(host_name(host), allowed) {
        let refused = NotHere::Host {
            host: host.to_string(),
            name: host_name(host).to_string(),
        };
        log_refusal(&refused);
        return Err(refused);
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest.split('/').next().unwrap_or(""));
        match authority {
            _ if cors.allows(origin) => {}
            Some(authority) if is_allowed(host_name(authority), allowed) => {}
            _ => {
                let refused = NotHere::Origin(origin.to_string());
                log_refusal(&refused);
                return Err(refused);
            }
        }
    }
    Ok(())
}

/// Logs a Host or Origin refusal, at most one a second (a flood of probes
/// does not flood the log).
fn log_refusal(message: &NotHere) {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    if LAST.swap(now, std::sync::atomic::Ordering::Relaxed) != now {
        tracing::warn!("refused a request: {message}");
    }
}

/// The host part of `host[:port]` or `[v6]:port`.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    authority.split(':').next().unwrap_or("")
}

fn is_allowed(host: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|name| name.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (name.clone(), HeaderValue::from_str(value).unwrap()))
            .collect()
    }

    fn allowed() -> Vec<String> {
        LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn loopback_hosts_pass_and_others_do_not() {
        for host in ["localhost:8000", "127.0.0.1", "[::1]:9", "LOCALHOST"] {
            assert!(
                check_host_and_origin(
                    None,
                    &headers(&[(header::HOST, host)]),
                    &allowed(),
                    &CorsOrigins::default()
                )
                .is_ok(),
                "{host}"
            );
        }
        for host in [
            "evil.com",
            "evil.com:8000",
            "127.0.0.1.evil.com",
            "[::2]:80",
        ] {
            assert!(
                check_host_and_origin(
                    None,
                    &headers(&[(header::HOST, host)]),
                    &allowed(),
                    &CorsOrigins::default()
                )
                .is_err(),
                "{host}"
            );
        }
        assert!(
            check_host_and_origin(None, &HeaderMap::new(), &allowed(), &CorsOrigins::default())
                .is_err()
        );
    }

    #[test]
    fn a_foreign_origin_is_refused() {
        let ok = headers(&[
            (header::HOST, "localhost"),
            (header::ORIGIN, "http://localhost:3000"),
        ]);
        assert!(check_host_and_origin(None, &ok, &allowed(), &CorsOrigins::default()).is_ok());
        let evil = headers(&[
            (header::HOST, "localhost"),
            (header::ORIGIN, "https://evil.com"),
        ]);
        assert!(check_host_and_origin(None, &evil, &allowed(), &CorsOrigins::default()).is_err());
        let null = headers(&[(header::HOST, "localhost"), (header::ORIGIN, "null")]);
        assert!(check_host_and_origin(None, &null, &allowed(), &CorsOrigins::default()).is_err());
    }

    #[test]
    fn an_absolute_target_names_the_host() {
        let local = headers(&[(header::HOST, "localhost")]);
        assert!(
            check_host_and_origin(
                Some("evil.example"),
                &local,
                &allowed(),
                &CorsOrigins::default()
            )
            .is_err()
        );
        let evil = headers(&[(header::HOST, "evil.example")]);
        assert!(
            check_host_and_origin(
                Some("127.0.0.1:8000"),
                &evil,
                &allowed(),
                &CorsOrigins::default()
            )
            .is_ok()
        );
    }
}
