//! A submitter that keeps jobs waiting while a scenario measures the
//! workers' throughput: a queue that runs dry would measure the submitter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcq_kernel::Spec;
use mcq_queue::Store;
use uuid::Uuid;

use crate::process::batch;

/// What [`keep_queued`] submits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backlog {
    /// Jobs per submitted batch.
    pub(crate) batch: usize,
    /// Jobs queued or running below which another batch is submitted.
    pub(crate) jobs: u64,
    /// Seed of the first job; each job after it takes the next seed.
    pub(crate) first_seed: u64,
}

/// Submits batches of `spec(seed)` jobs whenever fewer than
/// `backlog.jobs` wait, until `stop`; returns every batch with its specs,
/// in submission order.
pub(crate) async fn keep_queued(
    store: Store,
    stop: Arc<AtomicBool>,
    backlog: Backlog,
    spec: fn(u64) -> Spec,
) -> anyhow::Result<Vec<(Uuid, Vec<Spec>)>> {
    let mut batches: Vec<(Uuid, Vec<Spec>)> = Vec::new();
    let mut seed = backlog.first_seed;
    // Batches finish in order, so the unfinished ones are among the last.
    let recent = 1 + backlog.jobs as usize / backlog.batch;
    while !stop.load(Ordering::Relaxed) {
        let mut waiting = 0;
        for (id, _) in batches.iter().rev().take(recent) {
            let view = batch::view(&store, *id).await?;
            waiting += view.counts.queued + view.counts.running;
        }
        if waiting < backlog.jobs {
            let next = seed + backlog.batch as u64;
            let specs: Vec<Spec> = (seed..next).map(spec).collect();
            seed = next;
            let id = batch::submit(&store, specs.clone()).await?;
            batches.push((id, specs));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(batches)
}
