//! Reading request bodies within the limit, and discarding what a refused
//! request still sends.
//!
//! Many clients (Python's `http.client`, `requests`, most scripts) write
//! the whole body before they read anything. If the server answers early
//! and closes with unread bytes in its receive buffer, the kernel resets
//! the connection and the client sees a broken pipe instead of the answer.
//! So a body over the limit, or one sent with a request refused before
//! its body mattered (401, 403, 404, 405, 415, 421, 431, …), is read to its
//! end and thrown away — up to the body limit plus [`DRAIN_BYTES`], within
//! the request timeout — before the answer leaves.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt as _;

use crate::problem::ApiError;

/// Most bytes read and discarded from a refused body beyond its limit.
/// Beyond this the connection is closed with the answer, which a client
/// still writing may not receive.
pub(crate) const DRAIN_BYTES: u64 = 64 * 1024 * 1024;

/// The declared `Content-Length`, if any and well formed.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// True when the client waits for `100 Continue` before sending its body:
/// then an early answer reaches it without any draining.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// Most bytes read and discarded from the body of a request refused with
/// a body limit of `limit`: the limit itself plus [`DRAIN_BYTES`], for a
/// 413 and for every refusal before the body mattered alike.
pub(crate) fn drain_bound(limit: usize) -> u64 {
    u64::try_from(limit)
        .unwrap_or(u64::MAX)
        .saturating_add(DRAIN_BYTES)
}

/// Reads and drops the body of a refused request, at most `bound` bytes
/// (see the module) — unless the client waits for `100 Continue`, which
/// reads the answer at once, or declares a body past `bound`, which is not
/// worth reading at all.
pub(crate) async fn drain_refused(headers: &HeaderMap, body: Body, bound: u64) {
    if expects_continue(headers) || content_length(headers).is_some_and(|n| n > bound) {
        return;
    }
    discard(body, bound).await;
}

/// Reads the whole body if it holds at most `limit` bytes; otherwise
/// discards it (see the module) and answers [`ApiError::BodyTooLarge`].
pub(crate) async fn read_limited(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let too_large = ApiError::BodyTooLarge { limit };
    let declared = content_length(headers);
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    if declared.is_some_and(|n| n > limit_u64) {
        drain_refused(headers, body, drain_bound(limit)).await;
        return Err(too_large);
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit));
    let mut collected = Vec::with_capacity(capacity.min(limit));
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(ApiError::Malformed {
                detail: "the request body could not be read".into(),
                errors: vec![],
            });
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if collected.len() + data.len() > limit {
            discard(body, DRAIN_BYTES).await;
            return Err(too_large);
        }
        collected.extend_from_slice(&data);
    }
    Ok(Bytes::from(collected))
}

/// Reads and drops the rest of `body`, at most `bound` bytes of it.
async fn discard(mut body: Body, bound: u64) {
    let mut seen: u64 = 0;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len() as u64;
            if seen > bound {
                return;
            }
        }
    }
}
