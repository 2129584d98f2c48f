//! What one plugin's sandbox is granted: nothing by default. Built from the
//! plugin's policy file by `policy.rs`; applied here, to every call's WASI
//! context, outbound HTTP hook, limits and `config` import.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::WasiHttpHooks;

/// Limits applied to every call of every plugin.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    pub memory_bytes: usize,
}

/// Everything a plugin may use beyond pure computation.
#[derive(Debug, Clone)]
pub struct Grants {
    /// Environment variables, already resolved to values.
    pub(crate) env: Vec<(String, String)>,
    /// Values for the `config` import.
    pub(crate) config: BTreeMap<String, String>,
    pub(crate) dirs: Vec<DirGrant>,
    /// Where outbound HTTP may go; empty means nowhere.
    pub(crate) http_allow: Arc<Vec<OriginPattern>>,
    pub(crate) limits: Limits,
    /// Instruction budget per call (wasmtime fuel); `None` is unlimited.
    pub(crate) fuel: Option<u64>,
    /// Calls allowed to run at once; `None` is unlimited.
    pub(crate) max_concurrent: Option<usize>,
    /// How many calls one instance may serve (opt-in, see `runtime/warm.rs`);
    /// `None`: a fresh instance per call.
    pub(crate) reuse_instance: Option<u32>,
    /// For a plugin that is a source file (`app.py`, `app.js`): the file
    /// its language runtime reads through the `source` import.
    pub(crate) source: Option<Arc<SourceFile>>,
}

/// A source file a language runtime runs: its name as the author wrote it
/// and its text.
#[derive(Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub(crate) name: String,
    pub(crate) text: String,
}

impl Grants {
    /// The fuel a call starts with: its budget, or (unlimited) all there
    /// is, so that what a call burned can be counted either way.
    pub(crate) fn fuel_budget(&self) -> u64 {
        self.fuel.unwrap_or(u64::MAX)
    }

    /// The grants of a plugin without a policy: nothing, and the host's
    /// default limits.
    pub(crate) fn none(limits: Limits) -> Self {
        Grants {
            env: Vec::new(),
            config: BTreeMap::new(),
            dirs: Vec::new(),
            http_allow: Arc::new(Vec::new()),
            limits,
            fuel: None,
            max_concurrent: None,
            reuse_instance: None,
            source: None,
        }
    }
}

/// A host directory visible to the plugin at `guest`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DirGrant {
    pub(crate) host: PathBuf,
    pub(crate) guest: String,
    pub(crate) writable: bool,
}

/// `scheme://host[:port]`; a port of `None` matches any port, and a host of
/// `*.example.com` matches its subdomains (not `example.com` itself).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OriginPattern {
    pub(crate) scheme: String,
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

/// Why a `[http] allow` entry is not an [`OriginPattern`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadOrigin {
    /// It is not `scheme://host[:port]`.
    #[error("{0:?} is not scheme://host[:port] (port may be *)")]
    Shape(String),
    /// Its scheme is neither http nor https.
    #[error("{0:?}: only http and https can be allowed")]
    Scheme(String),
}

impl OriginPattern {
    /// Parses `http://127.0.0.1:8080`, `https://api.example.com`,
    /// `https://*.example.com:*`.
    pub(crate) fn parse(text: &str) -> Result<Self, BadOrigin> {
        let bad = || BadOrigin::Shape(text.to_string());
        let (scheme, rest) = text.split_once("://").ok_or_else(bad)?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(BadOrigin::Scheme(text.to_string()));
        }
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') || rest.is_empty() {
            return Err(bad());
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, "*")) => (host, None),
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                (host, Some(port.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (rest, Some(if scheme == "https" { 443 } else { 80 })),
        };
        Ok(OriginPattern {
            scheme,
            host: host.trim_matches(['[', ']']).to_ascii_lowercase(),
            port,
        })
    }

    pub(crate) fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
        let host_matches = match self.host.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => self.host == host,
        };
        self.scheme.eq_ignore_ascii_case(scheme)
            && host_matches
            && self.port.is_none_or(|allowed| allowed == port)
    }
}

/// The outbound-HTTP hook of one call: requests to an allowed origin are
/// sent; any other is refused with `HTTP-request-denied` inside the plugin
/// and logged.
pub(crate) struct HttpAllowlist {
    pub(crate) plugin: Arc<str>,
    pub(crate) allow: Arc<Vec<OriginPattern>>,
}

type SendResult = wasmtime_wasi_http::Result<(
    http::Response<wasmtime_wasi_http::WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

impl WasiHttpHooks for HttpAllowlist {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("http").to_string();
        let host = uri.host().unwrap_or("").to_string();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let allowed = self
            .allow
            .iter()
            .any(|pattern| pattern.matches(&scheme, &host, port));
        if !allowed {
            tracing::warn!(plugin = %self.plugin, %uri, "outbound HTTP denied: not in the plugin's allowlist");
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        tracing::debug!(plugin = %self.plugin, %uri, "outbound HTTP allowed");
        drop(fut);
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_patterns_parse_and_match() {
        let local = OriginPattern::parse("http://127.0.0.1:8080").unwrap();
        assert!(local.matches("http", "127.0.0.1", 8080));
        assert!(!local.matches("http", "127.0.0.1", 8081));
        assert!(!local.matches("https", "127.0.0.1", 8080));

        let default_port = OriginPattern::parse("https://api.example.com/").unwrap();
        assert!(default_port.matches("https", "API.example.com", 443));
        assert!(!default_port.matches("https", "api.example.com", 8443));

        let any_port = OriginPattern::parse("http://localhost:*").unwrap();
        assert!(any_port.matches("http", "localhost", 1234));

        let wildcard = OriginPattern::parse("https://*.example.com").unwrap();
        assert!(wildcard.matches("https", "a.example.com", 443));
        assert!(!wildcard.matches("https", "example.com", 443));
        assert!(!wildcard.matches("https", "evil-example.com", 443));

        for bad in [
            "ftp://x",
            "127.0.0.1:80",
            "http://",
            "http://h/path",
            "http://h:99999",
        ] {
            assert!(OriginPattern::parse(bad).is_err(), "{bad}");
        }
    }
}
