//! The OpenAPI 3.1 document, generated from the handlers' annotations and
//! the wire types' schemas.

use std::sync::OnceLock;

use utoipa::openapi::path::{Operation, Parameter};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi};

use crate::wait::WAIT_PATTERN;

mod access_responses;
mod batch_schema;

/// A UUID as the API accepts it: hyphenated, hex digits in either case.
const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
/// A price per core-hour as `cost_local` takes it (the server also reads
/// other spellings of a non-negative number, such as `4e-2`).
const PRICE_PATTERN: &str = "^[0-9]{1,12}(\\.[0-9]{1,12})?$";
/// A cloud price as `cost_cloud` takes it, with its billing granularity.
const CLOUD_PRICE_PATTERN: &str = "^[0-9]{1,12}(\\.[0-9]{1,12})?(,granularity=(1s|1min|1h))?$";
/// An `Idempotency-Key`: 1 to 255 visible ASCII characters.
const KEY_PATTERN: &str = "^[!-~]{1,255}$";

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
        crate::summary::batch_summary,
        crate::results::batch_results,
        crate::read::cancel_job,
        crate::read::cancel_batch,
        crate::overview::list_batches,
        crate::overview::workers,
        crate::overview::queue,
        crate::health::healthz,
        crate::health::readyz,
        crate::health::openapi_json,
        crate::prometheus::metrics,
    ),
    components(schemas(mcq_api_types::FieldProblem)),
    modifiers(&Parameters, &Batches, &Access),
    tags(
        (name = "jobs", description = "Single pricing jobs"),
        (name = "batches", description = "Batches of jobs and their statistics"),
        (name = "workers", description = "Worker processes and the queue as a whole"),
        (name = "operations", description = "Probes, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// Writes the batch body as its two shapes, jobs or a sweep (see
/// [`batch_schema`]).
#[derive(Debug)]
struct Batches;

impl Modify for Batches {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        batch_schema::rewrite(doc);
    }
}

/// Adds what the access layer answers to every operation (see
/// [`access_responses`]).
#[derive(Debug)]
struct Access;

impl Modify for Access {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        access_responses::add(doc);
    }
}

/// Gives the id, cursor, wait and key parameters the exact rules the
/// server applies to them, written once here by parameter name rather than
/// repeated on each handler (bounds that differ per route, such as
/// `limit`, stay on the handler).
#[derive(Debug)]
struct Parameters;

impl Modify for Parameters {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for item in doc.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post];
            for operation in operations.into_iter().flatten() {
                constrain(operation);
            }
        }
    }
}

fn constrain(operation: &mut Operation) {
    for parameter in operation.parameters.iter_mut().flatten() {
        let RefOr::T(parameter) = parameter else {
            continue;
        };
        if let Some(schema) = schema_of(parameter) {
            parameter.schema = Some(RefOr::T(schema));
        }
    }
}

/// The schema the server enforces for a parameter, by its name.
fn schema_of(parameter: &Parameter) -> Option<Schema> {
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let schema = match parameter.name.as_str() {
        "id" | "after" => text()
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .pattern(Some(UUID_PATTERN)),
        "wait" => text().pattern(Some(WAIT_PATTERN)),
        "cost_local" => text().pattern(Some(PRICE_PATTERN)),
        "cost_cloud" => text().pattern(Some(CLOUD_PRICE_PATTERN)),
        "Idempotency-Key" => text()
            .min_length(Some(1))
            .max_length(Some(255))
            .pattern(Some(KEY_PATTERN)),
        _ => return None,
    };
    Some(Schema::Object(schema.build()))
}

/// The document as a value, e.g. to check it or write it to a file.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The serialised document, built once.
pub(crate) fn document_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| openapi().to_json().unwrap_or_else(|_| "{}".into()))
}
