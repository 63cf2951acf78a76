//! Announcements that jobs have finished, so that a long poll can answer
//! as soon as its work is done instead of at its next scheduled re-read.
//!
//! Each announcement carries a key — the batch id, or the job's own id when
//! it belongs to no batch — and how many of its jobs just finished. The nil
//! key counts for every waiter. A waiter knows how many of its jobs were
//! still unfinished at its last read and wakes only once that many have
//! been announced: a long poll on a batch then re-reads when the batch is
//! likely done, not after every job (which cost PostgreSQL 0.5 ms of CPU
//! per job in `mcq bench compare`). Announcements are hints: a waiter that
//! misses one still re-reads on its own schedule, and one that falls behind
//! the channel treats that as its wake-up.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use uuid::Uuid;

use crate::demand::Demand;

/// Announcements buffered per subscriber before it counts as lagging.
const CAPACITY: usize = 1024;

/// The sending side, one per store.
#[derive(Debug, Clone)]
pub(crate) struct Announcer {
    tx: broadcast::Sender<(Uuid, u64)>,
    /// Whether every process that finishes jobs announces them here
    /// (PostgreSQL's `NOTIFY` reaches every listener), or only this one.
    complete: bool,
    /// The waits in progress, which a listener serves while there are any.
    demand: Demand,
}

impl Announcer {
    pub(crate) fn new(complete: bool) -> Self {
        Announcer {
            tx: broadcast::channel(CAPACITY).0,
            complete,
            demand: Demand::default(),
        }
    }

    /// The waits in progress on every subscription.
    pub(crate) fn demand(&self) -> &Demand {
        &self.demand
    }

    /// Announces that `count` jobs under `key` finished (nil key: jobs of
    /// any batch may have).
    pub(crate) fn announce(&self, key: Uuid, count: u64) {
        // No subscriber is not an error: nobody is waiting.
        let _ = self.tx.send((key, count));
    }

    pub(crate) fn subscribe(&self) -> FinishedEvents {
        FinishedEvents {
            rx: self.tx.subscribe(),
            complete: self.complete,
            demand: self.demand.clone(),
        }
    }
}

/// A subscription to finished-work announcements; see
/// [`Store::finished_events`](crate::Store::finished_events).
#[derive(Debug)]
pub struct FinishedEvents {
    rx: broadcast::Receiver<(Uuid, u64)>,
    complete: bool,
    demand: Demand,
}

impl FinishedEvents {
    /// True when jobs finished by any process are announced (PostgreSQL),
    /// false when only this process's are (SQLite, whose workers in other
    /// processes cannot reach this one). A waiter relying on complete
    /// announcements needs to re-read on its own only as a safety net.
    pub fn covers_every_process(&self) -> bool {
        self.complete
    }

    /// Waits until `remaining` jobs under `key` (a batch id, or the id of a
    /// job without a batch) are announced as finished, or `timeout` passes.
    /// True when woken by announcements; the caller re-reads.
    pub async fn wait_for(&mut self, key: Uuid, remaining: u64, timeout: Duration) -> bool {
        let _waiting = self.demand.enter();
        let deadline = Instant::now() + timeout;
        let mut seen = 0;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => return false,
                Ok(Ok((announced, count))) => {
                    if announced == key || announced.is_nil() {
                        seen += count;
                        if seen >= remaining {
                            return true;
                        }
                    }
                }
                Ok(Err(RecvError::Lagged(_))) => return true,
                Ok(Err(RecvError::Closed)) => {
                    tokio::time::sleep_until(deadline).await;
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_say_whether_other_processes_announce() {
        assert!(Announcer::new(true).subscribe().covers_every_process());
        assert!(!Announcer::new(false).subscribe().covers_every_process());
    }

    #[tokio::test]
    async fn waits_for_its_own_key_or_a_wildcard() {
        let announcer = Announcer::new(true);
        let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
        let mut events = announcer.subscribe();
        announcer.announce(other, 5);
        assert!(
            !events.wait_for(mine, 1, Duration::from_millis(20)).await,
            "another batch's announcement must not wake this waiter"
        );
        announcer.announce(other, 1);
        announcer.announce(mine, 1);
        assert!(events.wait_for(mine, 1, Duration::from_secs(5)).await);
        announcer.announce(Uuid::nil(), 1);
        assert!(events.wait_for(mine, 1, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn wakes_once_the_remaining_jobs_are_announced() {
        let announcer = Announcer::new(true);
        let batch = Uuid::now_v7();
        let mut events = announcer.subscribe();
        announcer.announce(batch, 2);
        announcer.announce(batch, 1);
        assert!(
            !events.wait_for(batch, 4, Duration::from_millis(20)).await,
            "3 of 4 remaining jobs announced: keep waiting"
        );
        announcer.announce(batch, 3);
        announcer.announce(batch, 1);
        assert!(events.wait_for(batch, 4, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_lagging_waiter_is_woken() {
        let announcer = Announcer::new(true);
        let mut events = announcer.subscribe();
        for _ in 0..=CAPACITY {
            announcer.announce(Uuid::now_v7(), 1);
        }
        assert!(
            events
                .wait_for(Uuid::now_v7(), 1, Duration::from_secs(5))
                .await
        );
    }
}
