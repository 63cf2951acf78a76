//! How many waits are in progress on one kind of signal, so that a
//! PostgreSQL listener holds its `LISTEN` only while somebody waits.
//!
//! PostgreSQL 15 signals every listening backend of a database at every
//! `NOTIFY`, whatever its channel, so each listening connection costs the
//! server a wake-up per finished job. A worker busy with its tasks and a
//! server with no long poll open need no signal: they listen to nothing.
//! A wait enters the demand for as long as it lasts; the listener
//! subscribes when the demand rises from zero and lets go of its `LISTEN`
//! once it has been zero for a short linger (so that the gap between two
//! waits of one idle worker costs no `UNLISTEN`/`LISTEN` pair).

use std::sync::Arc;

use tokio::sync::watch;

/// The count of waits in progress; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Demand {
    tx: Arc<watch::Sender<usize>>,
}

impl Default for Demand {
    fn default() -> Self {
        Demand {
            tx: Arc::new(watch::channel(0).0),
        }
    }
}

impl Demand {
    /// Counts a wait until the returned guard is dropped.
    pub(crate) fn enter(&self) -> Waiting {
        self.tx.send_modify(|n| *n += 1);
        Waiting {
            tx: self.tx.clone(),
        }
    }

    /// Watches the count (for the listener).
    pub(crate) fn watch(&self) -> watch::Receiver<usize> {
        self.tx.subscribe()
    }
}

/// One wait in progress; dropping it ends the wait's share of the demand.
#[derive(Debug)]
pub(crate) struct Waiting {
    tx: Arc<watch::Sender<usize>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.tx.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_counts_while_it_lasts() {
        let demand = Demand::default();
        let watched = demand.watch();
        assert_eq!(*watched.borrow(), 0);
        let first = demand.enter();
        let second = demand.clone().enter();
        assert_eq!(*watched.borrow(), 2);
        drop(first);
        assert_eq!(*watched.borrow(), 1);
        drop(second);
        assert_eq!(*watched.borrow(), 0);
    }
}
