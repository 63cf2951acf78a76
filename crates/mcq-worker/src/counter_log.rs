//! The worker's counters in its log: one line of fields every
//! `counters_interval` ("worker counters") and one at exit ("worker
//! exited"), so an operator sees a worker's progress and rates while it
//! runs, not only once it is gone.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::WorkerReport;
use crate::counters::Counters;
use crate::held::Held;

/// Completions and paths per second between two reports `secs` apart.
pub(crate) fn rates(before: &WorkerReport, after: &WorkerReport, secs: f64) -> (f64, f64) {
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    (
        per_s(before.completed, after.completed),
        per_s(before.paths, after.paths),
    )
}

/// Logs `report` as one line of fields: the totals, the tasks held now,
/// and the rates over the `secs` since `before`.
pub(crate) fn log(
    message: &'static str,
    report: &WorkerReport,
    before: &WorkerReport,
    secs: f64,
    held: usize,
) {
    let (tasks_per_s, paths_per_s) = rates(before, report, secs);
    tracing::info!(
        claimed = report.claimed,
        contended = report.contended,
        completed = report.completed,
        failed = report.failed,
        retried = report.retried,
        refused = report.refused,
        cancelled = report.cancelled,
        released = report.released,
        handed_off = report.handed_off,
        panicked = report.panicked,
        paths = report.paths,
        held,
        tasks_per_s,
        paths_per_s,
        loop_turns = report.loop_turns,
        "{message}"
    );
}

/// Logs the counters every `interval` until `stop`, with the rates over
/// each interval.
pub(crate) async fn log_every(
    counters: Arc<Counters>,
    held: Arc<Held>,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut before = (counters.report(), Instant::now());
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = (counters.report(), Instant::now());
        let secs = now.1.duration_since(before.1).as_secs_f64();
        log("worker counters", &now.0, &before.0, secs, held.len());
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::add;

    #[test]
    fn rates_count_what_changed_over_the_interval() {
        let before = WorkerReport {
            completed: 10,
            paths: 1_000,
            ..WorkerReport::default()
        };
        let after = WorkerReport {
            completed: 70,
            paths: 61_000,
            ..WorkerReport::default()
        };
        assert_eq!(rates(&before, &after, 60.0), (1.0, 1_000.0));
        assert_eq!(rates(&before, &after, 0.0), (0.0, 0.0), "no time, no rate");
        assert_eq!(rates(&after, &before, 1.0), (0.0, 0.0), "never negative");
    }

    /// Paused time: the line is written at each interval's end, never
    /// before, and the loop ends with its token.
    #[tokio::test(start_paused = true)]
    async fn the_loop_ticks_at_its_interval_and_stops_with_its_token() {
        let counters = Arc::new(Counters::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn(log_every(
            counters.clone(),
            Arc::default(),
            Duration::from_secs(60),
            stop.clone(),
        ));
        add(&counters.completed, 5);
        tokio::time::sleep(Duration::from_secs(150)).await;
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the loop stops with its token")
            .expect("no panic");
    }
}
