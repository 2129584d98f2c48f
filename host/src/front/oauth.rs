//! OAuth 2.1 access tokens: toolhost as the resource server of the MCP
//! authorization spec, for every HTTP front (REST, MCP, the dashboard's
//! API). `auth.rs` asks this module about a bearer token that no person
//! of the tokens file holds; nothing else does.
//!
//! - One issuer (`--auth-issuer`) and one audience (`--auth-audience`).
//!   Its signing keys come from `--auth-jwks`, or from the `jwks_uri` of
//!   the issuer's metadata (RFC 8414 `oauth-authorization-server`, then
//!   OpenID `openid-configuration`), whose `issuer` must be the one
//!   configured. HTTPS only, but for loopback issuers.
//! - A token is a JWT signed with an asymmetric algorithm (RS256/384/512,
//!   PS256/384/512, ES256/384, EdDSA) by a key of that set: `alg: none`
//!   and the HMAC algorithms are refused, the key's type and its `alg`, when
//!   it names one, must match the token's. `iss`, `aud` and `exp` are
//!   required, `nbf` is honoured; 30 s of clock skew is allowed.
//! - The keys are fetched once at start and again when a token names a
//!   `kid` they lack (rotation), at most once every 10 s: tokens with
//!   made-up key ids cannot make toolhost hammer the issuer.
//! - Scopes (`scope`, space-separated, or an `scp` list) map onto the
//!   roles: `admin`, `plugins:publish` (publisher), `tools:call` (caller),
//!   `metrics:read` (metrics); the highest one held counts. The person is
//!   the token's `sub` (or `client_id`) when it is a valid person's name
//!   (it is then their namespace), else `oauth-` and 12 hex digits of its
//!   SHA-256.
//! - `/.well-known/oauth-protected-resource` (RFC 9728) names the
//!   resource, the issuer and the scopes; refusals point at it from
//!   `WWW-Authenticate` (`auth.rs` and `guard.rs` write those).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::front::auth::{Role, is_valid_person};

/// The least time between two fetches of the issuer's keys.
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Largest metadata or key set read from the issuer.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// The flags, as `toolhost serve` passes them.
#[derive(Clone, Debug)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier (`iss`).
    pub issuer: String,
    /// What a token's `aud` must hold: this server's identifier, best its
    /// public URL (then also the resource its metadata names).
    pub audience: String,
    /// Where the issuer's keys are; by default its metadata's `jwks_uri`.
    pub jwks: Option<String>,
}

/// The resource server: its settings and the issuer's keys as last fetched.
pub(crate) struct OAuth {
    settings: OAuthSettings,
    client: reqwest::Client,
    keys: ArcSwap<JwkSet>,
    /// When the keys were last fetched or tried; held while fetching, so
    /// that requests waiting for the same new key share one fetch.
    fetched: tokio::sync::Mutex<Option<Instant>>,
}

/// What a valid token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The person: `sub` (or `client_id`), made a valid person's name.
    pub(crate) name: String,
    /// The highest role its scopes give; `None` when they give none.
    pub(crate) role: Option<Role>,
}

/// The claims read from a token beyond those `jsonwebtoken` checks.
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    client_id: Option<String>,
    scope: Option<String>,
    scp: Option<Value>,
}

/// The scope that grants `role`.
pub(crate) fn scope_of(role: Role) -> &'static str {
    match role {
        Role::Admin => "admin",
        Role::Publisher => "plugins:publish",
        Role::Caller => "tools:call",
        Role::Metrics => "metrics:read",
    }
}

/// Every scope a token may carry, in the order the metadata lists them.
const SCOPES: [Role; 4] = [Role::Caller, Role::Publisher, Role::Admin, Role::Metrics];

impl OAuth {
    /// Checks the URLs and builds the client; no request is made yet.
    pub(crate) fn new(settings: OAuthSettings) -> anyhow::Result<Arc<OAuth>> {
        check_url("--auth-issuer", &settings.issuer)?;
        if let Some(jwks) = &settings.jwks {
            check_url("--auth-jwks", jwks)?;
        }
        anyhow::ensure!(
            !settings.audience.trim().is_empty(),
            "--auth-audience is empty: give this server's identifier, best its public URL"
        );
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Arc::new(OAuth {
            settings,
            client,
            keys: ArcSwap::from_pointee(JwkSet { keys: Vec::new() }),
            fetched: tokio::sync::Mutex::new(None),
        }))
    }

    /// Fetches the keys once in the background, so the first request does
    /// not wait for them; a failure is logged and retried on demand.
    pub(crate) fn prefetch(self: &Arc<Self>) {
        let oauth = self.clone();
        tokio::spawn(async move {
            oauth.refetch(None).await;
        });
    }

    /// Whether `token` has a JWT's shape (three base64url parts); other
    /// tokens are the tokens file's to know.
    pub(crate) fn looks_like_jwt(token: &str) -> bool {
        let parts: Vec<&str> = token.split('.').collect();
        parts.len() == 3
            && parts[..2].iter().all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    }

    /// Validates `token`, or says why it is not valid (for the client's
    /// `error_description`; nothing secret is in it).
    pub(crate) async fn validate(&self, token: &str) -> Result<Grant, String> {
        let algorithm = algorithm_of(token)?;
        let kid = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("the token's header is not valid: {e}"))?
            .kid;
        let mut keys = self.candidates(kid.as_deref(), algorithm);
        if keys.is_empty() && self.refetch(kid.as_deref()).await {
            keys = self.candidates(kid.as_deref(), algorithm);
        }
        if keys.is_empty() {
            return Err(match kid {
                Some(kid) => format!("the issuer has no {algorithm:?} key with kid {kid:?}"),
                None => format!("the issuer has no {algorithm:?} key"),
            });
        }
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let mut last = String::new();
        for key in keys {
            match jsonwebtoken::decode::<Claims>(token, &key, &validation) {
                Ok(data) => return Ok(grant(data.claims)),
                Err(error) => last = self.reason(&error),
            }
        }
        Err(last)
    }

    /// The issuer's keys that may have signed a token with `kid` and
    /// `algorithm`.
    fn candidates(&self, kid: Option<&str>, algorithm: Algorithm) -> Vec<DecodingKey> {
        let keys = self.keys.load();
        keys.keys
            .iter()
            .filter(|jwk| kid.is_none() || jwk.common.key_id.as_deref() == kid)
            .filter(|jwk| fits(jwk, algorithm))
            .filter_map(|jwk| DecodingKey::from_jwk(jwk).ok())
            .filter(|key| key.family() == algorithm.family())
            .collect()
    }

    /// Fetches the keys again unless that was done or tried in the last
    /// [`REFETCH_AFTER`]; whether the set now has `kid` (any key when
    /// `None`).
    async fn refetch(&self, kid: Option<&str>) -> bool {
        let has = |keys: &JwkSet| match kid {
            Some(kid) => keys.find(kid).is_some(),
            None => !keys.keys.is_empty(),
        };
        let mut fetched = self.fetched.lock().await;
        // Another request may have fetched it while this one waited.
        if has(&self.keys.load()) {
            return true;
        }
        if fetched.is_some_and(|at| at.elapsed() < REFETCH_AFTER) {
            return false;
        }
        *fetched = Some(Instant::now());
        match self.fetch_keys().await {
            Ok(keys) => {
                tracing::info!(issuer = %self.settings.issuer, keys = keys.keys.len(), "fetched the issuer's signing keys");
                let found = has(&keys);
                self.keys.store(Arc::new(keys));
                found
            }
            Err(error) => {
                tracing::warn!(issuer = %self.settings.issuer, error = %format!("{error:#}"), "cannot fetch the issuer's signing keys");
                false
            }
        }
    }

    async fn fetch_keys(&self) -> anyhow::Result<JwkSet> {
        let jwks = match &self.settings.jwks {
            Some(jwks) => jwks.clone(),
            None => self.discover_jwks().await?,
        };
        let document = self.get_json(&jwks).await?;
        serde_json::from_value(document)
            .map_err(|e| anyhow::anyhow!("{jwks} is not a JSON Web Key Set: {e}"))
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414's well-known
    /// document first, OpenID Connect's second.
    async fn discover_jwks(&self) -> anyhow::Result<String> {
        let issuer = self.settings.issuer.trim_end_matches('/');
        let url = reqwest::Url::parse(issuer)?;
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        let places = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut errors = Vec::new();
        for place in places {
            match self.get_json(&place).await {
                Ok(metadata) => {
                    let named = metadata["issuer"].as_str().unwrap_or_default();
                    anyhow::ensure!(
                        named.trim_end_matches('/') == issuer,
                        "{place} names the issuer {named:?}, not {:?}",
                        self.settings.issuer
                    );
                    let jwks = metadata["jwks_uri"]
                        .as_str()
                        .ok_or_else(|| anyhow::anyhow!("{place} has no jwks_uri"))?;
                    check_url("the issuer's jwks_uri", jwks)?;
                    return Ok(jwks.to_string());
                }
                Err(error) => errors.push(format!("{error:#}")),
            }
        }
        anyhow::bail!(
            "the issuer's metadata was not found (give --auth-jwks): {}",
            errors.join("; ")
        )
    }

    async fn get_json(&self, url: &str) -> anyhow::Result<Value> {
        let mut response = self
            .client
            .get(url)
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
        anyhow::ensure!(
            response.status().is_success(),
            "GET {url}: {}",
            response.status()
        );
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            body.extend_from_slice(&chunk);
            anyhow::ensure!(
                body.len() <= MAX_DOCUMENT_BYTES,
                "GET {url}: larger than {MAX_DOCUMENT_BYTES} bytes"
            );
        }
        serde_json::from_slice(&body).map_err(|e| anyhow::anyhow!("GET {url}: not JSON: {e}"))
    }

    /// What a client is told about a token that failed.
    fn reason(&self, error: &jsonwebtoken::errors::Error) -> String {
        use jsonwebtoken::errors::ErrorKind;
        match error.kind() {
            ErrorKind::ExpiredSignature => "the token has expired".into(),
            ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
            ErrorKind::InvalidAudience => format!(
                "the token is not for this server (aud must hold {:?})",
                self.settings.audience
            ),
            ErrorKind::InvalidIssuer => format!(
                "the token is not from this server's issuer ({:?})",
                self.settings.issuer
            ),
            ErrorKind::InvalidSignature => {
                "the token's signature does not verify with the issuer's key".into()
            }
            ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim:?} claim"),
            _ => format!("the token is not valid: {error}"),
        }
    }

    /// This server as a protected resource: the audience when it is a
    /// URL, else the origin the request came to.
    pub(crate) fn resource(&self, host: &str) -> String {
        match audience_url(&self.settings.audience) {
            Some(url) => url.to_string(),
            None => format!("http://{host}"),
        }
    }

    /// Where the resource's metadata is (RFC 9728 3.1: the well-known path
    /// between the resource's host and its path).
    pub(crate) fn metadata_url(&self, host: &str) -> String {
        match audience_url(&self.settings.audience) {
            Some(url) => {
                let path = url.path().trim_end_matches('/');
                format!(
                    "{}/.well-known/oauth-protected-resource{path}",
                    url.origin().ascii_serialization()
                )
            }
            None => format!("http://{host}/.well-known/oauth-protected-resource"),
        }
    }

    /// The protected resource metadata (RFC 9728 2).
    fn metadata(&self, host: &str) -> Value {
        json!({
            "resource": self.resource(host),
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": SCOPES.map(scope_of),
            "bearer_methods_supported": ["header"],
            "resource_name": "toolhost",
        })
    }
}

/// `GET /.well-known/oauth-protected-resource` (and with the resource's
/// path after it): open to anyone who passes the Host check.
pub(crate) fn router(oauth: Arc<OAuth>) -> Router {
    Router::new()
        .route("/.well-known/oauth-protected-resource", get(metadata))
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            get(metadata),
        )
        .with_state(oauth)
}

async fn metadata(State(oauth): State<Arc<OAuth>>, headers: HeaderMap) -> Response {
    let host = request_host(&headers);
    (
        [(header::CACHE_CONTROL, "max-age=300")],
        axum::Json(oauth.metadata(host)),
    )
        .into_response()
}

/// The request's Host (checked by the guard before any handler).
pub(crate) fn request_host(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("localhost")
}

/// The audience as an http(s) URL, when it is one.
fn audience_url(audience: &str) -> Option<reqwest::Url> {
    reqwest::Url::parse(audience)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
}

/// HTTPS, or plain HTTP to this machine only.
fn check_url(flag: &str, text: &str) -> anyhow::Result<()> {
    let url = reqwest::Url::parse(text).map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}"))?;
    let loopback = match url.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => anyhow::bail!(
            "{flag} {text:?}: an issuer is reached over https (plain http only on loopback)"
        ),
    }
}

/// The token's `alg`, read before anything else: `none` and the HMAC
/// algorithms are refused by name.
fn algorithm_of(token: &str) -> Result<Algorithm, String> {
    let header = token.split('.').next().unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| "the token is not a JWT".to_string())?;
    let header: Value =
        serde_json::from_slice(&bytes).map_err(|_| "the token is not a JWT".to_string())?;
    let name = header["alg"].as_str().unwrap_or_default();
    let algorithm: Algorithm = match serde_json::from_value(Value::String(name.into())) {
        Ok(algorithm) => algorithm,
        Err(_) if name.eq_ignore_ascii_case("none") => {
            return Err("unsigned tokens (alg none) are refused".into());
        }
        Err(_) => return Err(format!("the token's algorithm {name:?} is not supported")),
    };
    if matches!(
        algorithm,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(format!(
            "the token's algorithm {name} is symmetric; only the issuer's public keys are trusted"
        ));
    }
    Ok(algorithm)
}

/// Whether `jwk` may verify `algorithm`: a signing key, and its `alg`, if
/// it names one, is that algorithm.
fn fits(jwk: &Jwk, algorithm: Algorithm) -> bool {
    let signing = !matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    );
    let named = jwk.common.key_algorithm.is_none_or(|named| {
        serde_json::to_value(named).ok() == serde_json::to_value(algorithm).ok()
    });
    signing && named
}

fn grant(claims: Claims) -> Grant {
    let mut scopes: Vec<String> = claims
        .scope
        .as_deref()
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_string)
        .collect();
    match claims.scp {
        Some(Value::Array(list)) => {
            scopes.extend(list.iter().filter_map(|s| s.as_str().map(str::to_string)));
        }
        Some(Value::String(text)) => {
            scopes.extend(text.split_ascii_whitespace().map(str::to_string));
        }
        _ => {}
    }
    let role = SCOPES
        .into_iter()
        .filter(|role| scopes.iter().any(|scope| scope == scope_of(*role)))
        .max();
    let subject = claims.sub.or(claims.client_id).unwrap_or_default();
    let name = if is_valid_person(&subject) {
        subject
    } else {
        let digest = Sha256::digest(subject.as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        format!("oauth-{hex}")
    };
    Grant { name, role }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_with_header(header: &str) -> String {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.sig",
            engine.encode(header),
            engine.encode(r#"{"sub":"x"}"#)
        )
    }

    #[test]
    fn none_and_symmetric_algorithms_are_refused_by_name() {
        for (header, why) in [
            (r#"{"alg":"none"}"#, "alg none"),
            (r#"{"alg":"NONE"}"#, "alg none"),
            (r#"{"alg":"HS256"}"#, "symmetric"),
            (r#"{"alg":"XS1"}"#, "not supported"),
        ] {
            let error = algorithm_of(&token_with_header(header)).unwrap_err();
            assert!(error.contains(why), "{header}: {error}");
        }
        assert_eq!(
            algorithm_of(&token_with_header(r#"{"alg":"ES256","kid":"k"}"#)),
            Ok(Algorithm::ES256)
        );
        assert!(algorithm_of("garbage").is_err());
    }

    #[test]
    fn scopes_map_onto_roles_and_subjects_onto_names() {
        let claims = |sub: Option<&str>, scope: Option<&str>, scp: Option<Value>| Claims {
            sub: sub.map(str::to_string),
            client_id: None,
            scope: scope.map(str::to_string),
            scp,
        };
        let call = grant(claims(Some("ada"), Some("openid tools:call"), None));
        assert_eq!((call.name.as_str(), call.role), ("ada", Some(Role::Caller)));
        let publish = grant(claims(
            Some("ada"),
            Some("tools:call plugins:publish"),
            None,
        ));
        assert_eq!(publish.role, Some(Role::Publisher));
        let listed = grant(claims(Some("ada"), None, Some(json!(["admin"]))));
        assert_eq!(listed.role, Some(Role::Admin));
        let nothing = grant(claims(Some("ada"), Some("openid"), None));
        assert_eq!(nothing.role, None);
        let odd = grant(claims(Some("user@example.com/../x"), None, None));
        assert!(odd.name.starts_with("oauth-") && is_valid_person(&odd.name));
    }

    #[test]
    fn only_https_or_loopback_issuers() {
        assert!(check_url("f", "https://id.example.com").is_ok());
        assert!(check_url("f", "http://127.0.0.1:9/").is_ok());
        assert!(check_url("f", "http://localhost/").is_ok());
        assert!(check_url("f", "http://id.example.com").is_err());
        assert!(check_url("f", "file:///etc/passwd").is_err());
    }

    #[test]
    fn a_jwt_has_three_parts() {
        assert!(OAuth::looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(OAuth::looks_like_jwt("eyJh.eyJz."));
        assert!(!OAuth::looks_like_jwt("ada-secret-0123456789"));
        assert!(!OAuth::looks_like_jwt("a.b"));
        assert!(!OAuth::looks_like_jwt("a b.c.d"));
    }
}
