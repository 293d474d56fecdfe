//! OpenTelemetry export (feature `otel`): the spans the library already
//! names after the GenAI semantic conventions (`turn`, `chat`,
//! `execute_tool`, with `gen_ai.*` attributes) sent to a collector over
//! OTLP/HTTP (protobuf) with reqwest — no gRPC stack.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// Spans batched and sent to `endpoint`'s `/v1/traces` by a background
/// thread, as `service` (the binary's name). Shut the provider down at
/// exit: it sends what is left.
///
/// # Errors
/// When the exporter can't be built; the message says why.
pub(crate) fn exporter(endpoint: &str, service: &str) -> Result<SdkTracerProvider, String> {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    // The blocking client runs its own runtime; it is built (and later
    // dropped) away from the caller's.
    let built = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // For an https:// collector, as every other client here.
                let _ = rustls::crypto::ring::default_provider().install_default();
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url.clone())
                    .with_timeout(Duration::from_secs(10))
                    .build()
            })
            .join()
    });
    let exporter = match built {
        Ok(Ok(exporter)) => exporter,
        Ok(Err(error)) => return Err(format!("could not export traces to {url}: {error}")),
        Err(_) => return Err(format!("could not export traces to {url}")),
    };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build())
}

/// The tracing layer that turns spans into OpenTelemetry spans for
/// `provider`.
pub(crate) fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("ferrobot"))
}
