//! The issuer's signing keys: where they are (`--auth-jwks`, or the
//! `jwks_uri` of the issuer's RFC 8414 or OpenID metadata, whose `issuer`
//! must be the one configured), fetched over HTTPS (plain HTTP only on
//! loopback) without following redirects, at most 1 MiB, and fetched again
//! when a token names a `kid` they lack, at most once every 10 s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::http::header;
use jsonwebtoken::jwk::JwkSet;
use serde_json::Value;

/// The least time between two fetches of the issuer's keys.
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Largest metadata or key set read from the issuer.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The key set as last fetched, and how to fetch it again.
pub(super) struct Keys {
    issuer: String,
    jwks: Option<String>,
    client: reqwest::Client,
    set: ArcSwap<JwkSet>,
    /// When the keys were last fetched or tried; held while fetching, so
    /// that requests waiting for the same new key share one fetch.
    fetched: tokio::sync::Mutex<Option<Instant>>,
}

impl Keys {
    /// The keys of `issuer`, from `jwks` or its metadata's; builds the
    /// client, makes no request yet.
    pub(super) fn new(issuer: &str, jwks: Option<&str>) -> anyhow::Result<Keys> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Keys {
            issuer: issuer.to_string(),
            jwks: jwks.map(str::to_string),
            client,
            set: ArcSwap::from_pointee(JwkSet { keys: Vec::new() }),
            fetched: tokio::sync::Mutex::new(None),
        })
    }

    /// The keys as last fetched (none before the first fetch).
    pub(super) fn current(&self) -> Arc<JwkSet> {
        self.set.load_full()
    }

    /// Fetches the keys again unless that was done or tried in the last
    /// [`REFETCH_AFTER`]; whether the set now has `kid` (any key when
    /// `None`).
    pub(super) async fn refetch(&self, kid: Option<&str>) -> bool {
        let has = |keys: &JwkSet| match kid {
            Some(kid) => keys.find(kid).is_some(),
            None => !keys.keys.is_empty(),
        };
        let mut fetched = self.fetched.lock().await;
        // Another request may have fetched it while this one waited.
        if has(&self.set.load()) {
            return true;
        }
        if fetched.is_some_and(|at| at.elapsed() < REFETCH_AFTER) {
            return false;
        }
        *fetched = Some(Instant::now());
        match self.fetch_keys().await {
            Ok(keys) => {
                tracing::info!(issuer = %self.issuer, keys = keys.keys.len(), "fetched the issuer's signing keys");
                let found = has(&keys);
                self.set.store(Arc::new(keys));
                found
            }
            Err(error) => {
                tracing::warn!(issuer = %self.issuer, error = %format!("{error:#}"), "cannot fetch the issuer's signing keys");
                false
            }
        }
    }

    async fn fetch_keys(&self) -> anyhow::Result<JwkSet> {
        let jwks = match &self.jwks {
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
        let issuer = self.issuer.trim_end_matches('/');
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
                        self.issuer
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
}

/// HTTPS, or plain HTTP to this machine only.
pub(super) fn check_url(flag: &str, text: &str) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_issuers() {
        assert!(check_url("f", "https://id.example.com").is_ok());
        assert!(check_url("f", "http://127.0.0.1:9/").is_ok());
        assert!(check_url("f", "http://localhost/").is_ok());
        assert!(check_url("f", "http://id.example.com").is_err());
        assert!(check_url("f", "file:///etc/passwd").is_err());
    }
}
