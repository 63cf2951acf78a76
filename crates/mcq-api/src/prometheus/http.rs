//! Requests counted by method, route template and status, and timed.
//!
//! Labels are bounded whatever clients send: the route is the template
//! the router matched (never the raw path), unknown methods are `other`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use mcq_metrics::{HTTP_DURATION, HTTP_REQUESTS};
use metrics::SharedString;

/// The route label of a request no route matched.
const NO_ROUTE: &str = "(no route)";

/// Counts and times the request once it has been answered.
pub(crate) async fn record(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(SharedString::const_str(NO_ROUTE), |p| {
            SharedString::from(p.as_str().to_owned())
        });
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(HTTP_DURATION, "method" => method, "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status)
        .increment(1);
    response
}

/// The method as a label: the standard ones by name, others as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::TRACE), "other");
        let invented = Method::from_bytes(b"BREW").expect("a token");
        assert_eq!(method_label(&invented), "other");
    }
}
