//! The tasks a worker holds a lease on, from claim until the store has
//! accepted, refused or taken back each one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

/// Lease token and cancel flag of one held task.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub(crate) token: Uuid,
    pub(crate) cancel: Arc<AtomicBool>,
}

/// Shared by the claimer, the completer and the heartbeat.
#[derive(Debug, Default)]
pub(crate) struct Held {
    tasks: Mutex<HashMap<i64, Lease>>,
    /// Signalled whenever tasks are forgotten, for a claimer waiting for room.
    pub(crate) progress: Notify,
}

impl Held {
    /// Records a claimed task and returns its cancel flag.
    pub(crate) fn insert(&self, task_id: i64, token: Uuid) -> Arc<AtomicBool> {
        let cancel = Arc::new(AtomicBool::new(false));
        self.lock().insert(
            task_id,
            Lease {
                token,
                cancel: cancel.clone(),
            },
        );
        cancel
    }

    /// Forgets tasks the store no longer counts as ours.
    pub(crate) fn remove_all(&self, task_ids: impl IntoIterator<Item = i64>) {
        {
            let mut tasks = self.lock();
            for id in task_ids {
                tasks.remove(&id);
            }
        }
        self.progress.notify_waiters();
    }

    /// Raises the cancel flag of the given tasks we hold; returns how many.
    pub(crate) fn cancel(&self, task_ids: &[i64]) -> usize {
        let tasks = self.lock();
        task_ids
            .iter()
            .filter_map(|id| tasks.get(id))
            .inspect(|lease| lease.cancel.store(true, Ordering::Relaxed))
            .count()
    }

    /// Raises every cancel flag (shutdown past its timeout).
    pub(crate) fn cancel_everything(&self) {
        for lease in self.lock().values() {
            lease.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Every task still held, with its token.
    pub(crate) fn snapshot(&self) -> Vec<(i64, Uuid)> {
        self.lock()
            .iter()
            .map(|(id, lease)| (*id, lease.token))
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Lease>> {
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
        let a = held.insert(1, Uuid::new_v4());
        let b = held.insert(2, Uuid::new_v4());
        assert_eq!(held.cancel(&[2, 99]), 1);
        assert!(!a.load(Ordering::Relaxed));
        assert!(b.load(Ordering::Relaxed));
        held.remove_all([2]);
        assert_eq!(held.snapshot().len(), 1);
        held.cancel_everything();
        assert!(a.load(Ordering::Relaxed));
    }
}
