//! The one error type of the API and its RFC 9457 rendering. Every handler,
//! extractor, fallback and middleware answers errors through [`ApiError`],
//! so clients see a single envelope with a stable `type`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcq_api_types::{FieldProblem, PROBLEM_JSON, Problem};
use mcq_queue::StoreError;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON, or not JSON of the expected shape (400).
    #[error("{detail}")]
    Malformed {
        /// What the decoder refused.
        detail: String,
        /// Where, when the decoder knows.
        errors: Vec<FieldProblem>,
    },
    /// A header or query parameter is not acceptable (400).
    #[error("{0}")]
    BadParameter(String),
    /// The body is not declared as JSON (415).
    #[error("expected a JSON body with Content-Type: application/json")]
    UnsupportedMediaType,
    /// The body exceeds the size limit (413).
    #[error(
        "the request body exceeds the body size limit of {limit} bytes \
         (max_body_bytes, mcq serve --max-body-bytes); send less, e.g. split the batch"
    )]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A batch with more jobs than allowed (413). A listed batch stops
    /// decoding at the first job past the limit, so its total is not known;
    /// a sweep's (grid points × repeat) is.
    #[error(
        "{}; the job limit is {limit} jobs per batch (max_batch_jobs, \
         mcq serve --max-batch-jobs): split the batch",
        jobs_asked(.limit, .asked)
    )]
    TooManyJobs {
        /// The configured maximum.
        limit: usize,
        /// The jobs a sweep asks for, when known (`None` past `u64`, or
        /// for a listed batch).
        asked: Option<u64>,
    },
    /// Well-formed specs with invalid values (422).
    #[error("{detail}")]
    InvalidSpec {
        /// Summary.
        detail: String,
        /// Each bad value by JSON pointer.
        errors: Vec<FieldProblem>,
    },
    /// No job or batch with this id, or the id is not a UUID (404).
    #[error("no {what} with id {id}")]
    NotFound {
        /// `job` or `batch`.
        what: &'static str,
        /// The id as given.
        id: String,
    },
    /// No route for this path (404).
    #[error("no endpoint at {0}; see /openapi.json")]
    NoRoute(String),
    /// The route exists but not with this method (405).
    #[error("method not allowed on this endpoint; see /openapi.json")]
    MethodNotAllowed,
    /// A browser sent a state-changing request on behalf of another site (403).
    #[error("state-changing requests from pages of another origin are refused")]
    CrossOrigin,
    /// The request target is longer than the server reads (414).
    #[error("the request URI exceeds {limit} bytes")]
    UriTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// Too many header fields, or too many bytes of them (431).
    #[error("the request headers exceed {max_fields} fields or {max_bytes} bytes")]
    HeadersTooLarge {
        /// Most fields.
        max_fields: usize,
        /// Most bytes of names and values together.
        max_bytes: usize,
    },
    /// The idempotency key was used with a different request (409).
    #[error("the Idempotency-Key was already used with a different request")]
    IdempotencyConflict,
    /// No valid API key where one is needed (401).
    #[error("{detail}")]
    Unauthorized {
        /// What was wrong with the key, or that one is needed.
        detail: String,
    },
    /// The key's role may not do this (403).
    #[error("{detail}")]
    Forbidden {
        /// Which role is needed.
        detail: String,
    },
    /// The Host header names a host this server does not answer to (421).
    #[error("this server does not answer to that Host (see mcq serve --allowed-hosts)")]
    HostNotAllowed,
    /// A state-changing request without a key and without a JSON content
    /// type, as a form on another web site could send (415).
    #[error(
        "a request that changes state needs an API key or Content-Type: application/json \
         (so that other web sites cannot send it)"
    )]
    CrossSiteWrite,
    /// The tenant's quota of queued and running jobs would be exceeded (429).
    #[error(
        "this tenant may have at most {limit} jobs queued or running; {active} are, \
         and this request adds {adding}: try again once some have finished"
    )]
    QuotaExceeded {
        /// The tenant's `max_active_jobs`.
        limit: u64,
        /// Its jobs queued or running now.
        active: u64,
        /// Jobs in the request.
        adding: u64,
    },
    /// The request took longer than the server allows (503).
    #[error("the request timed out; try again")]
    Timeout,
    /// The database cannot be reached (503).
    #[error("the database is unavailable; try again later")]
    Unavailable,
    /// A bug or a database error that is not the client's fault (500).
    #[error("internal error")]
    Internal,
}

/// How many jobs a batch over the job limit asks for, as far as known.
fn jobs_asked(limit: &usize, asked: &Option<u64>) -> String {
    match asked {
        Some(n) => format!("this sweep asks for {n} jobs (grid points × repeat)"),
        None => format!("this batch has more than {limit} jobs"),
    }
}

impl ApiError {
    /// HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Malformed { .. } | ApiError::BadParameter(_) => StatusCode::BAD_REQUEST,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::BodyTooLarge { .. } | ApiError::TooManyJobs { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::InvalidSpec { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound { .. } | ApiError::NoRoute(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::CrossOrigin => StatusCode::FORBIDDEN,
            ApiError::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::IdempotencyConflict => StatusCode::CONFLICT,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::HostNotAllowed => StatusCode::MISDIRECTED_REQUEST,
            ApiError::CrossSiteWrite => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout | ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable problem type (a relative URI) and its title.
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            ApiError::Malformed { .. } => ("/problems/malformed-request", "Malformed request body"),
            ApiError::BadParameter(_) => {
                ("/problems/bad-parameter", "Bad header or query parameter")
            }
            ApiError::UnsupportedMediaType => {
                ("/problems/unsupported-media-type", "Unsupported media type")
            }
            ApiError::BodyTooLarge { .. } => ("/problems/body-too-large", "Request body too large"),
            ApiError::TooManyJobs { .. } => ("/problems/batch-too-large", "Batch too large"),
            ApiError::InvalidSpec { .. } => ("/problems/invalid-spec", "Invalid pricing spec"),
            ApiError::NotFound { .. } => ("/problems/not-found", "Not found"),
            ApiError::NoRoute(_) => ("/problems/no-route", "No such endpoint"),
            ApiError::MethodNotAllowed => ("/problems/method-not-allowed", "Method not allowed"),
            ApiError::CrossOrigin => ("/problems/cross-origin", "Cross-origin request refused"),
            ApiError::UriTooLong { .. } => ("/problems/uri-too-long", "Request URI too long"),
            ApiError::HeadersTooLarge { .. } => {
                ("/problems/headers-too-large", "Request headers too large")
            }
            ApiError::IdempotencyConflict => {
                ("/problems/idempotency-conflict", "Idempotency key conflict")
            }
            ApiError::Unauthorized { .. } => ("/problems/unauthorized", "API key needed"),
            ApiError::Forbidden { .. } => ("/problems/forbidden", "Role not allowed"),
            ApiError::HostNotAllowed => ("/problems/host-not-allowed", "Host not allowed"),
            ApiError::CrossSiteWrite => {
                ("/problems/unsupported-media-type", "Unsupported media type")
            }
            ApiError::QuotaExceeded { .. } => ("/problems/quota-exceeded", "Quota exceeded"),
            ApiError::Timeout => ("/problems/timeout", "Request timed out"),
            ApiError::Unavailable => ("/problems/unavailable", "Service unavailable"),
            ApiError::Internal => ("/problems/internal", "Internal server error"),
        }
    }

    /// The problem document this error renders as.
    pub fn problem(&self) -> Problem {
        let (kind, title) = self.kind();
        let errors = match self {
            ApiError::Malformed { errors, .. } | ApiError::InvalidSpec { errors, .. } => {
                errors.clone()
            }
            _ => Vec::new(),
        };
        Problem {
            kind: kind.to_owned(),
            title: title.to_owned(),
            status: self.status().as_u16(),
            detail: self.to_string(),
            errors,
        }
    }
}

impl From<StoreError> for ApiError {
    /// The boundary where storage errors are logged, once, and made opaque.
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::IdempotencyConflict => ApiError::IdempotencyConflict,
            StoreError::QuotaExceeded {
                limit,
                active,
                adding,
            } => ApiError::QuotaExceeded {
                limit,
                active,
                adding,
            },
            // The handlers validate first, so this only fires if the queue
            // is stricter than the kernel; it is still the client's input.
            StoreError::InvalidSpec { index, message } => ApiError::InvalidSpec {
                detail: format!("job {index}: {message}"),
                errors: Vec::new(),
            },
            err if err.is_unavailable() => {
                tracing::warn!(error = %err, "database unreachable");
                ApiError::Unavailable
            }
            other => {
                tracing::error!(error = %other, "storage error");
                ApiError::Internal
            }
        }
    }
}

/// Seconds a client is asked to wait after a 429 or a 503.
pub(crate) const RETRY_AFTER_SECS: u64 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = (self.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        match self {
            ApiError::Unauthorized { .. } => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"mcq\""),
                );
            }
            ApiError::QuotaExceeded { .. } | ApiError::Timeout | ApiError::Unavailable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::BodyTooLarge { .. } => {
                // What is left of an oversized body may still be arriving.
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_that_are_not_the_clients_fault_are_opaque() {
        for err in [
            StoreError::Corrupt("unknown state \"bogus\" in jobs.state".into()),
            StoreError::Config("lease must be at least 10 ms".into()),
            StoreError::UnsupportedUrl("mysql://secret@db".into()),
        ] {
            let problem = ApiError::from(err).problem();
            assert_eq!(
                (
                    problem.status,
                    problem.kind.as_str(),
                    problem.detail.as_str()
                ),
                (500, "/problems/internal", "internal error")
            );
        }
    }

    #[test]
    fn a_reused_key_and_an_invalid_spec_stay_the_clients_problem() {
        let conflict = ApiError::from(StoreError::IdempotencyConflict).problem();
        assert_eq!(
            (conflict.status, conflict.kind.as_str()),
            (409, "/problems/idempotency-conflict")
        );
        let invalid = ApiError::from(StoreError::InvalidSpec {
            index: 3,
            message: "down must be positive".into(),
        })
        .problem();
        assert_eq!(
            (
                invalid.status,
                invalid.kind.as_str(),
                invalid.detail.as_str()
            ),
            (
                422,
                "/problems/invalid-spec",
                "job 3: down must be positive"
            )
        );
    }

    #[test]
    fn refusals_carry_the_headers_clients_act_on() {
        let header = |err: ApiError, name| {
            let response = err.into_response();
            (
                response.status().as_u16(),
                response
                    .headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned()),
            )
        };
        let unauthorized = ApiError::Unauthorized {
            detail: "no key".into(),
        };
        assert_eq!(
            header(unauthorized, header::WWW_AUTHENTICATE),
            (401, Some("Bearer realm=\"mcq\"".into()))
        );
        let quota = ApiError::QuotaExceeded {
            limit: 3,
            active: 3,
            adding: 1,
        };
        assert_eq!(header(quota, header::RETRY_AFTER), (429, Some("5".into())));
        // A saturated pool (no connection within its acquire timeout) is
        // an outage (`StoreError::is_unavailable`): 503, and when to come back.
        assert_eq!(
            header(ApiError::Unavailable, header::RETRY_AFTER),
            (503, Some("5".into()))
        );
        assert_eq!(
            header(ApiError::Timeout, header::RETRY_AFTER),
            (503, Some("5".into()))
        );
    }
}
