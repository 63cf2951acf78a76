//! The OpenAPI 3.1 document, generated from the handlers' annotations and
//! the wire types' schemas.

use std::sync::OnceLock;

use utoipa::OpenApi;

/// The annotated API (`ApiDoc::openapi()` builds the document).
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "mcq",
        description = "A distributed Monte Carlo job queue for Asian-option pricing. \
                       Submit jobs or batches, poll results by id. Errors are application/problem+json (RFC 9457)."
    ),
    paths(
        crate::submit::submit_job,
        crate::submit::submit_batch,
        crate::read::get_job,
        crate::read::get_batch,
        crate::read::batch_jobs,
        crate::read::cancel_job,
        crate::read::cancel_batch,
        crate::overview::list_batches,
        crate::overview::workers,
        crate::overview::queue,
        crate::health::healthz,
        crate::health::readyz,
        crate::health::openapi_json,
    ),
    components(schemas(mcq_api_types::FieldProblem)),
    tags(
        (name = "jobs", description = "Single pricing jobs"),
        (name = "batches", description = "Batches of jobs and their statistics"),
        (name = "workers", description = "Worker processes and the queue as a whole"),
        (name = "operations", description = "Probes and this document"),
    )
)]
pub struct ApiDoc;

/// The document as a value, e.g. to check it or write it to a file.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The serialised document, built once.
pub(crate) fn document_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| openapi().to_json().unwrap_or_else(|_| "{}".into()))
}
