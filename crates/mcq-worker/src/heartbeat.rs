//! Background loops that keep a worker's standing in the store: lease
//! renewal with cancellation delivery, reaping of tasks that exhausted
//! their attempts by losing their workers, and occasional pruning.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use mcq_queue::{Store, WorkerPulse};
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::counters::Counters;
use crate::held::Held;

/// Renews the worker's heartbeat and leases every `interval` until `stop`.
///
/// The store answers with tasks whose job was cancelled; raising their flag
/// stops the kernel at its next chunk boundary, so a cancelled running task
/// ends within about a heartbeat. A failed heartbeat is only logged: the
/// next tick tries again, and if the outage outlasts the lease our late
/// completions are refused, which is the correct outcome.
///
/// Each heartbeat also tells the store, for the worker list, whether the
/// worker is draining (`shutdown` cancelled) and how many completions it
/// had accepted over the last minute, and offers to take the fleet's
/// reaper turn (no worker reaped in the last half interval); a turn taken
/// wakes [`reap`] through `reaper`.
///
/// A worker whose every lease was claimed within the last interval turns
/// its work over faster than a heartbeat could tell it anything, and beats
/// only every [`SPARSE`] intervals ([`beat_due`]).
pub(crate) async fn renew_leases(
    store: Store,
    worker: Uuid,
    held: Arc<Held>,
    counters: Arc<Counters>,
    (interval, reaper): (Duration, Arc<Notify>),
    shutdown: CancellationToken,
    stop: CancellationToken,
) {
    let mut minute = Throughput::default();
    let mut ticks = tokio::time::interval(interval);
    // After a stall, one prompt renewal is what matters, not a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks.tick().await;
    let sparse = sparse_gap(interval, store.config().lease);
    let mut last_beat = tokio::time::Instant::now();
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = tokio::time::Instant::now();
        let oldest = held
            .oldest_claim()
            .map(|at| now.saturating_duration_since(at));
        let draining = shutdown.is_cancelled();
        if !draining && !failing && !beat_due(now - last_beat, oldest, interval, sparse) {
            continue;
        }
        last_beat = now;
        let presented = held.snapshot();
        let pulse = WorkerPulse {
            draining,
            tasks_last_minute: minute.sample(tokio::time::Instant::now(), counters.completed.get()),
            // A draining worker reaps no more (its reaper has stopped), so
            // it leaves the turn to the others.
            reaper_gap: (!draining).then_some(interval / 2),
        };
        match store.heartbeat_reporting(worker, &presented, pulse).await {
            Ok(reply) => {
                if reply.reaper_turn {
                    reaper.notify_one();
                }
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
                for (_, span) in held.lose(&presented_with(&reply.lost)) {
                    span.in_scope(|| {
                        tracing::warn!("lease lost (expired and taken over): stopping the task");
                    });
                }
            }
            Err(err) => {
                failing = true;
                tracing::warn!(error = %err, held = held.len(), "heartbeat failed; leases may expire");
            }
        }
    }
}

/// Heartbeat intervals between the beats of a worker whose leases are all
/// younger than one interval.
const SPARSE: u32 = 3;

/// The longest gap between the beats of such a worker: [`SPARSE`]
/// intervals, at most a third of the lease (so that the worker list, which
/// calls a worker lost once its heartbeat is a lease old, never does), and
/// at least one interval.
fn sparse_gap(interval: Duration, lease: Duration) -> Duration {
    (interval * SPARSE).min(lease / 3).max(interval)
}

/// Whether the heartbeat of this tick goes out, `since` the last one, with
/// the longest-held lease claimed `oldest` ago (`None`: nothing held).
///
/// A heartbeat tells a worker of its cancelled tasks, of idle peers to hand
/// prefetched work to, and renews leases past half their length. A worker
/// whose every lease is younger than one interval (short tasks and their
/// prefetch, turning over) finishes what it holds before any of that
/// could matter, so it beats only every `sparse`: its liveness, its counts
/// and its offer of the reaper turn. One that holds a lease an interval or
/// longer, or holds nothing (an idle worker's beat commits without waiting
/// for the disk), beats every interval.
fn beat_due(
    since: Duration,
    oldest: Option<Duration>,
    interval: Duration,
    sparse: Duration,
) -> bool {
    match oldest {
        // Ticks come an interval apart, give or take the loop's delays.
        Some(age) if age < interval => since + interval / 2 >= sparse,
        _ => true,
    }
}

/// Completions over the last minute, from samples of the running total
/// taken at each heartbeat.
#[derive(Debug, Default)]
struct Throughput {
    samples: VecDeque<(tokio::time::Instant, u64)>,
}

impl Throughput {
    /// Records the total `done` at `now`; returns how much it grew since
    /// the oldest sample within the last minute (since the start, for a
    /// worker younger than that).
    fn sample(&mut self, now: tokio::time::Instant, done: u64) -> u64 {
        while self
            .samples
            .get(1)
            .is_some_and(|&(at, _)| now.duration_since(at) >= Duration::from_secs(60))
        {
            self.samples.pop_front();
        }
        self.samples.push_back((now, done));
        let oldest = self.samples.front().map_or(done, |&(_, n)| n);
        done.saturating_sub(oldest)
    }
}

/// Ends expired leases each time `turn` is notified, until `stop`:
/// requeues tasks with attempts left, fails those on their last attempt.
/// The fleet takes turns: each heartbeat offers to take the turn, which
/// it gets only if no worker reaped in the last half interval (the same
/// rule as `Store::reap_in_turn`, in the heartbeat's round trip), so the
/// running tasks are scanned about once an interval however many workers
/// there are. Recovery after a lost worker takes its lease plus at most
/// one and a half intervals. The reap runs apart from the heartbeat, so a
/// long scan never delays a renewal.
pub(crate) async fn reap(
    store: Store,
    counters: Arc<Counters>,
    turn: Arc<Notify>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = turn.notified() => {}
        }
        match store.reap().await {
            Ok(reaped) => {
                counters.rescued.increment(reaped.requeued);
                counters.expired_failed.increment(reaped.failed);
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn only_a_worker_of_fresh_leases_beats_sparsely() {
        let sparse = sparse_gap(S, 10 * S);
        assert_eq!(sparse, 3 * S);
        let cases = [
            // (since the last beat, the oldest lease's age, beats)
            (S, None, true),
            (S, Some(S), true),
            (S, Some(5 * S), true),
            (S, Some(200 * MS), false),
            (2 * S, Some(999 * MS), false),
            (3 * S - 2 * MS, Some(50 * MS), true),
            (3 * S, Some(Duration::ZERO), true),
        ];
        for (since, oldest, beats) in cases {
            assert_eq!(
                beat_due(since, oldest, S, sparse),
                beats,
                "{since:?} since the last beat, oldest lease {oldest:?}"
            );
        }
    }

    #[test]
    fn the_sparse_gap_stays_within_a_third_of_the_lease() {
        assert_eq!(sparse_gap(S, 10 * S), 3 * S);
        assert_eq!(sparse_gap(S, 6 * S), 2 * S);
        assert_eq!(sparse_gap(S, 3 * S), S);
        assert_eq!(sparse_gap(2 * S, 3 * S), 2 * S, "never below one interval");
    }

    #[test]
    fn throughput_counts_the_last_minute() {
        let start = tokio::time::Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut minute = Throughput::default();
        assert_eq!(minute.sample(at(0), 0), 0);
        assert_eq!(minute.sample(at(30), 40), 40);
        assert_eq!(
            minute.sample(at(60), 100),
            100,
            "the sample at 0 s is a minute old: still the base"
        );
        assert_eq!(
            minute.sample(at(61), 100),
            100,
            "the newest sample a minute old is the base"
        );
        assert_eq!(minute.sample(at(91), 130), 90, "from the sample at 30 s");
        assert_eq!(
            minute.sample(at(200), 130),
            0,
            "nothing done for over a minute"
        );
    }
}
