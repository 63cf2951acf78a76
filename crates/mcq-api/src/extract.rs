//! Extractors whose rejections are [`ApiError`]s: a JSON body that reports
//! where decoding failed, UUID path ids that answer 404, and the
//! idempotency key header.

use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use mcq_api_types::{BatchRequest, FieldProblem, IDEMPOTENCY_KEY};
use mcq_kernel::Spec;
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use crate::AppState;
use crate::problem::ApiError;

/// A JSON request body. Unlike `axum::Json`, every failure is a problem
/// document, and type errors carry the JSON pointer of the bad value.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

/// What the top level of a body must look like beyond what serde checks:
/// serde accepts a JSON array for a struct (fields by position), which
/// would turn `[]` into an all-defaults spec.
pub(crate) trait Shape {
    /// The first value of the wrong kind, as a field problem.
    fn check(value: &Value) -> Result<(), FieldProblem>;
}

fn expect_object(value: &Value, pointer: String) -> Result<(), FieldProblem> {
    if value.is_object() {
        Ok(())
    } else {
        Err(FieldProblem {
            pointer,
            detail: "expected a JSON object (a pricing spec)".into(),
        })
    }
}

impl Shape for Spec {
    fn check(value: &Value) -> Result<(), FieldProblem> {
        expect_object(value, String::new())
    }
}

impl Shape for BatchRequest {
    fn check(value: &Value) -> Result<(), FieldProblem> {
        expect_object(value, String::new())?;
        if let Some(Value::Array(jobs)) = value.get("jobs") {
            for (i, job) in jobs.iter().enumerate() {
                expect_object(job, format!("/jobs/{i}"))?;
            }
        }
        Ok(())
    }
}

impl<T: DeserializeOwned + Shape> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let limit = state.config.max_body_bytes;
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|err| body_error(&err, limit))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::Malformed {
                detail: "the request body is empty".into(),
                errors: vec![],
            });
        }
        decode(&bytes).map(JsonBody)
    }
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
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

fn body_error(err: &BytesRejection, limit: usize) -> ApiError {
    if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::BodyTooLarge { limit }
    } else {
        ApiError::Malformed {
            detail: "the request body could not be read".into(),
            errors: vec![],
        }
    }
}

/// Decodes `bytes` as `T`, naming the JSON pointer of the value that failed.
pub(crate) fn decode<T: DeserializeOwned + Shape>(bytes: &[u8]) -> Result<T, ApiError> {
    // Syntax first (this also rejects trailing data), then shape, then types.
    let value: Value = serde_json::from_slice(bytes).map_err(|err| ApiError::Malformed {
        detail: format!("invalid JSON: {err}"),
        errors: vec![],
    })?;
    T::check(&value).map_err(|problem| ApiError::Malformed {
        detail: format!(
            "unexpected JSON shape at '{}': {}",
            problem.pointer, problem.detail
        ),
        errors: vec![problem],
    })?;
    serde_path_to_error::deserialize(value).map_err(|err| {
        let pointer = pointer(err.path());
        let inner = err.into_inner();
        ApiError::Malformed {
            detail: format!("invalid request: {inner}"),
            errors: vec![FieldProblem {
                pointer,
                detail: inner.to_string(),
            }],
        }
    })
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
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound {
        what,
        id: truncate(raw),
    })
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
