//! Limits on the request head, answered as problem documents.
//!
//! hyper refuses a head it cannot parse or buffer with a bare status line
//! (400, 414, 431) before any of our code runs. These limits sit well below
//! hyper's, so every head of a plausible size that is still too large is
//! refused here, with the same envelope as every other error; only heads
//! past hyper's own limits get its bodyless answer (docs/api.md lists them).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use crate::body::drain_refused;
use crate::problem::ApiError;

/// Longest request target (path and query) in bytes; hyper's own limit
/// is 64 KiB.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields.
pub(crate) const MAX_HEADERS: usize = 100;
/// Most bytes of header names and values together.
pub(crate) const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Middleware: refuses an oversized head before routing, after draining
/// up to `drain` bytes of its body.
pub(crate) async fn check(State(drain): State<u64>, request: Request, next: Next) -> Response {
    let error = if request.uri().to_string().len() > MAX_URI_BYTES {
        Some(ApiError::UriTooLong {
            limit: MAX_URI_BYTES,
        })
    } else {
        let headers = request.headers();
        let bytes: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum();
        (headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES).then_some(
            ApiError::HeadersTooLarge {
                max_fields: MAX_HEADERS,
                max_bytes: MAX_HEADER_BYTES,
            },
        )
    };
    match error {
        Some(error) => {
            let (parts, body) = request.into_parts();
            drain_refused(&parts.headers, body, drain).await;
            error.into_response()
        }
        None => next.run(request).await,
    }
}
