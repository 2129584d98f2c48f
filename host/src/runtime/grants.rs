//! What one plugin's sandbox is granted: nothing by default. Built from the
//! plugin's policy file by `policy.rs`; applied here, to every call's WASI
//! context, outbound HTTP hook, limits and `config` import.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::WasiHttpHooks;

/// Limits applied to every call of every plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// What one call may do with the `http` import (requests, answer size).
    pub(crate) outbound: OutboundLimits,
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
#[derive(Debug)]
pub struct SourceFile {
    pub(crate) name: String,
    pub(crate) text: String,
    /// What the language runtime reads besides (the rest of the standard
    /// library, the room's packages), read-only: part of the runtime's
    /// world, not a grant of the policy's, so the listing at load has them
    /// too.
    pub(crate) dirs: Vec<DirGrant>,
    /// The room's packages it imports (JavaScript): each specifier and
    /// the script that defines it.
    pub(crate) modules: Vec<(String, String)>,
    /// What must live as long as this source is served (a tool folder's
    /// files on disk).
    pub(crate) holds: Vec<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Grants {
    /// The fuel a call starts with: its budget, or (unlimited) all there
    /// is, so that what a call burned can be counted either way.
    pub(crate) fn fuel_budget(&self) -> u64 {
        self.fuel.unwrap_or(u64::MAX)
    }

    /// Whether these grants give code nothing to observe or reach beyond
    /// what no grants give: no environment, config, folders or origins
    /// (limits aside, which bound a run and change nothing it computes).
    pub(crate) fn give_nothing(&self) -> bool {
        self.env.is_empty()
            && self.config.is_empty()
            && self.dirs.is_empty()
            && self.http_allow.is_empty()
    }

    /// Whether a store made with these grants is the very store `none`
    /// with this source would make: nothing given, the same limits and no
    /// fuel budget. Describing a plugin with such grants runs exactly what
    /// describing it with none does, and leaves an instance it may serve
    /// in (`Runtime::describe`).
    pub(crate) fn alike_to_none(&self, none: &Limits) -> bool {
        self.give_nothing() && self.limits == *none && self.fuel.is_none()
    }

    /// The grants of a plugin without a policy: nothing, and the host's
    /// default limits.
    pub(crate) fn none(limits: Limits) -> Self {
        Grants {
            env: Vec::new(),
            config: BTreeMap::new(),
            dirs: Vec::new(),
            http_allow: Arc::new(Vec::new()),
            outbound: Default::default(),
            limits,
            fuel: None,
            max_concurrent: None,
            reuse_instance: None,
            source: None,
        }
    }
}

/// What one call may do with outbound HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundLimits {
    /// Requests per call (redirects count).
    pub max_requests: u32,
    /// Bytes of one response's body.
    pub max_response_bytes: u64,
}

impl Default for OutboundLimits {
    fn default() -> Self {
        OutboundLimits {
            max_requests: 32,
            max_response_bytes: 8 << 20,
        }
    }
}

/// A host directory visible to the plugin at `guest`.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        let default_port = Some(if scheme == "https" { 443 } else { 80 });
        let port_of = |text: &str| match text {
            "*" => Ok(None),
            digits => digits.parse::<u16>().map(Some).map_err(|_| bad()),
        };
        let (host, port) = if let Some(inside) = rest.strip_prefix('[') {
            // An IPv6 address: `[::1]` or `[::1]:8080`.
            let (address, after) = inside.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => default_port,
                after => port_of(after.strip_prefix(':').ok_or_else(bad)?)?,
            };
            (address, port)
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, port_of(port)?),
                None => (rest, default_port),
            }
        };
        if host.is_empty() {
            return Err(bad());
        }
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

        let v6 = OriginPattern::parse("http://[::1]").unwrap();
        assert!(v6.matches("http", "[::1]", 80));
        assert!(
            OriginPattern::parse("http://[::1]:8080")
                .unwrap()
                .matches("http", "::1", 8080)
        );
        assert!(OriginPattern::parse("http://[::1").is_err());
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
