//! One log line per request at the default level (target `mcq::access`):
//! method, route template, status, latency, tenant, key id and request id.
//! Never the key, never a body, never the raw path (ids of other tenants
//! and hostile bytes stay out of the log; the route template says enough).

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use crate::access::Caller;

/// The header that carries a request's id, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// A request's id: the client's `x-request-id` when it is 1–64 visible
/// ASCII characters, else a new UUID. In the request's extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Gives the request its id, echoes it in the response, and logs the
/// request once it has been answered.
pub(crate) async fn access_log(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| (1..=64).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_owned(), |p| p.as_str().to_owned());
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).await;
    let caller = response.extensions().get::<Caller>();
    tracing::info!(
        target: "mcq::access",
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1e3,
        tenant = %caller.map_or("-", |c| c.tenant_name.as_str()),
        key = %caller.and_then(|c| c.key_id.as_deref()).unwrap_or("-"),
        request_id = %id,
        "request"
    );
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
