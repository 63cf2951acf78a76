//! `mcq worker --metrics-listen ADDR`: the worker's metrics at
//! `GET /metrics` in the Prometheus text format, and nothing else.
//!
//! A worker exports what it does (claims, completions, refusals, pickup
//! and compute times); the queue-wide gauges come from `mcq serve`, so a
//! fleet of workers adds no reads to the database however often it is
//! scraped. The address serves no keys: bind it where only Prometheus
//! reaches it.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

/// Binds `addr` and serves `/metrics` on the current runtime until it ends.
pub(crate) async fn start(addr: SocketAddr) -> anyhow::Result<()> {
    let exporter = mcq_metrics::install();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} for the metrics"))?;
    let addr = listener
        .local_addr()
        .context("reading the metrics' address")?;
    let router = Router::new().route(
        "/metrics",
        get(move || async move {
            (
                [(header::CONTENT_TYPE, mcq_metrics::CONTENT_TYPE)],
                exporter.render(),
            )
                .into_response()
        }),
    );
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::error!(error = %err, "the metrics server stopped");
        }
    });
    tracing::info!("metrics listening on http://{addr}/metrics");
    Ok(())
}
