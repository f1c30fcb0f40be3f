//! OpenTelemetry export (feature `otel`): agentry's spans are `tracing` spans, and this layer sends them to an
//! OpenTelemetry tracer: each model call (`chat`, with the GenAI conventions' attributes) and each run (`action`,
//! with `gen_ai.operation.name = execute_tool` and `gen_ai.tool.name`).
//!
//! ```ignore
//! use tracing_subscriber::layer::SubscriberExt;
//! let subscriber = tracing_subscriber::registry().with(agentry_llm::otel::layer().with_tracer(tracer));
//! tracing::subscriber::set_global_default(subscriber)?;
//! ```

pub use tracing_opentelemetry::{OpenTelemetryLayer, layer};
