//! Signals that work may be waiting: a submission, a release, a retry
//! coming due, or (on PostgreSQL) a `NOTIFY` from another process or a
//! reconnect of the listener.
//!
//! Each worker holds its own subscription. A signal sent while the worker
//! is busy (claiming, handing off, announcing that it is idle) is kept
//! for that subscription, so its next wait returns at once: a signal is
//! never lost between an empty claim and the wait that follows it, and no
//! worker can take another's wake-up. At worst a wait returns early and
//! the claim after it finds nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::demand::Demand;

/// The sending side, one per store.
#[derive(Debug, Clone)]
pub(crate) struct WorkSignal {
    /// A generation counter: every signal moves it on by one.
    tx: Arc<watch::Sender<u64>>,
    /// The waits in progress, which a listener serves while there are any.
    demand: Demand,
}

impl Default for WorkSignal {
    fn default() -> Self {
        WorkSignal {
            tx: Arc::new(watch::channel(0).0),
            demand: Demand::default(),
        }
    }
}

impl WorkSignal {
    /// Tells every subscriber that work may be waiting.
    pub(crate) fn wake(&self) {
        self.tx
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// A subscription that sees the signals sent from now on.
    pub(crate) fn subscribe(&self) -> WorkEvents {
        WorkEvents {
            rx: self.tx.subscribe(),
            demand: self.demand.clone(),
        }
    }

    /// The waits in progress on every subscription of this signal.
    pub(crate) fn demand(&self) -> &Demand {
        &self.demand
    }
}

/// A subscription to work signals; see
/// [`Store::work_events`](crate::Store::work_events).
#[derive(Debug)]
pub struct WorkEvents {
    rx: watch::Receiver<u64>,
    demand: Demand,
}

impl WorkEvents {
    /// Returns once work may be waiting — at once if a signal came since
    /// this subscription last returned — or after `timeout`; true when a
    /// signal ended the wait.
    pub async fn wait(&mut self, timeout: Duration) -> bool {
        // Only a worker waiting for work needs other processes' signals.
        let _waiting = self.demand.enter();
        let signalled = async {
            if self.rx.changed().await.is_err() {
                // The store is gone: only the timeout ends the wait.
                std::future::pending::<()>().await;
            }
        };
        tokio::time::timeout(timeout, signalled).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long enough never to end a wait that a signal should end.
    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn a_signal_sent_while_nobody_waits_ends_the_next_wait_of_every_subscriber() {
        let signal = WorkSignal::default();
        let (mut first, mut second) = (signal.subscribe(), signal.subscribe());
        signal.wake();
        let started = tokio::time::Instant::now();
        assert!(first.wait(LONG).await, "a signal ends the wait");
        assert!(second.wait(LONG).await, "a signal ends the wait");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_counts_once_and_signals_before_subscribing_do_not_count() {
        let signal = WorkSignal::default();
        signal.wake();
        let mut events = signal.subscribe();
        let started = tokio::time::Instant::now();
        assert!(
            !events.wait(Duration::from_secs(5)).await,
            "a wait that timed out says so"
        );
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(5),
            "an old signal ended the wait"
        );
        signal.wake();
        signal.wake();
        events.wait(LONG).await;
        let second = tokio::time::Instant::now();
        events.wait(Duration::from_secs(5)).await;
        assert_eq!(
            second.elapsed(),
            Duration::from_secs(5),
            "two signals counted twice"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_on_a_signal_sent_while_it_waits_and_a_dropped_store_only_times_out() {
        let signal = WorkSignal::default();
        let mut events = signal.subscribe();
        let sender = signal.clone();
        let wake = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            sender.wake();
        });
        let started = tokio::time::Instant::now();
        events.wait(LONG).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        wake.await.expect("join");
        drop(signal);
        let dropped = tokio::time::Instant::now();
        events.wait(Duration::from_secs(7)).await;
        assert_eq!(dropped.elapsed(), Duration::from_secs(7));
    }
}
