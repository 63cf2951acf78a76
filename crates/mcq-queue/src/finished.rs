//! Announcements that jobs have finished, so that a long poll can answer
//! as soon as its work is done instead of at its next scheduled re-read.
//!
//! A finished job announces its batch id, or its own id when it belongs to
//! no batch. The nil id means "something finished; re-read". Announcements
//! are hints: a waiter that misses one still re-reads on its own schedule,
//! and one that falls behind the channel treats that as an announcement.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use uuid::Uuid;

/// Announcements buffered per subscriber before it counts as lagging.
const CAPACITY: usize = 1024;

/// The sending side, one per store.
#[derive(Debug, Clone)]
pub(crate) struct Announcer {
    tx: broadcast::Sender<Uuid>,
}

impl Announcer {
    pub(crate) fn new() -> Self {
        Announcer {
            tx: broadcast::channel(CAPACITY).0,
        }
    }

    /// Announces that work under `key` finished (nil: anything may have).
    pub(crate) fn announce(&self, key: Uuid) {
        // No subscriber is not an error: nobody is waiting.
        let _ = self.tx.send(key);
    }

    pub(crate) fn subscribe(&self) -> FinishedEvents {
        FinishedEvents {
            rx: self.tx.subscribe(),
        }
    }
}

/// A subscription to finished-work announcements; see
/// [`Store::finished_events`](crate::Store::finished_events).
#[derive(Debug)]
pub struct FinishedEvents {
    rx: broadcast::Receiver<Uuid>,
}

impl FinishedEvents {
    /// Waits until work under `key` (a batch id, or the id of a job without
    /// a batch) is announced as finished, or `timeout` passes. True when an
    /// announcement that may concern `key` arrived; the caller re-reads.
    pub async fn wait_for(&mut self, key: Uuid, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => return false,
                Ok(Ok(announced)) if announced == key || announced.is_nil() => return true,
                Ok(Ok(_)) => {}
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

    #[tokio::test]
    async fn waits_for_its_own_key_or_a_wildcard() {
        let announcer = Announcer::new();
        let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
        let mut events = announcer.subscribe();
        announcer.announce(other);
        assert!(
            !events.wait_for(mine, Duration::from_millis(20)).await,
            "another batch's announcement must not wake this waiter"
        );
        announcer.announce(other);
        announcer.announce(mine);
        assert!(events.wait_for(mine, Duration::from_secs(5)).await);
        announcer.announce(Uuid::nil());
        assert!(events.wait_for(mine, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_lagging_waiter_is_woken() {
        let announcer = Announcer::new();
        let mut events = announcer.subscribe();
        for _ in 0..=CAPACITY {
            announcer.announce(Uuid::now_v7());
        }
        assert!(
            events
                .wait_for(Uuid::now_v7(), Duration::from_secs(5))
                .await
        );
    }
}
