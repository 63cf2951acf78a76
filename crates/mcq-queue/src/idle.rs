//! Announcements that a worker ran out of work.
//!
//! Workers claim ahead of their free compute slots, so when the queue runs
//! dry one worker may still hold claimed tasks it has not started while
//! another has nothing left to do. The idle one announces itself; a worker
//! holding unstarted tasks may then hand some of them back to the queue,
//! where the idle one claims them (docs/worker.md, "Handing work to an
//! idle worker"). Announcements are hints: one that is lost only leaves
//! the work where it was.

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

/// Announcements buffered per subscriber before it counts as lagging.
const CAPACITY: usize = 64;

/// The sending side, one per store.
#[derive(Debug, Clone)]
pub(crate) struct IdleAnnouncer {
    tx: broadcast::Sender<Uuid>,
}

impl Default for IdleAnnouncer {
    fn default() -> Self {
        IdleAnnouncer {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl IdleAnnouncer {
    /// Passes on that `worker` is idle to every subscriber of this store.
    pub(crate) fn announce(&self, worker: Uuid) {
        // No subscriber is not an error: nobody holds work to hand over.
        let _ = self.tx.send(worker);
    }

    pub(crate) fn subscribe(&self) -> IdleWorkers {
        IdleWorkers {
            rx: self.tx.subscribe(),
        }
    }
}

/// A subscription to idle announcements; see
/// [`Store::idle_workers`](crate::Store::idle_workers).
#[derive(Debug)]
pub struct IdleWorkers {
    rx: broadcast::Receiver<Uuid>,
}

impl IdleWorkers {
    /// Forgets the announcements not yet returned: a worker that was idle
    /// itself when they came has no work to hand over for them.
    pub fn skip_pending(&mut self) {
        self.rx = self.rx.resubscribe();
    }

    /// The next worker announced idle (possibly the subscriber itself).
    /// After falling behind, the newest announcements are still returned;
    /// once the store is gone this never resolves.
    pub async fn next(&mut self) -> Uuid {
        loop {
            match self.rx.recv().await {
                Ok(worker) => return worker,
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn every_subscriber_hears_each_announcement_in_order() {
        let announcer = IdleAnnouncer::default();
        let (mut first, mut second) = (announcer.subscribe(), announcer.subscribe());
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        announcer.announce(a);
        announcer.announce(b);
        assert_eq!(first.next().await, a);
        assert_eq!(first.next().await, b);
        assert_eq!(second.next().await, a);
        assert_eq!(second.next().await, b);
    }

    #[tokio::test]
    async fn a_lagging_subscriber_gets_the_newest_and_a_closed_one_waits() {
        let announcer = IdleAnnouncer::default();
        let mut events = announcer.subscribe();
        let ids: Vec<Uuid> = (0..CAPACITY + 5).map(|_| Uuid::now_v7()).collect();
        for id in &ids {
            announcer.announce(*id);
        }
        // The oldest five were dropped; the rest arrive in order.
        assert_eq!(events.next().await, ids[5]);
        drop(announcer);
        for id in &ids[6..] {
            assert_eq!(events.next().await, *id);
        }
        let waited = tokio::time::timeout(Duration::from_millis(50), events.next()).await;
        assert!(waited.is_err(), "a closed subscription must not spin");
    }

    #[tokio::test]
    async fn skipping_forgets_only_what_came_before() {
        let announcer = IdleAnnouncer::default();
        let mut events = announcer.subscribe();
        let (old, new) = (Uuid::now_v7(), Uuid::now_v7());
        announcer.announce(old);
        events.skip_pending();
        announcer.announce(new);
        assert_eq!(events.next().await, new);
    }
}
