//! The host side of the `http` import: outbound HTTP for the language
//! runtimes (the helpers' `http`, JavaScript's `fetch`, Python's
//! `urllib.request`), under the same `[http] allow` list that wasi:http
//! obeys (`grants.rs`).
//!
//! One request, answered whole, and only:
//! - to an allowed origin, each redirect too (followed here, never by the
//!   client library, so that every hop is checked);
//! - to a loopback, private or link-local address when the grant names
//!   that address (or `localhost`): a name that resolves to one is
//!   refused at resolution, and the address resolved is the one connected
//!   to, so a name cannot turn private between the check and the connect;
//! - within the call's limits: at most [`OutboundLimits::max_requests`]
//!   requests, each answer at most [`OutboundLimits::max_response_bytes`],
//!   nothing past the call's deadline.
//!
//! A refusal or a failure is a sentence for the author (the origin, and
//! where an admin grants it); nothing leaves the machine for a refused
//! origin. What a call sent and received is counted ([`OutboundUsage`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::grants::{OriginPattern, OutboundLimits};

/// What one call did with outbound HTTP: requests sent (redirects count),
/// bytes of bodies sent and received, and the time spent waiting on them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboundUsage {
    pub requests: u32,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub wait: Duration,
}

/// One request as the guest asks for it.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) follow_redirects: bool,
}

/// Its answer.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// Why a request got no answer: each is the sentence the author reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error("{0:?} is not an absolute http:// or https:// URL")]
    BadUrl(String),
    #[error("{0:?} is not an HTTP method")]
    BadMethod(String),
    #[error("the header {0:?} cannot be set by a tool")]
    BadHeader(String),
    #[error(
        "{origin} is not allowed for {plugin}: an admin grants it with [http] allow = \
         [\"{origin}\"] in the plugin's policy file, its namespace's _namespace.toml, or the \
         room's _room.toml in the plugin folder (docs/security.md); nothing was sent"
    )]
    NotAllowed { origin: String, plugin: Arc<str> },
    #[error(
        "{host} resolves to {address}, a loopback, private or link-local address: only a \
         grant that names that address (or localhost) reaches it; nothing was sent"
    )]
    Private { host: String, address: IpAddr },
    #[error("this call has made its {0} outbound requests, the most one call may make")]
    TooMany(u32),
    #[error("the answer from {url} is larger than {limit} bytes, the most one answer may be")]
    TooLarge { url: String, limit: u64 },
    #[error("{url} did not answer within {} ms", .after.as_millis())]
    TimedOut { url: String, after: Duration },
    #[error("redirected more than {0} times")]
    Redirects(u32),
    #[error("redirected, and the next hop is refused: {0} (the first hop was sent)")]
    Redirected(Box<Refused>),
    #[error("redirected from https to {0}: a redirect never leaves https for http")]
    Downgrade(String),
    #[error("{url}: {reason}")]
    Failed { url: String, reason: String },
}

/// A call's outbound HTTP: its plugin, the allowlist, its limits and
/// deadline, and what it used so far.
pub(crate) struct Outbound {
    plugin: Arc<str>,
    allow: Arc<Vec<OriginPattern>>,
    limits: OutboundLimits,
    deadline: Instant,
    pub(crate) usage: OutboundUsage,
}

/// Redirects followed for one request, at most.
const MAX_REDIRECTS: u32 = 10;

impl Outbound {
    pub(crate) fn new(
        plugin: Arc<str>,
        allow: Arc<Vec<OriginPattern>>,
        limits: OutboundLimits,
        call_timeout: Duration,
    ) -> Self {
        Outbound {
            plugin,
            allow,
            limits,
            deadline: Instant::now() + call_timeout,
            usage: OutboundUsage::default(),
        }
    }

    /// A new call on this instance: its own deadline, counts from zero.
    pub(crate) fn start_call(&mut self, call_timeout: Duration) {
        self.deadline = Instant::now() + call_timeout;
        self.usage = OutboundUsage::default();
    }

    /// Sends `request`, following redirects to allowed origins.
    pub(crate) async fn send(&mut self, request: Request) -> Result<Response, Refused> {
        // Every request counts, refused or not: a loop of refusals is
        // bounded like a loop of requests.
        if self.usage.requests >= self.limits.max_requests {
            return Err(Refused::TooMany(self.limits.max_requests));
        }
        let method = reqwest::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| Refused::BadMethod(request.method.clone()))?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &request.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Refused::BadHeader(name.clone()))?;
            if FORBIDDEN_HEADERS.contains(&name.as_str()) {
                return Err(Refused::BadHeader(name.to_string()));
            }
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| Refused::BadHeader(name.to_string()))?;
            headers.append(name, value);
        }
        let started = Instant::now();
        let timeout = request.timeout.map_or(self.deadline, |timeout| {
            self.deadline.min(started + timeout)
        });
        let mut url = match self.checked(&request.url) {
            Ok(url) => url,
            Err(refused) => {
                self.usage.requests += 1;
                return Err(refused);
            }
        };
        let mut method = method;
        let mut body = request.body;
        let mut redirects = 0;
        let answer = loop {
            if self.usage.requests >= self.limits.max_requests {
                break Err(Refused::TooMany(self.limits.max_requests));
            }
            self.usage.requests += 1;
            let left = timeout.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(Refused::TimedOut {
                    url: url.to_string(),
                    after: started.elapsed(),
                });
            }
            let mut builder = client()
                .request(method.clone(), url.clone())
                .headers(headers.clone())
                .timeout(left);
            if let Some(bytes) = &body {
                self.usage.bytes_sent += bytes.len() as u64;
                builder = builder.body(bytes.clone());
            }
            let response = match builder.send().await {
                Ok(response) => response,
                Err(error) => break Err(failure(&url, &error, started)),
            };
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string);
            if request.follow_redirects
                && status.is_redirection()
                && let Some(location) = location
            {
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    break Err(Refused::Redirects(MAX_REDIRECTS));
                }
                let next = match url.join(&location) {
                    Ok(next) => next,
                    Err(_) => break Err(Refused::BadUrl(location)),
                };
                let next = match self.checked(next.as_str()) {
                    Ok(next) => next,
                    Err(refused) => break Err(Refused::Redirected(Box::new(refused))),
                };
                if url.scheme() == "https" && next.scheme() == "http" {
                    break Err(Refused::Downgrade(origin_of(&next)));
                }
                // Credentials are for the origin they were written for.
                if origin_of(&next) != origin_of(&url) {
                    for name in ["authorization", "cookie", "proxy-authorization"] {
                        headers.remove(name);
                    }
                }
                url = next;
                // 303, and 301/302 after a POST, become a GET without a body.
                if status == reqwest::StatusCode::SEE_OTHER
                    || (method == reqwest::Method::POST && matches!(status.as_u16(), 301 | 302))
                {
                    method = reqwest::Method::GET;
                    body = None;
                }
                continue;
            }
            break self.read(response, &url, started).await;
        };
        self.usage.wait += started.elapsed();
        answer
    }

    /// `text` as a URL whose origin is allowed for this plugin.
    fn checked(&self, text: &str) -> Result<reqwest::Url, Refused> {
        let url = reqwest::Url::parse(text).map_err(|_| Refused::BadUrl(text.to_string()))?;
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(Refused::BadUrl(text.to_string()));
        }
        let host = url
            .host_str()
            .ok_or_else(|| Refused::BadUrl(text.to_string()))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| Refused::BadUrl(text.to_string()))?;
        if !self
            .allow
            .iter()
            .any(|pattern| pattern.matches(scheme, host, port))
        {
            tracing::warn!(plugin = %self.plugin, origin = %origin_of(&url), "outbound HTTP denied: not in the plugin's allowlist");
            return Err(Refused::NotAllowed {
                origin: origin_of(&url),
                plugin: self.plugin.clone(),
            });
        }
        Ok(url)
    }

    /// The body, to the limit.
    async fn read(
        &mut self,
        mut response: reqwest::Response,
        url: &reqwest::Url,
        started: Instant,
    ) -> Result<Response, Refused> {
        let limit = self.limits.max_response_bytes;
        if response
            .content_length()
            .is_some_and(|length| length > limit)
        {
            return Err(Refused::TooLarge {
                url: url.to_string(),
                limit,
            });
        }
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
            .collect();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    self.usage.bytes_received += chunk.len() as u64;
                    if body.len() as u64 + chunk.len() as u64 > limit {
                        return Err(Refused::TooLarge {
                            url: url.to_string(),
                            limit,
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(error) => return Err(failure(url, &error, started)),
            }
        }
        // The URL told back carries no credentials written into it.
        let mut told = url.clone();
        let _ = told.set_username("");
        let _ = told.set_password(None);
        Ok(Response {
            status,
            url: told.to_string(),
            headers,
            body,
        })
    }
}

/// Headers the host sets itself.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "keep-alive",
    "te",
    "trailer",
];

/// `scheme://host:port`, as a grant spells it.
fn origin_of(url: &reqwest::Url) -> String {
    // `host_str` keeps an IPv6 address's brackets.
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// A failed request as the author reads it: the resolver's refusal as it
/// is, else the innermost cause.
fn failure(url: &reqwest::Url, error: &reqwest::Error, started: Instant) -> Refused {
    if error.is_timeout() {
        return Refused::TimedOut {
            url: url.to_string(),
            after: started.elapsed(),
        };
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut innermost = error.to_string();
    while let Some(cause) = source {
        if let Some(private) = cause.downcast_ref::<PrivateAddress>() {
            return Refused::Private {
                host: private.host.clone(),
                address: private.address,
            };
        }
        innermost = cause.to_string();
        source = cause.source();
    }
    Refused::Failed {
        url: url.to_string(),
        reason: innermost,
    }
}

/// The one client every call's requests go through: no proxy from the
/// environment, no redirects of its own, names resolved by [`Resolver`].
fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(Resolver))
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("a client with these settings builds")
    })
}

/// Resolves names for outbound HTTP, refusing a name (other than
/// `localhost`) that resolves to a loopback, private or link-local
/// address. An address written in the URL never comes here: the
/// allowlist alone decides it, and a pattern can only match an address
/// by naming it.
struct Resolver;

/// A name that resolved to an address only a grant naming it may reach.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to {address}, which only a grant naming that address reaches")]
struct PrivateAddress {
    host: String,
    address: IpAddr,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            guard(&host, &addresses)
                .map_err(|refused| Box::new(refused) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether `host`, resolved to `addresses`, may be reached by name.
fn guard(host: &str, addresses: &[SocketAddr]) -> Result<(), PrivateAddress> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(());
    }
    match addresses.iter().find(|address| is_internal(address.ip())) {
        Some(private) => Err(PrivateAddress {
            host: host.to_string(),
            address: private.ip(),
        }),
        None => Ok(()),
    }
}

/// Loopback, private (RFC 1918, unique local), link-local, unspecified,
/// shared (100.64/10) and the IPv4 addresses mapped into IPv6.
pub(crate) fn is_internal(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (b & 0xc0) == 64)
                || (a == 198 && (b & 0xfe) == 18)
                || (a == 192 && b == 0 && c == 0)
                || a >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4
            // address: it decides.
            let embedded = |high: u16, low: u16| {
                std::net::Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8)
            };
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_internal(IpAddr::V4(embedded(segments[6], segments[7])));
            }
            if segments[0] == 0x2002 {
                return is_internal(IpAddr::V4(embedded(segments[1], segments[2])));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_told_apart() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "198.18.0.1",
            "240.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    fn outbound(allow: &[&str]) -> Outbound {
        Outbound::new(
            "ada/word".into(),
            Arc::new(
                allow
                    .iter()
                    .map(|pattern| OriginPattern::parse(pattern).unwrap())
                    .collect(),
            ),
            OutboundLimits::default(),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn only_allowed_origins_pass_and_a_refusal_says_where_to_grant() {
        let outbound = outbound(&["http://127.0.0.1:8080", "https://*.example.com"]);
        assert!(outbound.checked("http://127.0.0.1:8080/x?y=1").is_ok());
        assert!(outbound.checked("https://api.example.com/v1").is_ok());
        let refused = outbound.checked("http://127.0.0.1:9/").unwrap_err();
        let sentence = refused.to_string();
        assert!(
            sentence.contains("http://127.0.0.1:9 is not allowed for ada/word"),
            "{sentence}"
        );
        assert!(
            sentence.contains("[http] allow = [\"http://127.0.0.1:9\"]"),
            "{sentence}"
        );
        assert!(sentence.contains("_room.toml"), "{sentence}");
        assert!(matches!(
            outbound.checked("ftp://x/"),
            Err(Refused::BadUrl(_))
        ));
        assert!(matches!(
            outbound.checked("/relative"),
            Err(Refused::BadUrl(_))
        ));
    }

    #[test]
    fn a_name_that_resolves_inside_is_refused_unless_it_is_localhost() {
        let at = |text: &str| vec![SocketAddr::new(text.parse().unwrap(), 80)];
        let refused = guard("api.example.com", &at("10.0.0.5")).unwrap_err();
        assert_eq!(refused.address, "10.0.0.5".parse::<IpAddr>().unwrap());
        assert!(guard("rebind.example", &at("127.0.0.1")).is_err());
        assert!(guard("api.example.com", &at("93.184.216.34")).is_ok());
        assert!(guard("localhost", &at("127.0.0.1")).is_ok());
        let mixed = [at("93.184.216.34"), at("169.254.169.254")].concat();
        assert!(guard("metadata.example", &mixed).is_err());
    }

    #[tokio::test]
    async fn each_call_has_its_own_deadline_and_counts_and_refusals_count() {
        let mut outbound = outbound(&[]);
        outbound.deadline = Instant::now() - Duration::from_secs(1);
        outbound.usage.requests = 7;
        outbound.start_call(Duration::from_secs(60));
        assert!(outbound.deadline > Instant::now() + Duration::from_secs(50));
        assert_eq!(outbound.usage, OutboundUsage::default());
        let request = || Request {
            method: "GET".into(),
            url: "http://127.0.0.1:9/".into(),
            headers: Vec::new(),
            body: None,
            timeout: None,
            follow_redirects: true,
        };
        for _ in 0..OutboundLimits::default().max_requests {
            let refused = outbound.send(request()).await.err().expect("refused");
            assert!(matches!(refused, Refused::NotAllowed { .. }), "{refused}");
        }
        let refused = outbound.send(request()).await.err().expect("refused");
        assert!(matches!(refused, Refused::TooMany(_)), "{refused}");
    }
}
