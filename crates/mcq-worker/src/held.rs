//! The tasks a worker holds a lease on, from claim until the store has
//! accepted, refused or taken back each one.
//!
//! Entries are keyed by lease, (task id, token), not by task id: after a
//! database crash forgets a claim, the same worker may claim the same task
//! again while its first computation is still running. Keyed by id, the
//! stale run's refusal would forget the new lease (which then expires
//! unrenewed) and a "lost" report for the stale token would cancel the
//! new run.
//!
//! A lease being told to the store (its result recorded, its failure or
//! hand-back sent) is marked so: from the commit of that call until the
//! loop has read its answer, the store no longer holds the lease, and a
//! heartbeat that looks in between must not take the gap for a takeover.
//! The call's own answer says whether the lease was still ours.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::time::Instant;
use tracing::Span;
use uuid::Uuid;

use crate::trail::Trail;

/// One lease: a task id and the token of the claim that granted it.
pub(crate) type LeaseKey = (i64, Uuid);

/// Shared by the worker's loop, which claims and records, and the
/// heartbeat, which renews and cancels.
#[derive(Debug, Default)]
pub(crate) struct Held {
    tasks: Mutex<HashMap<LeaseKey, Lease>>,
}

/// What the worker keeps of one lease.
#[derive(Debug)]
struct Lease {
    /// Raised to stop the task's kernel at its next chunk boundary.
    cancel: Arc<AtomicBool>,
    /// A call telling the store about this lease has been sent; its answer,
    /// not a heartbeat, says whether the lease was lost.
    told: bool,
    /// The task's span, for the events of its end.
    trail: Trail,
    /// When the task's job was submitted, for the end-to-end histogram.
    submitted: Option<SystemTime>,
    /// When this worker claimed it.
    claimed: Instant,
}

/// What a compute slot takes with a task: its cancel flag and its span.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ticket {
    /// Raised to stop the task's kernel at its next chunk boundary.
    pub(crate) cancel: Arc<AtomicBool>,
    /// The task's span, for what its computation logs.
    pub(crate) trail: Trail,
}

impl Held {
    /// Records a claimed task with its span and when its job was
    /// submitted; returns what its slot needs.
    pub(crate) fn insert(
        &self,
        task_id: i64,
        token: Uuid,
        trail: Trail,
        submitted: Option<SystemTime>,
    ) -> Ticket {
        let cancel = Arc::new(AtomicBool::new(false));
        let lease = Lease {
            cancel: cancel.clone(),
            told: false,
            trail: trail.clone(),
            submitted,
            claimed: Instant::now(),
        };
        self.lock().insert((task_id, token), lease);
        Ticket { cancel, trail }
    }

    /// The span of a lease still held (none for one no longer held).
    pub(crate) fn span(&self, lease: LeaseKey) -> Span {
        let trail = self.lock().get(&lease).map(|held| held.trail.clone());
        trail.map_or_else(Span::none, |trail| trail.span())
    }

    /// Marks leases about to be told to the store (completed, failed or
    /// handed back). The mark stays if the call fails and is sent again:
    /// a call whose answer was lost may have committed.
    pub(crate) fn telling(&self, leases: impl IntoIterator<Item = LeaseKey>) {
        let mut tasks = self.lock();
        for lease in leases {
            if let Some(held) = tasks.get_mut(&lease) {
                held.told = true;
            }
        }
    }

    /// Forgets leases the store no longer counts as ours.
    pub(crate) fn remove_all(&self, leases: impl IntoIterator<Item = LeaseKey>) {
        let mut tasks = self.lock();
        for lease in leases {
            tasks.remove(&lease);
        }
    }

    /// Forgets leases as [`Held::remove_all`] does and returns, for each
    /// one still held, when its job was submitted.
    pub(crate) fn take_submitted(
        &self,
        leases: impl IntoIterator<Item = LeaseKey>,
    ) -> Vec<(LeaseKey, Option<SystemTime>)> {
        let mut tasks = self.lock();
        leases
            .into_iter()
            .filter_map(|lease| tasks.remove(&lease).map(|held| (lease, held.submitted)))
            .collect()
    }

    /// Raises the cancel flag of the given leases we still hold; returns how many.
    pub(crate) fn cancel_leases(&self, leases: &[LeaseKey]) -> usize {
        let tasks = self.lock();
        leases
            .iter()
            .filter_map(|lease| tasks.get(lease))
            .inspect(|held| held.cancel.store(true, Ordering::Relaxed))
            .count()
    }

    /// Of leases the store no longer holds under their token, those really
    /// lost: still held here and not being told to the store, whose call
    /// may have ended them itself. Raises their cancel flags; returns their
    /// task ids and spans.
    pub(crate) fn lose(&self, leases: &[LeaseKey]) -> Vec<(i64, Span)> {
        let tasks = self.lock();
        leases
            .iter()
            .filter_map(|&(id, token)| {
                let held = tasks.get(&(id, token)).filter(|held| !held.told)?;
                held.cancel.store(true, Ordering::Relaxed);
                Some((id, held.trail.span()))
            })
            .collect()
    }

    /// Raises every cancel flag (shutdown past its timeout).
    pub(crate) fn cancel_everything(&self) {
        for held in self.lock().values() {
            held.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Every lease still held.
    pub(crate) fn snapshot(&self) -> Vec<LeaseKey> {
        self.lock().keys().copied().collect()
    }

    /// When the longest-held lease was claimed; `None` when none is held.
    pub(crate) fn oldest_claim(&self) -> Option<Instant> {
        self.lock().values().map(|held| held.claimed).min()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseKey, Lease>> {
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
        let a = held.insert(1, ta, Trail::default(), None).cancel;
        let b = held.insert(2, tb, Trail::default(), None).cancel;
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
        let old_run = held.insert(7, stale, Trail::default(), None).cancel;
        let new_run = held.insert(7, fresh, Trail::default(), None).cancel;
        // The store reports the stale lease lost: only its run stops.
        assert_eq!(held.cancel_leases(&[(7, stale)]), 1);
        assert!(old_run.load(Ordering::Relaxed));
        assert!(!new_run.load(Ordering::Relaxed));
        // The stale run's refusal forgets only its own lease.
        held.remove_all([(7, stale)]);
        assert_eq!(held.snapshot(), vec![(7, fresh)]);
    }

    /// The store ends a lease when it accepts the completion; a heartbeat
    /// that reads the task between that commit and the loop's reading of
    /// the answer finds it gone, which is no loss.
    #[test]
    fn a_lease_being_told_to_the_store_is_not_lost_when_it_vanishes() {
        let held = Held::default();
        let (ta, tb) = (Uuid::new_v4(), Uuid::new_v4());
        let recorded = held.insert(1, ta, Trail::default(), None).cancel;
        let taken = held.insert(2, tb, Trail::default(), None).cancel;
        held.telling([(1, ta)]);
        let lost: Vec<i64> = held
            .lose(&[(1, ta), (2, tb)])
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(lost, vec![2]);
        assert!(!recorded.load(Ordering::Relaxed));
        assert!(taken.load(Ordering::Relaxed));
        // Forgotten once the answer is read: a later report names nothing.
        held.remove_all([(1, ta)]);
        assert!(held.lose(&[(1, ta)]).is_empty());
    }
}
