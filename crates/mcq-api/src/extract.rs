//! Extractors whose rejections are [`ApiError`]s: a JSON body that reports
//! where decoding failed, UUID path ids that answer 404, and the
//! idempotency key header.

use axum::extract::Path;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use mcq_api_types::IDEMPOTENCY_KEY;
use uuid::Uuid;

use crate::AppState;
use crate::body::{drain_bound, drain_refused, read_limited};
use crate::decode::{Decode, decode};
use crate::problem::ApiError;

/// Bodies up to this size are decoded on the async thread: moving them to
/// a blocking thread would cost more than decoding them.
const INLINE_DECODE_BYTES: usize = 64 * 1024;

/// A JSON request body. Unlike `axum::Json`, every failure is a problem
/// document, type errors carry the JSON pointer of the bad value, and a
/// batch is refused at its first job past the limit (see [`decode`]).
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: Decode> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        if !is_json(&parts.headers) {
            drain_refused(
                &parts.headers,
                body,
                drain_bound(state.config.max_body_bytes),
            )
            .await;
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = read_limited(&parts.headers, body, state.config.max_body_bytes).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::Malformed {
                detail: "the request body is empty".into(),
                errors: vec![],
            });
        }
        let max_jobs = state.config.max_batch_jobs;
        if bytes.len() <= INLINE_DECODE_BYTES {
            return decode(&bytes, max_jobs).map(JsonBody);
        }
        // Decoding megabytes takes tens of milliseconds of CPU: off the
        // async threads, so that probes and long polls are not held up.
        tokio::task::spawn_blocking(move || decode(&bytes, max_jobs).map(JsonBody))
            .await
            .map_err(|_| ApiError::Internal)?
    }
}

/// Whether the request declares a JSON body (`application/json` or `application/…+json`).
pub(crate) fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The `{id}` path segment as sent. A segment that does not even decode
/// (invalid percent-encoding or UTF-8) names nothing that exists: 404.
#[derive(Debug)]
pub(crate) struct RawId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for RawId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(raw)) => Ok(RawId(raw)),
            Err(_) => Err(ApiError::NotFound {
                what: "job or batch",
                id: "(undecodable)".into(),
            }),
        }
    }
}

/// Parses a path id; anything that is not a UUID is an unknown id (404).
pub(crate) fn parse_id(raw: &str, what: &'static str) -> Result<Uuid, ApiError> {
    parse_uuid(raw).ok_or_else(|| ApiError::NotFound {
        what,
        id: truncate(raw),
    })
}

/// A UUID in its one accepted spelling: the 36-character hyphenated form
/// (RFC 9562), hex digits in either case. The braced, URN and unhyphenated
/// spellings that `Uuid::parse_str` also reads are refused, so one resource
/// has one URL up to letter case.
pub(crate) fn parse_uuid(raw: &str) -> Option<Uuid> {
    // At this length `parse_str` accepts the hyphenated form only.
    if raw.len() != 36 {
        return None;
    }
    Uuid::parse_str(raw).ok()
}

fn truncate(raw: &str) -> String {
    raw.chars().take(64).collect()
}

/// The optional `Idempotency-Key` header: 1–255 visible ASCII characters.
#[derive(Debug)]
pub(crate) struct IdempotencyHeader(pub(crate) Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(IDEMPOTENCY_KEY) else {
            return Ok(IdempotencyHeader(None));
        };
        let bad = || {
            ApiError::BadParameter(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".into(),
            )
        };
        let key = value.to_str().map_err(|_| bad())?;
        if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad());
        }
        Ok(IdempotencyHeader(Some(key.to_owned())))
    }
}
