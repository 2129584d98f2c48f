//! `GET /metrics`: the host's numbers in the Prometheus text format
//! (OpenMetrics 1.0), encoded by `prometheus-client` from what the host
//! already keeps. Nothing here counts anything: each scrape reads the call
//! ledger (`registry/ledger.rs`, the one bookkeeping the dashboard reads
//! too), the plugins report and the executor's slots.
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
//! | `toolhost_tools` | | tools served |
//! | `toolhost_executor_slots` | | how many calls may run guest code at once |
//! | `toolhost_executor_slots_in_use` | | how many do now |
//! | `toolhost_build_info` | version | 1 |
//!
//! Label values are bounded: a call to a name that is not a served tool
//! counts with `tool=""` (Prometheus reads an empty label as absent), so
//! a typo never becomes a series. The route sits behind the same guard as
//! the API, needing `--metrics-role` (the scrape-only `metrics` role by
//! default); it is open when no tokens are configured.

use std::sync::Arc;

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

use crate::registry::Registry;
use crate::registry::ledger::BUCKETS;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(crate) fn router(registry: Arc<Registry>) -> Router {
    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register(
        "toolhost_build",
        "The running toolhost",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
    );
    metrics.register_collector(Box::new(HostCollector { registry }));
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(metrics))
}

async fn scrape(State(metrics): State<Arc<prometheus_client::registry::Registry>>) -> Response {
    let mut body = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut body, &metrics) {
        tracing::warn!(%error, "cannot encode the metrics");
    }
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        body,
    )
        .into_response()
}

/// Reads the host's own state on every scrape.
struct HostCollector {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for HostCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostCollector")
    }
}

/// A histogram read out of the ledger: cumulative counts per bound.
struct LedgerHistogram<'a> {
    cumulative: &'a [u64],
    sum_seconds: f64,
}

impl EncodeMetric for LedgerHistogram<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let count = self.cumulative.last().copied().unwrap_or(0);
        // The encoder takes per-bucket counts and sums them itself.
        let mut previous = 0;
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.cumulative.iter().map(|&running| {
                let own = running - previous;
                previous = running;
                own
            }))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.sum_seconds, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl Collector for HostCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let activity = self.registry.ledger().activity();

        let mut calls = encoder.encode_descriptor(
            "toolhost_calls",
            "Tool calls, by tool, plugin and outcome (ok or the error code)",
            None,
            MetricType::Counter,
        )?;
        for tool in &activity {
            for (outcome, count) in &tool.outcomes {
                let labels = labels(&tool.tool, &tool.plugin, outcome);
                calls
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, f64>(count, None)?;
            }
        }

        let mut durations = encoder.encode_descriptor(
            "toolhost_call_duration_seconds",
            "How long tool calls took, from the front's request to its answer",
            None,
            MetricType::Histogram,
        )?;
        for tool in &activity {
            for histogram in &tool.histograms {
                let labels = labels(&tool.tool, &tool.plugin, &histogram.outcome);
                LedgerHistogram {
                    cumulative: &histogram.cumulative,
                    sum_seconds: histogram.sum_seconds,
                }
                .encode(durations.encode_family(&labels)?)?;
            }
        }

        // What the calls whose plugin code ran used: summed CPU time and
        // fuel, and the largest peak memory of one call.
        for (name, help, metric_type) in [
            (
                "toolhost_call_cpu_seconds",
                "Guest CPU time used by tool calls",
                MetricType::Counter,
            ),
            (
                "toolhost_call_fuel",
                "Fuel (WebAssembly work units) burned by tool calls",
                MetricType::Counter,
            ),
            (
                "toolhost_call_peak_memory_bytes",
                "The largest memory one tool call reached (memories and tables)",
                MetricType::Gauge,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for tool in &activity {
                for histogram in &tool.histograms {
                    let labels = labels(&tool.tool, &tool.plugin, &histogram.outcome);
                    let metric = family.encode_family(&labels)?;
                    match name {
                        "toolhost_call_cpu_seconds" => {
                            ConstCounter::new(histogram.cpu_seconds).encode(metric)?
                        }
                        "toolhost_call_fuel" => ConstCounter::new(histogram.fuel).encode(metric)?,
                        _ => ConstGauge::new(histogram.peak_memory_bytes as i64).encode(metric)?,
                    }
                }
            }
        }

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

        let runtime = self.registry.runtime();
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
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

fn labels<'a>(tool: &'a str, plugin: &'a str, outcome: &'a str) -> [(&'static str, &'a str); 3] {
    [("tool", tool), ("plugin", plugin), ("outcome", outcome)]
}
