//! One job submitted alone and waited for as a long poll waits: until its
//! finished-work announcement, then a read, again until the read finds it
//! finished. The visibility probe and the idle fleet's requests both send
//! their jobs this way.

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use mcq_api_types::JobView;
use mcq_kernel::ValidSpec;
use mcq_queue::{FinishedEvents, Scope, Store, Submission};
use tokio::time::Instant;

/// Submits `spec` alone at `priority` and waits up to `patience` for it to
/// finish; returns the finished job and when this process read it so.
pub(crate) async fn submit_and_wait(
    control: &Store,
    events: &mut FinishedEvents,
    (spec, priority): (ValidSpec, i16),
    patience: Duration,
) -> anyhow::Result<(JobView, DateTime<Utc>)> {
    let submitted = control
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority,
            as_batch: false,
            grid: None,
            label: None,
            jobs: vec![spec],
            idempotency: None,
        })
        .await
        .context("submitting a single job")?;
    let id = *submitted.job_ids.first().context("a job has an id")?;
    let deadline = Instant::now() + patience;
    loop {
        events.wait_for(id, 1, Duration::from_secs(1)).await;
        let view = control
            .job(id, Scope::All)
            .await
            .context("reading a single job")?
            .context("a single job vanished")?;
        if view.timings.finished_at.is_some() {
            return Ok((view, Utc::now()));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "job {id} did not finish within {patience:?}"
        );
    }
}
