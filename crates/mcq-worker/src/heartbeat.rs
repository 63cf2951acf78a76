//! Background loops that keep a worker's standing in the store: lease
//! renewal with cancellation delivery, reaping of tasks that exhausted
//! their attempts by losing their workers, and occasional pruning.

use std::sync::Arc;
use std::time::Duration;

use mcq_queue::Store;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::held::Held;

/// Renews the worker's heartbeat and leases every `interval` until `stop`.
///
/// The store answers with tasks whose job was cancelled; raising their flag
/// stops the kernel at its next chunk boundary, so a cancelled running task
/// ends within about a heartbeat. A failed heartbeat is only logged: the
/// next tick tries again, and if the outage outlasts the lease our late
/// completions are refused, which is the correct outcome.
pub(crate) async fn renew_leases(
    store: Store,
    worker: Uuid,
    held: Arc<Held>,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    // After a stall, one prompt renewal is what matters, not a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let presented = held.snapshot();
        match store.heartbeat(worker, &presented).await {
            Ok(reply) => {
                if failing {
                    tracing::info!("heartbeat succeeded again");
                    failing = false;
                }
                // Both answers are about the presented leases only: a newer
                // claim of the same task (made since the snapshot) is ours and
                // goes on; its own next heartbeat tells if its job is cancelled.
                // The store sorts both lists by task id.
                let presented_with = |ids: &[i64]| -> Vec<_> {
                    presented
                        .iter()
                        .filter(|(id, _)| ids.binary_search(id).is_ok())
                        .copied()
                        .collect()
                };
                if !reply.cancelled.is_empty() {
                    let stopped = held.cancel_leases(&presented_with(&reply.cancelled));
                    tracing::info!(tasks = ?reply.cancelled, stopped, "jobs cancelled: stopping their tasks");
                }
                // A task recorded between the snapshot and the renewal, or
                // whose completion is in flight, is reported too; only one
                // still held and not being told to the store was lost.
                let lost = held.lose(&presented_with(&reply.lost));
                if !lost.is_empty() {
                    tracing::warn!(tasks = ?lost, "leases lost (expired and taken over): stopping those tasks");
                }
            }
            Err(err) => {
                failing = true;
                tracing::warn!(error = %err, held = held.len(), "heartbeat failed; leases may expire");
            }
        }
    }
}

/// Ends expired leases every `interval` until `stop`: requeues tasks with
/// attempts left, fails those on their last attempt. Any worker may do it:
/// the statement skips rows another worker is reaping. Recovery after a
/// lost worker therefore takes its lease plus at most one interval.
pub(crate) async fn reap(store: Store, interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match store.reap().await {
            Ok(reaped) => {
                if reaped.requeued > 0 {
                    tracing::info!(
                        tasks = reaped.requeued,
                        "leases expired (their worker vanished): tasks back in the queue"
                    );
                }
                if reaped.failed > 0 {
                    tracing::warn!(
                        tasks = reaped.failed,
                        "failed tasks whose lease expired on their last attempt"
                    );
                }
            }
            Err(err) => tracing::debug!(error = %err, "reaping failed; will try again"),
        }
    }
}

/// Prunes finished jobs past retention every `interval` until `stop`.
/// Runs apart from the heartbeat so a long delete never delays a renewal.
pub(crate) async fn prune(store: Store, interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match store.prune().await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "pruned finished jobs past retention"),
            Err(err) => tracing::warn!(error = %err, "pruning failed; will try again"),
        }
    }
}
