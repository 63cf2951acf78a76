//! Extractors whose rejections are [`ApiError`]s: a JSON body that reports
//! where decoding failed, UUID path ids that answer 404, and the
//! idempotency key header.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use mcq_client::FieldProblem;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::AppState;
use crate::problem::ApiError;

/// A JSON request body. Unlike `axum::Json`, every failure is a problem
/// document, and type errors carry the JSON pointer of the bad value.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let limit = state.config.max_body_bytes;
        let bytes = Bytes::from_request(req, state).await.map_err(|err| body_error(&err, limit))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::Malformed { detail: "the request body is empty".into(), errors: vec![] });
        }
        decode(&bytes).map(JsonBody)
    }
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn body_error(err: &BytesRejection, limit: usize) -> ApiError {
    if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::BodyTooLarge { limit }
    } else {
        ApiError::Malformed { detail: "the request body could not be read".into(), errors: vec![] }
    }
}

/// Decodes `bytes` as `T`, naming the JSON pointer of the value that failed.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let pointer = pointer(err.path());
        let inner = err.into_inner();
        let errors = if inner.is_data() { vec![FieldProblem { pointer, detail: inner.to_string() }] } else { vec![] };
        ApiError::Malformed { detail: format!("invalid JSON: {inner}"), errors }
    })?;
    // Trailing data after the document is malformed too.
    deserializer
        .end()
        .map_err(|err| ApiError::Malformed { detail: format!("invalid JSON: {err}"), errors: vec![] })?;
    Ok(value)
}

/// An RFC 6901 pointer for a serde path.
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        out.push('/');
        match segment {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Unknown => out.push('-'),
        }
    }
    out
}

/// Parses a path id; anything that is not a UUID is an unknown id (404).
pub(crate) fn parse_id(raw: &str, what: &'static str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound { what, id: truncate(raw) })
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
        let Some(value) = parts.headers.get(mcq_client::IDEMPOTENCY_KEY) else {
            return Ok(IdempotencyHeader(None));
        };
        let bad = || ApiError::BadParameter("Idempotency-Key must be 1 to 255 visible ASCII characters".into());
        let key = value.to_str().map_err(|_| bad())?;
        if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad());
        }
        Ok(IdempotencyHeader(Some(key.to_owned())))
    }
}
