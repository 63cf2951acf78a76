//! The request and response bodies of the HTTP API that are not queue views.
//! The server serialises exactly these types, so client and server cannot
//! drift apart; `JobView`, `BatchView` and `WorkerView` come from `mcq-queue`.

use mcq_kernel::Spec;
use mcq_queue::{JobState, JobView, WorkerView};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Body of `POST /v1/batches`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Free text shown with the batch (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The jobs, each a pricing spec; omitted fields take their defaults.
    pub jobs: Vec<Spec>,
}

/// Answer of `POST /v1/batches` (status 202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAccepted {
    /// Batch id: poll `GET /v1/batches/{id}`.
    pub id: Uuid,
    /// Job ids in submission order.
    pub job_ids: Vec<Uuid>,
}

/// One page of a batch's jobs (`GET /v1/batches/{id}/jobs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPage {
    /// Jobs in submission order.
    pub jobs: Vec<JobView>,
    /// Cursor for the next page (`?after=`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// Answer of `POST /v1/jobs/{id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobCancelled {
    /// The job.
    pub id: Uuid,
    /// Its state afterwards: `cancelled`, or the final state it had already reached.
    pub state: JobState,
}

/// Answer of `POST /v1/batches/{id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchCancelled {
    /// The batch.
    pub id: Uuid,
    /// How many unfinished jobs this call cancelled.
    pub cancelled: u64,
}

/// Answer of `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerList {
    /// Workers with a recent heartbeat.
    pub workers: Vec<WorkerView>,
}

/// Answer of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok` (process up) or `ready` (database reachable).
    pub status: String,
}

/// An RFC 9457 problem: the body of every error (`application/problem+json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Problem {
    /// Stable identifier of the kind of problem, e.g. `/problems/invalid-spec`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// What went wrong with this request, for humans.
    pub detail: String,
    /// For validation problems: each bad value by JSON pointer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldProblem>,
}

/// One bad value of a request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldProblem {
    /// RFC 6901 JSON pointer into the request body, e.g. `/jobs/17/down`.
    pub pointer: String,
    /// What is wrong with it and how to fix it.
    pub detail: String,
}

/// The spec a single-job submission posts; an alias to make signatures read well.
pub type JobRequest = Spec;
