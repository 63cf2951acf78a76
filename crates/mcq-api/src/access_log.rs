//! Each request's span and its log line.
//!
//! Everything logged while a request is handled happens inside one span,
//! `request`, carrying the request id, so that a JSON log line (or a text
//! line's prefix) ties every event to the request and to the id its client
//! saw in `x-request-id`. The request ends with one line at the default
//! level (target `mcq::access`): method, route template, status, latency,
//! tenant and key id. Never the key, never a body, never the raw path (ids
//! of other tenants and hostile bytes stay out of the log; the route
//! template says enough).

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;

use crate::access::Caller;

/// The header that carries a request's id, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// A request's id: the client's `x-request-id` when it is 1–64 visible
/// ASCII characters, else a new UUID. In the request's extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Gives the request its id and its span, echoes the id in the response,
/// and logs the request once it has been answered.
pub(crate) async fn access_log(request: Request, next: Next) -> Response {
    let id = request_id(&request);
    // At error level, and with the access log's target, so that the span
    // stays on under any filter that lets the request's events through
    // (`RUST_LOG=warn`, `RUST_LOG=mcq::access=info`): a span a filter
    // turns off takes its request id away from every event inside it.
    let span = tracing::error_span!(target: "mcq::access", "request", request_id = %id);
    let mut response = answer(request, next, id.clone()).instrument(span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The client's id when it is one we may echo and log, else a new one.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| (1..=64).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// Runs the request inside its span and writes its access line.
async fn answer(mut request: Request, next: Next, id: String) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_owned(), |p| p.as_str().to_owned());
    request.extensions_mut().insert(RequestId(id));
    let response = next.run(request).await;
    let caller = response.extensions().get::<Caller>();
    tracing::info!(
        target: "mcq::access",
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1e3,
        tenant = %caller.map_or("-", |c| c.tenant_name.as_str()),
        key = %caller.and_then(|c| c.key_id.as_deref()).unwrap_or("-"),
        "request"
    );
    response
}
