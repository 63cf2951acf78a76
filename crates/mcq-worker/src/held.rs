//! The tasks a worker holds a lease on, from claim until the store has
//! accepted, refused or taken back each one.
//!
//! Entries are keyed by lease, (task id, token), not by task id: after a
//! database crash forgets a claim, the same worker may claim the same task
//! again while its first computation is still running. Keyed by id, the
//! stale run's refusal would forget the new lease (which then expires
//! unrenewed) and a "lost" report for the stale token would cancel the
//! new run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// One lease: a task id and the token of the claim that granted it.
pub(crate) type LeaseKey = (i64, Uuid);

/// Shared by the worker's loop, which claims and records, and the
/// heartbeat, which renews and cancels.
#[derive(Debug, Default)]
pub(crate) struct Held {
    tasks: Mutex<HashMap<LeaseKey, Arc<AtomicBool>>>,
}

impl Held {
    /// Records a claimed task and returns its cancel flag.
    pub(crate) fn insert(&self, task_id: i64, token: Uuid) -> Arc<AtomicBool> {
        let cancel = Arc::new(AtomicBool::new(false));
        self.lock().insert((task_id, token), cancel.clone());
        cancel
    }

    /// Forgets leases the store no longer counts as ours.
    pub(crate) fn remove_all(&self, leases: impl IntoIterator<Item = LeaseKey>) {
        let mut tasks = self.lock();
        for lease in leases {
            tasks.remove(&lease);
        }
    }

    /// Raises the cancel flag of the given leases we still hold; returns how many.
    pub(crate) fn cancel_leases(&self, leases: &[LeaseKey]) -> usize {
        let tasks = self.lock();
        leases
            .iter()
            .filter_map(|lease| tasks.get(lease))
            .inspect(|cancel| cancel.store(true, Ordering::Relaxed))
            .count()
    }

    /// Raises every cancel flag (shutdown past its timeout).
    pub(crate) fn cancel_everything(&self) {
        for cancel in self.lock().values() {
            cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Every lease still held.
    pub(crate) fn snapshot(&self) -> Vec<LeaseKey> {
        self.lock().keys().copied().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseKey, Arc<AtomicBool>>> {
        // A panic while holding this lock cannot leave the map half-updated
        // (each operation is one map call), so poisoning is safe to ignore.
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_raises_only_flags_of_held_tasks() {
        let held = Held::default();
        let (ta, tb) = (Uuid::new_v4(), Uuid::new_v4());
        let a = held.insert(1, ta);
        let b = held.insert(2, tb);
        assert_eq!(held.cancel_leases(&[(2, tb), (99, ta), (1, tb)]), 1);
        assert!(!a.load(Ordering::Relaxed));
        assert!(b.load(Ordering::Relaxed));
        held.remove_all([(2, tb)]);
        assert_eq!(held.snapshot(), vec![(1, ta)]);
        held.cancel_everything();
        assert!(a.load(Ordering::Relaxed));
    }

    #[test]
    fn a_stale_lease_on_a_reclaimed_task_leaves_the_new_one_alone() {
        let held = Held::default();
        let (stale, fresh) = (Uuid::new_v4(), Uuid::new_v4());
        let old_run = held.insert(7, stale);
        let new_run = held.insert(7, fresh);
        // The store reports the stale lease lost: only its run stops.
        assert_eq!(held.cancel_leases(&[(7, stale)]), 1);
        assert!(old_run.load(Ordering::Relaxed));
        assert!(!new_run.load(Ordering::Relaxed));
        // The stale run's refusal forgets only its own lease.
        held.remove_all([(7, stale)]);
        assert_eq!(held.snapshot(), vec![(7, fresh)]);
    }
}
