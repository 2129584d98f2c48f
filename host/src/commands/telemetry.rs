//! OpenTelemetry traces, exported by OTLP when the standard variables ask
//! for it: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), with `OTEL_EXPORTER_OTLP_PROTOCOL`
//! `http/protobuf` (the default) or `http/json`, and the exporter's other
//! standard variables (headers, timeout, `OTEL_BSP_*` batching). Without an
//! endpoint there is no exporter and no OpenTelemetry layer at all: the
//! spans below `call` stay at `debug` and cost nothing.
//!
//! Each call is one trace branch: the front's span (continuing an incoming
//! W3C `traceparent`, `ops/trace.rs`), then `call` (the invoke), then
//! `instantiate`, `guest` and `normalise` (debug spans the log output never
//! shows), exported through `tracing-opentelemetry`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;

/// Keeps the exporter alive; dropping it sends what is still buffered.
pub(super) struct Traces(SdkTracerProvider);

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.0.shutdown() {
            eprintln!("toolhost: sending the last traces failed: {error}");
        }
    }
}

/// A layer of the subscriber, boxed.
type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync>;

/// The OTLP layer and its keeper, when an endpoint is configured.
pub(super) fn otlp_layer<S>() -> anyhow::Result<Option<(BoxedLayer<S>, Traces)>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
    if !configured {
        return Ok(None);
    }
    let protocol = match std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
    {
        Err(_) | Ok("http/protobuf") => Protocol::HttpBinary,
        Ok("http/json") => Protocol::HttpJson,
        Ok(other) => anyhow::bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported: use http/protobuf or http/json"
        ),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("toolhost")
                .build(),
        )
        .build();
    let tracer = provider.tracer("toolhost");
    // toolhost's own spans, the debug ones included; never a library's.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target("toolhost", tracing::Level::DEBUG))
        .boxed();
    Ok(Some((layer, Traces(provider))))
}
