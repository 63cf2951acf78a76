//! The queue-wide gauges: depth by state, the oldest wait, workers by
//! state. They describe the whole queue, not this process, so they are
//! read from the database (through `Store::queue`, the read behind
//! `GET /v1/queue`) at most once per refresh interval however often this
//! process is scraped; scrapes in between see the last values. Concurrent
//! scrapes share one read.

use std::sync::Arc;
use std::time::Duration;

use mcq_api_types::QueueView;
use mcq_metrics as names;
use mcq_queue::Store;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Longest a scrape waits for the database; a scrape must answer well
/// within Prometheus's default timeout (10 s) even when it does not.
const READ_WITHIN: Duration = Duration::from_secs(2);

/// The gauges and when they were last read; clones share both.
#[derive(Debug, Clone)]
pub(crate) struct QueueGauges {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    every: Duration,
    last: Mutex<Option<Instant>>,
    queued: metrics::Gauge,
    scheduled: metrics::Gauge,
    running: metrics::Gauge,
    oldest_age: metrics::Gauge,
    active: metrics::Gauge,
    draining: metrics::Gauge,
    lost: metrics::Gauge,
    read_at: metrics::Gauge,
    failures: metrics::Counter,
}

impl QueueGauges {
    /// Gauges read at most once per `every` (0: on every scrape).
    pub(crate) fn new(every: Duration) -> QueueGauges {
        mcq_metrics::install();
        let tasks = |state: &'static str| metrics::gauge!(names::QUEUE_TASKS, "state" => state);
        let workers = |state: &'static str| metrics::gauge!(names::WORKERS, "state" => state);
        QueueGauges {
            inner: Arc::new(Inner {
                every,
                last: Mutex::new(None),
                queued: tasks("queued"),
                scheduled: tasks("scheduled"),
                running: tasks("running"),
                oldest_age: metrics::gauge!(names::QUEUE_OLDEST_AGE),
                active: workers("active"),
                draining: workers("draining"),
                lost: workers("lost"),
                read_at: metrics::gauge!(names::QUEUE_READ_AT),
                failures: metrics::counter!(names::QUEUE_READ_FAILURES),
            }),
        }
    }

    /// Reads the queue if the last read is older than the interval. A
    /// failed read counts too: a database in trouble is not asked again
    /// before the interval is over.
    pub(crate) async fn refresh(&self, store: &Store) {
        let inner = &self.inner;
        let mut last = inner.last.lock().await;
        if !due(*last, Instant::now(), inner.every) {
            return;
        }
        match tokio::time::timeout(READ_WITHIN, store.queue()).await {
            Ok(Ok(view)) => self.set(&view),
            Ok(Err(err)) => {
                inner.failures.increment(1);
                tracing::warn!(error = %err, "reading the queue for /metrics failed");
            }
            Err(_) => {
                inner.failures.increment(1);
                tracing::warn!(within = ?READ_WITHIN, "reading the queue for /metrics took too long");
            }
        }
        *last = Some(Instant::now());
    }

    fn set(&self, view: &QueueView) {
        let inner = &self.inner;
        inner.queued.set(view.depth.queued as f64);
        inner.scheduled.set(view.depth.scheduled as f64);
        inner.running.set(view.depth.running as f64);
        inner
            .oldest_age
            .set(view.oldest_queued_age_ms.unwrap_or(0.0).max(0.0) / 1e3);
        inner.active.set(view.workers.active as f64);
        inner.draining.set(view.workers.draining as f64);
        inner.lost.set(view.workers.lost as f64);
        inner
            .read_at
            .set(view.read_at.timestamp_millis() as f64 / 1e3);
    }
}

/// Whether a read is due at `now` after one at `last`.
fn due(last: Option<Instant>, now: Instant, every: Duration) -> bool {
    last.is_none_or(|at| now.duration_since(at) >= every)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_due_once_per_interval() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let five = Duration::from_secs(5);
        assert!(due(None, at(0), five), "the first scrape reads");
        assert!(!due(Some(at(0)), at(0), five));
        assert!(!due(Some(at(0)), at(4_999), five));
        assert!(due(Some(at(0)), at(5_000), five));
        assert!(
            due(Some(at(0)), at(0), Duration::ZERO),
            "0 reads every time"
        );
    }
}
