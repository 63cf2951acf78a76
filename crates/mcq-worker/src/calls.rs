//! The worker loop's database calls for claims and completions, run as
//! futures the loop polls while it waits, so a claim and a completion can
//! be in flight at once. Each brings back what it sent, so what a failed
//! call did not record waits in the loop again.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mcq_queue::{CompletedAndClaimed, Store, StoreError, TaskDone};
use tokio::time::Instant;
use tracing::Instrument as _;
use uuid::Uuid;

use crate::counters::{Counters, add, seconds_since};
use crate::held::{Held, LeaseKey};
use crate::pending::{Batch, Waiting};

/// A database call in flight; the loop awaits its answer while it waits.
pub(crate) type Call<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs `call` as a task of its own and returns its answer as a [`Call`].
///
/// The call must make progress while the loop is busy elsewhere: SQLite
/// has one writer connection, and a claim parked inside its transaction
/// while the loop awaited a hand-off on that same connection stalled both
/// until the pool's acquire timeout (30 s).
pub(crate) fn spawn<T: Send + 'static>(call: impl Future<Output = T> + Send + 'static) -> Call<T> {
    // In the worker's span, as the loop that starts it.
    let task = tokio::spawn(call.in_current_span());
    Box::pin(async move {
        match task.await {
            Ok(answer) => answer,
            // A panic inside a database call is a bug: surface it here.
            Err(err) => match err.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(err) => panic!("a database call was cancelled: {err}"),
            },
        }
    })
}

/// What a claim brings back: the completions it carried, and its answer.
pub(crate) struct Claimed {
    pub(crate) asked: usize,
    pub(crate) done: Vec<(TaskDone, Waiting)>,
    pub(crate) took: Duration,
    pub(crate) reply: Result<CompletedAndClaimed, StoreError>,
}

/// What a flush brings back: what it could not record, and why.
pub(crate) struct Flushed {
    pub(crate) unrecorded: Batch,
    pub(crate) error: Option<(&'static str, StoreError)>,
}

impl std::fmt::Debug for Claimed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claimed")
            .field("asked", &self.asked)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Flushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flushed")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// Claims up to `n` tasks, `ahead` of them beyond the free slots,
/// recording `done` in the same call.
pub(crate) async fn claim(
    store: Store,
    worker: Uuid,
    done: Vec<(TaskDone, Waiting)>,
    n: usize,
    ahead: usize,
) -> Claimed {
    let started = Instant::now();
    let max = u32::try_from(n).unwrap_or(u32::MAX);
    let ahead = u32::try_from(ahead).unwrap_or(u32::MAX);
    let sent: Vec<TaskDone> = done.iter().map(|(d, _)| d.clone()).collect();
    let reply = store
        .complete_and_claim_ahead(worker, sent, max, ahead)
        .await;
    Claimed {
        asked: n,
        done,
        took: started.elapsed(),
        reply,
    }
}

/// Resolves with the call's answer once it has one, and empties the slot;
/// never resolves while no call is in flight.
pub(crate) async fn finish<T>(call: &mut Option<Call<T>>) -> T {
    let Some(future) = call.as_mut() else {
        return std::future::pending().await;
    };
    let answer = future.await;
    *call = None;
    answer
}

/// Records `batch`: completions in one call, then failures, then cancelled
/// tasks handed back. What a failed call did not record comes back.
pub(crate) async fn record(
    store: Store,
    worker: Uuid,
    held: Arc<Held>,
    counters: Arc<Counters>,
    mut batch: Batch,
) -> Flushed {
    let failed = |batch, what, err| Flushed {
        unrecorded: batch,
        error: Some((what, err)),
    };
    if !batch.done.is_empty() {
        let sent: Vec<TaskDone> = batch.done.iter().map(|(d, _)| d.clone()).collect();
        match store.complete(worker, sent).await {
            Ok(refused) => {
                let done = std::mem::take(&mut batch.done);
                let leases = done.iter().map(|(d, _)| (d.task_id, d.lease_token));
                settle(&counters, &held, leases.collect(), &refused);
            }
            Err(err) => return failed(batch, "complete", err),
        }
    }
    while let Some((failure, _)) = batch.failed.first() {
        let (id, token) = (failure.task_id, failure.lease_token);
        let span = held.span((id, token));
        if failure.panicked {
            add(&counters.panicked, 1);
            span.in_scope(|| {
                tracing::error!(
                    error = failure.error,
                    "task panicked; recording a failed attempt"
                );
            });
        } else {
            span.in_scope(|| {
                tracing::warn!(
                    error = failure.error,
                    "task failed; recording a failed attempt"
                );
            });
        }
        match store.fail(worker, id, token, &failure.error).await {
            Ok(true) => add(&counters.failed, 1),
            Ok(false) => {
                add(&counters.refused, 1);
                span.in_scope(|| tracing::warn!("failure refused: the lease was lost"));
            }
            Err(err) => return failed(batch, "fail", err),
        }
        batch.failed.remove(0);
        held.remove_all([(id, token)]);
    }
    if !batch.cancelled.is_empty() {
        let leases: Vec<LeaseKey> = batch
            .cancelled
            .iter()
            .map(|(f, _)| (f.task_id, f.lease_token))
            .collect();
        tracing::info!(
            tasks = ?leases.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            "handing back tasks stopped by their cancel flag"
        );
        match store.release(worker, &leases).await {
            Ok(()) => {
                if tracing::enabled!(tracing::Level::TRACE) {
                    for &lease in &leases {
                        held.span(lease)
                            .in_scope(|| tracing::trace!("handed back after its cancel flag"));
                    }
                }
                add(&counters.released, leases.len());
                held.remove_all(leases);
                batch.cancelled.clear();
            }
            Err(err) => return failed(batch, "release", err),
        }
    }
    Flushed {
        unrecorded: batch,
        error: None,
    }
}

/// After the store answered for `leases`: counts, times the accepted ones
/// from their job's submission, warns of refusals (late completions) and
/// forgets the leases, no longer ours to renew.
pub(crate) fn settle(counters: &Counters, held: &Held, leases: Vec<LeaseKey>, refused: &[i64]) {
    tracing::debug!(tasks = leases.len(), refused = refused.len(), "completed");
    add(
        &counters.completed,
        leases.len() - refused.len().min(leases.len()),
    );
    if !refused.is_empty() {
        add(&counters.refused, refused.len());
    }
    // Each refusal is work lost, said in its task's span; an accepted one
    // is routine, said only when tracing.
    let tracing = tracing::enabled!(tracing::Level::TRACE);
    if tracing || !refused.is_empty() {
        let refused: HashSet<i64> = refused.iter().copied().collect();
        for &lease in &leases {
            let span = held.span(lease);
            if refused.contains(&lease.0) {
                span.in_scope(|| {
                    tracing::warn!(
                        "completion refused: the lease was lost (expired and re-claimed, or the job was cancelled)"
                    );
                });
            } else if tracing {
                span.in_scope(|| tracing::trace!("recorded"));
            }
        }
    }
    let now = SystemTime::now();
    let refused: HashSet<i64> = refused.iter().copied().collect();
    for ((id, _), submitted) in held.take_submitted(leases) {
        if let Some(at) = submitted
            && !refused.contains(&id)
        {
            counters.end_to_end.record(seconds_since(at, now));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::spawn;

    /// The loop awaits other things (a hand-back, an announcement) while a
    /// call is in flight; the call must not wait for the loop to poll it.
    /// Paused time makes the timeout fire at once if the call is stuck.
    #[tokio::test(start_paused = true)]
    async fn a_call_in_flight_progresses_while_the_loop_awaits_something_else() {
        let (reached, progressed) = tokio::sync::oneshot::channel();
        let call = spawn(async move {
            reached.send(()).expect("the test waits for this");
            7
        });
        let waited = tokio::time::timeout(Duration::from_secs(60), progressed).await;
        assert!(
            waited.is_ok(),
            "the call made no progress while nobody polled it"
        );
        assert_eq!(call.await, 7);
    }
}
