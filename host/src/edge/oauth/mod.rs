//! OAuth 2.1 access tokens: toolhost as the resource server of the MCP
//! authorization spec, for every HTTP front (REST, MCP, the dashboard's
//! API). `auth.rs` asks this module about a bearer token that no person
//! of the tokens file holds; nothing else does.
//!
//! - One issuer (`--auth-issuer`) and one audience (`--auth-audience`);
//!   its signing keys: `keys.rs`.
//! - A token is a JWT signed with an asymmetric algorithm (RS256/384/512,
//!   PS256/384/512, ES256/384, EdDSA) by a key of that set: `alg: none`
//!   and the HMAC algorithms are refused, the key's type and its `alg`, when
//!   it names one, must match the token's. `iss`, `aud` and `exp` are
//!   required, `nbf` is honoured; 30 s of clock skew is allowed.
//! - The keys are fetched once at start and again when a token names a
//!   `kid` they lack (rotation), at most once every 10 s: tokens with
//!   made-up key ids cannot make toolhost hammer the issuer.
//! - Scopes (`scope`, space-separated, or an `scp` list) and the subject
//!   (`sub`, or `client_id`) are handed to `auth.rs`, which makes them a
//!   role and a person.
//! - `/.well-known/oauth-protected-resource` (RFC 9728) names the
//!   resource, the issuer and the scopes; refusals point at it from
//!   `WWW-Authenticate` (`auth.rs` and `guard.rs` write those).

mod keys;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};

use self::keys::Keys;

/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// Why an access token is refused: the client's `error_description`
/// (nothing secret is in it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// Its header is not base64url JSON.
    #[error("the token is not a JWT")]
    NotAJwt,
    #[error("unsigned tokens (alg none) are refused")]
    Unsigned,
    #[error("the token's algorithm {0:?} is not supported")]
    UnknownAlgorithm(String),
    /// An HMAC algorithm: a shared secret, never trusted.
    #[error("the token's algorithm {0} is symmetric; only the issuer's public keys are trusted")]
    Symmetric(String),
    #[error("the token's header is not valid: {0}")]
    Header(#[source] jsonwebtoken::errors::Error),
    /// The issuer's key set has no key for its `kid` and algorithm.
    #[error("the issuer has no {algorithm:?} key with kid {kid:?}")]
    NoKeyWithKid { algorithm: Algorithm, kid: String },
    #[error("the issuer has no {0:?} key")]
    NoKey(Algorithm),
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    Immature,
    /// Its `aud` does not hold this server's audience.
    #[error("the token is not for this server (aud must hold {0:?})")]
    Audience(String),
    /// Its `iss` is not this server's issuer.
    #[error("the token is not from this server's issuer ({0:?})")]
    Issuer(String),
    #[error("the token's signature does not verify with the issuer's key")]
    Signature,
    #[error("the token has no {0:?} claim")]
    MissingClaim(String),
    /// Any other reason the JWT library gives.
    #[error("the token is not valid: {0}")]
    Invalid(#[source] jsonwebtoken::errors::Error),
}

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
    /// The claim whose value names a token holder's namespace (`sub` by
    /// default; `preferred_username` reads better where the issuer has it).
    pub namespace_claim: String,
    /// Put before that value to make the namespace (`oauth-` by default),
    /// so that no token's holder can take a tokens-file person's namespace:
    /// the tokens file may not name anyone with this prefix.
    pub namespace_prefix: String,
    /// The claim whose values name the tokens file's groups a token holder
    /// sees (`--auth-tools-claim`); `None`: every tool.
    pub tools_claim: Option<String>,
}

/// The defaults of `--auth-namespace-claim` and `--auth-namespace-prefix`.
pub const DEFAULT_NAMESPACE_CLAIM: &str = "sub";
pub const DEFAULT_NAMESPACE_PREFIX: &str = "oauth-";

impl OAuthSettings {
    /// Whether the flags can work: HTTPS issuer and key set URLs (plain
    /// HTTP on loopback only) and an audience. `toolhost serve` asks before
    /// it listens.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        keys::check_url("--auth-issuer", &self.issuer)?;
        if let Some(jwks) = &self.jwks {
            keys::check_url("--auth-jwks", jwks)?;
        }
        anyhow::ensure!(
            !self.audience.trim().is_empty(),
            "--auth-audience is empty: give this server's identifier, best its public URL"
        );
        anyhow::ensure!(
            !self.namespace_claim.trim().is_empty(),
            "--auth-namespace-claim is empty: name the claim that names a namespace (sub)"
        );
        let starts_a_name = self
            .namespace_prefix
            .starts_with(|c: char| c.is_ascii_alphabetic())
            && self
                .namespace_prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
        anyhow::ensure!(
            self.namespace_prefix.is_empty() || starts_a_name,
            "--auth-namespace-prefix {:?} is not the start of a name: letters, digits, `_` or `-`, \
             starting with a letter",
            self.namespace_prefix
        );
        Ok(())
    }
}

/// The resource server: its settings and the issuer's keys.
pub(crate) struct OAuth {
    settings: OAuthSettings,
    keys: Keys,
}

/// What a valid token grants; `auth.rs` makes it a person and a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// `sub`, or `client_id` without one; empty without either.
    pub(crate) subject: String,
    /// `scope` (space-separated) and `scp` (a list or a string) together.
    pub(crate) scopes: Vec<String>,
    /// The namespace claim's value (`--auth-namespace-claim`), when the
    /// token has it as a string.
    pub(crate) namespace: Option<String>,
    /// When the token expires (`exp`).
    pub(crate) expires: std::time::SystemTime,
    /// The tools claim's values (a list, or a space-separated string),
    /// when `--auth-tools-claim` names one; empty when the token lacks it.
    pub(crate) tool_groups: Option<Vec<String>>,
}

/// The claims read from a token beyond those `jsonwebtoken` checks.
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    client_id: Option<String>,
    /// RFC 9068's space-separated string; some issuers send a list.
    scope: Option<Value>,
    scp: Option<Value>,
    exp: Option<u64>,
    /// Every other claim, for the namespace claim an operator names.
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// The scopes this server knows, one per role (`auth.rs` maps them).
pub(crate) const SCOPE_CALL: &str = "tools:call";
pub(crate) const SCOPE_PUBLISH: &str = "plugins:publish";
pub(crate) const SCOPE_ADMIN: &str = "admin";
pub(crate) const SCOPE_METRICS: &str = "metrics:read";
const SCOPES: [&str; 4] = [SCOPE_CALL, SCOPE_PUBLISH, SCOPE_ADMIN, SCOPE_METRICS];

impl OAuth {
    /// Checks the URLs and builds the client; no request is made yet.
    pub(crate) fn new(settings: OAuthSettings) -> anyhow::Result<Arc<OAuth>> {
        settings.check()?;
        Ok(Arc::new(OAuth {
            keys: Keys::new(&settings.issuer, settings.jwks.as_deref())?,
            settings,
        }))
    }

    /// Fetches the keys once in the background, so the first request does
    /// not wait for them; a failure is logged and retried on demand.
    pub(crate) fn prefetch(self: &Arc<Self>) {
        let oauth = self.clone();
        tokio::spawn(async move {
            oauth.keys.refetch(None).await;
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
    pub(crate) async fn validate(&self, token: &str) -> Result<Grant, TokenError> {
        let algorithm = algorithm_of(token)?;
        let kid = jsonwebtoken::decode_header(token)
            .map_err(TokenError::Header)?
            .kid;
        let mut keys = self.candidates(kid.as_deref(), algorithm);
        if keys.is_empty() && self.keys.refetch(kid.as_deref()).await {
            keys = self.candidates(kid.as_deref(), algorithm);
        }
        if keys.is_empty() {
            return Err(match kid {
                Some(kid) => TokenError::NoKeyWithKid { algorithm, kid },
                None => TokenError::NoKey(algorithm),
            });
        }
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        // Each key refuses it, or one takes it (there is at least one).
        let mut last = TokenError::NoKey(algorithm);
        for key in keys {
            match jsonwebtoken::decode::<Claims>(token, &key, &validation) {
                Ok(data) => {
                    return Ok(grant(
                        data.claims,
                        &self.settings.namespace_claim,
                        self.settings.tools_claim.as_deref(),
                    ));
                }
                Err(error) => last = self.reason(&error),
            }
        }
        Err(last)
    }

    /// The issuer's keys that may have signed a token with `kid` and
    /// `algorithm`.
    fn candidates(&self, kid: Option<&str>, algorithm: Algorithm) -> Vec<DecodingKey> {
        let keys = self.keys.current();
        keys.keys
            .iter()
            .filter(|jwk| kid.is_none() || jwk.common.key_id.as_deref() == kid)
            .filter(|jwk| fits(jwk, algorithm))
            .filter_map(|jwk| DecodingKey::from_jwk(jwk).ok())
            .filter(|key| key.family() == algorithm.family())
            .collect()
    }

    /// What a client is told about a token that failed.
    fn reason(&self, error: &jsonwebtoken::errors::Error) -> TokenError {
        use jsonwebtoken::errors::ErrorKind;
        match error.kind() {
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::ImmatureSignature => TokenError::Immature,
            ErrorKind::InvalidAudience => TokenError::Audience(self.settings.audience.clone()),
            ErrorKind::InvalidIssuer => TokenError::Issuer(self.settings.issuer.clone()),
            ErrorKind::InvalidSignature => TokenError::Signature,
            ErrorKind::MissingRequiredClaim(claim) => TokenError::MissingClaim(claim.clone()),
            _ => TokenError::Invalid(error.clone()),
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

    /// What every token holder's namespace starts with
    /// (`--auth-namespace-prefix`).
    pub(crate) fn namespace_prefix(&self) -> &str {
        &self.settings.namespace_prefix
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
            "scopes_supported": SCOPES,
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

/// The token's `alg`, read before anything else: `none` and the HMAC
/// algorithms are refused by name.
fn algorithm_of(token: &str) -> Result<Algorithm, TokenError> {
    let header = token.split('.').next().unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenError::NotAJwt)?;
    let header: Value = serde_json::from_slice(&bytes).map_err(|_| TokenError::NotAJwt)?;
    let name = header["alg"].as_str().unwrap_or_default();
    let algorithm: Algorithm = match serde_json::from_value(Value::String(name.into())) {
        Ok(algorithm) => algorithm,
        Err(_) if name.eq_ignore_ascii_case("none") => {
            return Err(TokenError::Unsigned);
        }
        Err(_) => return Err(TokenError::UnknownAlgorithm(name.to_string())),
    };
    if matches!(
        algorithm,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(TokenError::Symmetric(name.to_string()));
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

/// The values of claim `name`: a list of strings, or one string split at
/// spaces (as `scope` is).
fn claim_values(claims: &Claims, name: &str) -> Vec<String> {
    let value = match name {
        "scope" => claims.scope.clone(),
        "scp" => claims.scp.clone(),
        "sub" => claims.sub.clone().map(Value::String),
        "client_id" => claims.client_id.clone().map(Value::String),
        other => claims.other.get(other).cloned(),
    };
    match value {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(text)) => text.split_ascii_whitespace().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

fn grant(claims: Claims, namespace_claim: &str, tools_claim: Option<&str>) -> Grant {
    let tool_groups = tools_claim.map(|name| claim_values(&claims, name));
    let namespace = match namespace_claim {
        "sub" => claims.sub.clone(),
        "client_id" => claims.client_id.clone(),
        other => claims
            .other
            .get(other)
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let expires = std::time::UNIX_EPOCH + std::time::Duration::from_secs(claims.exp.unwrap_or(0));
    let mut scopes: Vec<String> = Vec::new();
    for listed in [claims.scope, claims.scp] {
        match listed {
            Some(Value::Array(list)) => {
                scopes.extend(list.iter().filter_map(|s| s.as_str().map(str::to_string)));
            }
            Some(Value::String(text)) => {
                scopes.extend(text.split_ascii_whitespace().map(str::to_string));
            }
            _ => {}
        }
    }
    Grant {
        subject: claims.sub.or(claims.client_id).unwrap_or_default(),
        scopes,
        namespace,
        expires,
        tool_groups,
    }
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
            let error = algorithm_of(&token_with_header(header))
                .unwrap_err()
                .to_string();
            assert!(error.contains(why), "{header}: {error}");
        }
        assert_eq!(
            algorithm_of(&token_with_header(r#"{"alg":"ES256","kid":"k"}"#)),
            Ok(Algorithm::ES256)
        );
        assert!(algorithm_of("garbage").is_err());
    }

    #[test]
    fn scopes_come_from_scope_and_scp() {
        let claims = |scope: Option<&str>, scp: Option<Value>| Claims {
            sub: None,
            client_id: Some("agent".into()),
            scope: scope.map(|scope| Value::String(scope.to_string())),
            scp,
            exp: Some(10),
            other: [("preferred_username".to_string(), json!("ada"))]
                .into_iter()
                .collect(),
        };
        let both = grant(
            claims(Some("openid tools:call"), Some(json!(["admin"]))),
            "sub",
            Some("scope"),
        );
        assert_eq!(
            both.tool_groups.as_deref(),
            Some(&["openid".to_string(), "tools:call".to_string()][..])
        );
        assert_eq!(both.subject, "agent");
        assert_eq!(both.namespace, None);
        assert_eq!(both.scopes, ["openid", "tools:call", "admin"]);
        let text = grant(
            claims(None, Some(json!("a b"))),
            "preferred_username",
            Some("groups"),
        );
        assert_eq!(text.tool_groups, Some(vec![]));
        // Some issuers send `scope` as a list.
        let mut listed = claims(None, None);
        listed.scope = Some(json!(["tools:call", "support"]));
        let listed = grant(listed, "sub", Some("scope"));
        assert_eq!(listed.scopes, ["tools:call", "support"]);
        assert_eq!(listed.tool_groups.unwrap(), ["tools:call", "support"]);
        assert_eq!(text.scopes, ["a", "b"]);
        assert_eq!(text.namespace.as_deref(), Some("ada"));
        assert_eq!(
            text.expires,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(10)
        );
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
