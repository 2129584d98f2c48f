//! `GET /metrics`: the host's numbers in OpenMetrics 1.0 for a client that
//! asks for it (`Accept: application/openmetrics-text`, as Prometheus
//! does), else in the classic Prometheus text format (0.0.4), which every
//! other parser reads; encoded by `prometheus-client` from what the host
//! already keeps. Nothing here counts anything: each scrape reads the call
//! ledger (`call/ledger.rs`, the one bookkeeping the dashboard reads
//! too), the load counts (`registry/load_counts.rs`), the plugins report, the
//! executor's slots, the listener's connections and rmcp's sessions.
//!
//! Names follow Prometheus conventions: a `toolhost_` prefix, base units
//! and `_total` counters.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `toolhost_calls_total` | tool, plugin, outcome | calls; outcome is `ok` or the error code |
//! | `toolhost_call_duration_seconds` | tool, plugin, outcome | histogram, 100 µs to 30 s |
//! | `toolhost_call_cpu_seconds_total` | tool, plugin, outcome | guest CPU time of the calls whose plugin code ran |
//! | `toolhost_call_fuel_total` | tool, plugin, outcome | fuel those calls burned |
//! | `toolhost_call_peak_memory_bytes` | tool, plugin, outcome | the largest memory one call reached |
//! | `toolhost_plugin_state` | plugin, state | 1 for each plugin file's state (loaded, rejected, compiling) |
//! | `toolhost_plugin_rejections_total`, `…_cache_hits_total`, `…_cache_misses_total` | plugin | versions refused; loaded from the compile cache; compiled |
//! | `toolhost_plugin_compile_seconds` | plugin, code, phase | the last load (`phase="load"`, `code` = the code it produced) and background optimise (`phase="optimise"`) |
//! | `toolhost_load_events_total` | kind | load outcomes (reload events): compiling, loaded, replaced, rejected, removed, optimised |
//! | `toolhost_busy_refusals_total` | | calls refused as BUSY |
//! | `toolhost_tools` | | tools served |
//! | `toolhost_executor_slots` | | how many calls may run guest code at once |
//! | `toolhost_executor_slots_in_use` | | how many do now |
//! | `toolhost_executor_calls_waiting` | | calls waiting for a slot |
//! | `toolhost_http_connections` | | open HTTP connections |
//! | `toolhost_mcp_sessions` | | open MCP sessions |
//! | `toolhost_spare_instances_used_total` | | calls of large plugins served by a fresh instance made ahead of them |
//! | `toolhost_pool_slots_trimmed_total` | | unused pool memory slots whose pages were given back once no call had run for 5 s |
//! | `toolhost_instances_held` | | instances held between calls over every plugin: spares made ahead or being made, ones a policy's `reuse_instance` keeps, large plugins' ones being torn down |
//! | `toolhost_image_bytes` | | bytes all Python sources' images hold (`runtime/snapshot/`), shared pieces once |
//! | `toolhost_mcp_stateless_fast_total` | | lone stateless `tools/call` and `tools/list` answered by the MCP front's fast path |
//! | `toolhost_build_info` | version | 1 |
//!
//! Label values are bounded: a call to a name that is not a served tool
//! counts with `tool=""` (Prometheus reads an empty label as absent), so
//! a typo never becomes a series. The route sits behind the same guard as
//! the API, needing `--metrics-role` (the scrape-only `metrics` role by
//! default); it is open when no tokens are configured.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;

use crate::call::Calls;
use crate::call::ledger::{BUCKETS, OutcomeHistogram, ToolActivity};
use crate::registry::Registry;
use crate::registry::load_counts::PluginLoads;
use crate::runtime::Tier;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Numbers only the HTTP front knows, read at scrape time.
pub(crate) struct HttpGauges {
    /// Open HTTP connections (the listener counts them).
    pub(crate) connections: Arc<AtomicUsize>,
    /// How many MCP sessions are open (the MCP front knows; `None` in the
    /// instant one is being added or removed).
    pub(crate) sessions: Box<dyn Fn() -> Option<usize> + Send + Sync>,
    /// How many lone stateless MCP requests the fast path answered
    /// (`front/mcp/fast/`), without rmcp's per-request service.
    pub(crate) fast_answers: Box<dyn Fn() -> u64 + Send + Sync>,
}

pub(crate) fn router(registry: Arc<Registry>, calls: Arc<Calls>, http: HttpGauges) -> Router {
    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register(
        "toolhost_build",
        "The running toolhost",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
    );
    metrics.register_collector(Box::new(HostCollector {
        registry,
        calls,
        http,
    }));
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(metrics))
}

async fn scrape(
    State(metrics): State<Arc<prometheus_client::registry::Registry>>,
    requester: Option<axum::Extension<crate::edge::guard::Requester>>,
    headers: axum::http::HeaderMap,
) -> Response {
    // The metrics name every plugin and tool: someone limited to a tool
    // set does not read them (a scrape token has no set).
    if let Some(axum::Extension(requester)) = &requester
        && requester.has_a_set()
    {
        return crate::call::envelope::Envelope::host_error(
            crate::call::errors::ErrorCode::Forbidden,
            "/metrics names every plugin and tool, and this token sees only its tool set: \
             scrape with a token without `tools` (a `metrics` role)",
            None,
        )
        .into_response();
    }
    let mut body = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut body, &metrics) {
        tracing::warn!(%error, "cannot encode the metrics");
    }
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    let (kind, body) = if openmetrics {
        (OPENMETRICS, body)
    } else {
        (CLASSIC, classic(&body))
    };
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
        body,
    )
        .into_response()
}

/// OpenMetrics text as the classic Prometheus text format: a counter's
/// family is named as its samples are (`x_total`), an info metric is a
/// gauge (`x_info`), `unknown` is `untyped`, and no `# UNIT` or `# EOF`.
fn classic(openmetrics: &str) -> String {
    let renamed: std::collections::HashMap<&str, (String, &str)> = openmetrics
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("# TYPE ")?.split(' ');
            let (name, kind) = (words.next()?, words.next()?);
            Some(match kind {
                "counter" => (name, (format!("{name}_total"), "counter")),
                "info" => (name, (format!("{name}_info"), "gauge")),
                "unknown" => (name, (name.to_string(), "untyped")),
                other => (name, (name.to_string(), other)),
            })
        })
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let described = ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let (family, kind) = renamed.get(name)?;
            Some(match prefix {
                "# TYPE " => format!("# TYPE {family} {kind}"),
                _ => format!("# HELP {family} {tail}"),
            })
        });
        out.push_str(described.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// Reads the host's own state on every scrape.
struct HostCollector {
    registry: Arc<Registry>,
    calls: Arc<Calls>,
    http: HttpGauges,
}

impl std::fmt::Debug for HostCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostCollector")
    }
}

/// One outcome's durations, as a Prometheus histogram.
struct LedgerHistogram<'a>(&'a OutcomeHistogram);

impl EncodeMetric for LedgerHistogram<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // The ledger's counts are cumulative; the encoder takes each
        // bucket's own count and sums them itself.
        let mut previous = 0;
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.0.cumulative.iter().map(|&running| {
                let own = running - previous;
                previous = running;
                own
            }))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.0.sum_seconds, self.0.calls(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl Collector for HostCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let activity = self.calls.ledger().activity();

        per_outcome(
            &mut encoder,
            &activity,
            (
                "toolhost_calls",
                "Tool calls, by tool, plugin and outcome (ok or the error code)",
                MetricType::Counter,
            ),
            |histogram, metric| ConstCounter::new(histogram.calls()).encode(metric),
        )?;
        // Per tool, plugin and outcome: durations, and what the calls
        // whose plugin code ran used (summed CPU time and fuel, the
        // largest peak memory of one call).
        per_outcome(
            &mut encoder,
            &activity,
            (
                "toolhost_call_duration_seconds",
                "How long tool calls took, from the front's request to its answer",
                MetricType::Histogram,
            ),
            |histogram, metric| LedgerHistogram(histogram).encode(metric),
        )?;
        per_outcome(
            &mut encoder,
            &activity,
            (
                "toolhost_call_cpu_seconds",
                "Guest CPU time used by tool calls",
                MetricType::Counter,
            ),
            |histogram, metric| ConstCounter::new(histogram.cpu_seconds).encode(metric),
        )?;
        per_outcome(
            &mut encoder,
            &activity,
            (
                "toolhost_call_fuel",
                "Fuel (WebAssembly work units) burned by tool calls",
                MetricType::Counter,
            ),
            |histogram, metric| ConstCounter::new(histogram.fuel).encode(metric),
        )?;
        per_outcome(
            &mut encoder,
            &activity,
            (
                "toolhost_call_peak_memory_bytes",
                "The largest memory one tool call reached (memories and tables)",
                MetricType::Gauge,
            ),
            |histogram, metric| ConstGauge::new(histogram.peak_memory_bytes as i64).encode(metric),
        )?;

        let report = self.registry.plugins_report();
        let mut states = encoder.encode_descriptor(
            "toolhost_plugin_state",
            "1 for each plugin file's state: loaded, rejected or compiling",
            None,
            MetricType::Gauge,
        )?;
        for plugin in &report.plugins {
            let state = if plugin.compiling.is_some() {
                "compiling"
            } else {
                plugin.state.as_str()
            };
            let labels = [("plugin", plugin.id.as_str()), ("state", state)];
            ConstGauge::new(1i64).encode(states.encode_family(&labels)?)?;
        }

        let (events, plugins) = self.registry.loads().read();
        let mut family = encoder.encode_descriptor(
            "toolhost_load_events",
            "Load outcomes told, by kind: compiling, loaded, replaced, rejected, removed, optimised",
            None,
            MetricType::Counter,
        )?;
        for (kind, count) in &events {
            ConstCounter::new(*count).encode(family.encode_family(&[("kind", *kind)])?)?;
        }
        for (name, help, pick) in [
            (
                "toolhost_plugin_rejections",
                "Versions of the plugin file the loader refused",
                (|p: &PluginLoads| p.rejections) as fn(&PluginLoads) -> u64,
            ),
            (
                "toolhost_plugin_cache_hits",
                "Versions whose compiled code came from the cache",
                |p: &PluginLoads| p.cache_hits,
            ),
            (
                "toolhost_plugin_cache_misses",
                "Versions that were compiled",
                |p: &PluginLoads| p.cache_misses,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (plugin, loads) in &plugins {
                ConstCounter::new(pick(loads))
                    .encode(family.encode_family(&[("plugin", plugin.as_str())])?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "toolhost_plugin_compile_seconds",
            "How long the plugin's last load took (code=baseline or optimised: the code it produced, compiled or from the cache), and its background compile of optimised code (phase=optimise)",
            None,
            MetricType::Gauge,
        )?;
        for (plugin, loads) in &plugins {
            if let Some((tier, seconds)) = loads.last_load {
                let labels = [
                    ("plugin", plugin.as_str()),
                    ("code", tier.code_name()),
                    ("phase", "load"),
                ];
                ConstGauge::new(seconds).encode(family.encode_family(&labels)?)?;
            }
            if let Some(seconds) = loads.last_optimise_seconds {
                let labels = [
                    ("plugin", plugin.as_str()),
                    ("code", Tier::Optimized.code_name()),
                    ("phase", "optimise"),
                ];
                ConstGauge::new(seconds).encode(family.encode_family(&labels)?)?;
            }
        }

        let busy: u64 = activity
            .iter()
            .filter_map(|tool| tool.outcomes.get("BUSY"))
            .sum();
        let busy_counter = ConstCounter::new(busy);
        busy_counter.encode(encoder.encode_descriptor(
            "toolhost_busy_refusals",
            "Calls refused as BUSY (also in toolhost_calls_total{outcome=\"BUSY\"})",
            None,
            busy_counter.metric_type(),
        )?)?;

        let runtime = self.registry.runtime();
        for (name, help, value) in [
            (
                "toolhost_mcp_stateless_fast",
                "Lone stateless MCP requests (tools/call, tools/list) answered without rmcp's per-request service",
                (self.http.fast_answers)(),
            ),
            (
                "toolhost_spare_instances_used",
                "Calls of large plugins served by a fresh instance made ahead of them",
                runtime.spares_used(),
            ),
            (
                "toolhost_pool_slots_trimmed",
                "Unused instance-pool memory slots whose pages were given back, once no call had run for 5 s",
                runtime.slots_trimmed(),
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }

        let sessions = (self.http.sessions)();
        for (name, help, value) in [
            (
                "toolhost_tools",
                "Tools served",
                self.registry.snapshot().tools().count() as i64,
            ),
            (
                "toolhost_executor_slots",
                "How many calls may run guest code at once (--max-calls)",
                runtime.max_calls() as i64,
            ),
            (
                "toolhost_executor_slots_in_use",
                "How many calls run guest code now",
                runtime.calls_running() as i64,
            ),
            (
                "toolhost_executor_calls_waiting",
                "How many calls wait for an executor slot now",
                runtime.calls_waiting() as i64,
            ),
            (
                "toolhost_instances_held",
                "Instances held between calls over every plugin: spares made ahead or being made, ones a reuse_instance policy keeps, large plugins' ones being torn down",
                runtime.instances_held() as i64,
            ),
            (
                "toolhost_image_bytes",
                "Bytes all Python sources' images hold (what their modules left, laid over each call's instance), pieces shared by several images counted once",
                runtime.image_bytes() as i64,
            ),
            (
                "toolhost_http_connections",
                "Open HTTP connections",
                self.http.connections.load(Ordering::Relaxed) as i64,
            ),
            (
                "toolhost_mcp_sessions",
                "Open MCP sessions (Streamable HTTP)",
                sessions.map_or(-1, |count| count as i64),
            ),
        ] {
            if value < 0 {
                continue;
            }
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// One family with a series per tool, plugin and outcome, each encoded
/// from its outcome's ledger entry by `encode`.
fn per_outcome(
    encoder: &mut DescriptorEncoder,
    activity: &[ToolActivity],
    (name, help, metric_type): (&str, &str, MetricType),
    encode: impl Fn(&OutcomeHistogram, MetricEncoder) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for tool in activity {
        for histogram in &tool.histograms {
            let labels = labels(&tool.tool, &tool.plugin, &histogram.outcome);
            encode(histogram, family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

fn labels<'a>(tool: &'a str, plugin: &'a str, outcome: &'a str) -> [(&'static str, &'a str); 3] {
    [("tool", tool), ("plugin", plugin), ("outcome", outcome)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_format_names_families_as_their_samples() {
        let openmetrics = "# HELP toolhost_calls Tool calls.\n# TYPE toolhost_calls counter\n\
             toolhost_calls_total{tool=\"echo\"} 3\n# HELP toolhost_build The running toolhost.\n\
             # TYPE toolhost_build info\ntoolhost_build_info{version=\"0.1.0\"} 1\n\
             # HELP toolhost_tools Tools served.\n# TYPE toolhost_tools gauge\ntoolhost_tools 2\n# EOF\n";
        assert_eq!(
            classic(openmetrics),
            "# HELP toolhost_calls_total Tool calls.\n# TYPE toolhost_calls_total counter\n\
             toolhost_calls_total{tool=\"echo\"} 3\n# HELP toolhost_build_info The running toolhost.\n\
             # TYPE toolhost_build_info gauge\ntoolhost_build_info{version=\"0.1.0\"} 1\n\
             # HELP toolhost_tools Tools served.\n# TYPE toolhost_tools gauge\ntoolhost_tools 2\n"
        );
    }
}
