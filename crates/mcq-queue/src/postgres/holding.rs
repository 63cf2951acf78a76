//! A batch's finished jobs wait to be announced while this store holds
//! another of the batch's tasks.
//!
//! A reader waiting on a batch counts its finished jobs by their
//! announcements and re-reads once all it waited for are announced
//! (`crate::finished`). Announcing each job as it finishes cost one
//! notifying transaction per task: at 32 one-slot workers of 50 ms tasks,
//! 10–16% of the database's CPU per task and most of its lock waits longer
//! than 5 ms (docs/results.md, "What a batch's announcements cost").
//!
//! While this store's claims hold a task of a batch, that batch cannot be
//! done, so nobody waiting for all of it needs to hear of its jobs yet.
//! The first of a batch's jobs that the store finishes after a quiet
//! [`LONGEST_WAIT`] goes out at once (a reader of one job, or of the first
//! results, hears of it promptly); later ones wait here, and go out
//! together when the store holds none of the batch's tasks any more (its
//! last one recorded, failed, handed back or lost), or once they have
//! waited half to all of [`LONGEST_WAIT`]. The store that records a batch's last job
//! holds no task of it afterwards, so the announcement that completes a
//! reader's count is never held back, and the counts still add up to every
//! finished job. The API's waits re-read on their own at least every
//! 250 ms (`ANNOUNCED_MAX_PAUSE`), so a reader of one job in the middle of
//! a busy batch, or a count held back by a task whose lease ran out and
//! that another worker finished, is late by that much at most.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use crate::types::ClaimedTask;

/// The longest a finished job's announcement waits for the store to let
/// go of its batch's other tasks, and the quiet after which the next goes
/// at once. A busy store announces a long batch about once per this.
pub(super) const LONGEST_WAIT: Duration = Duration::from_secs(5);

/// The tasks this store holds and the announcements waiting for them.
#[derive(Debug, Default)]
pub(super) struct Holding {
    state: Mutex<State>,
    /// Each wait lasts a random half to all of [`LONGEST_WAIT`]. A fleet
    /// started together would otherwise send its held counts in bursts,
    /// every worker in the same few milliseconds, and queue them on the
    /// database's one notification lock.
    jitter: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Each held task of a batch, by task id: its batch.
    tasks: HashMap<i64, Uuid>,
    /// How many tasks of each batch are held.
    batches: HashMap<Uuid, usize>,
    /// Jobs finished under each batch and not announced yet, and when
    /// they are sent at the latest.
    waiting: HashMap<Uuid, (i64, Instant)>,
    /// When this store last announced each batch it holds.
    sent: HashMap<Uuid, Instant>,
    /// A timer will send what waited its longest.
    timer: bool,
}

/// What [`Holding::sort`] leaves to announce now.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Sorted {
    /// Finished jobs per key to announce now.
    pub now: BTreeMap<Uuid, i64>,
    /// Some counts started to wait with no timer running: start one for
    /// this moment.
    pub start_timer: Option<Instant>,
}

impl Holding {
    /// The store's: waits of random lengths.
    pub(super) fn jittered() -> Holding {
        Holding {
            jitter: true,
            ..Holding::default()
        }
    }

    /// When counts that start to wait `at` are sent at the latest.
    fn due(&self, at: Instant) -> Instant {
        if !self.jitter {
            return at + LONGEST_WAIT;
        }
        at + LONGEST_WAIT.mul_f64(rand::random_range(0.5..=1.0))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent at every step, so a panic elsewhere
        // while it was locked leaves nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes the tasks of batches among `tasks`, which a claim now holds.
    pub(super) fn hold(&self, tasks: &[ClaimedTask]) {
        let mut state = self.state();
        for task in tasks {
            if let Some(batch) = task.batch_id
                && state.tasks.insert(task.task_id, batch).is_none()
            {
                *state.batches.entry(batch).or_insert(0) += 1;
            }
        }
    }

    /// Forgets the tasks `ids` (recorded, failed, handed back or lost);
    /// returns the counts of the batches of which none is held any more.
    pub(super) fn let_go(&self, ids: impl IntoIterator<Item = i64>) -> BTreeMap<Uuid, i64> {
        let mut state = self.state();
        let mut free = BTreeMap::new();
        for id in ids {
            let Some(batch) = state.tasks.remove(&id) else {
                continue;
            };
            let held = state
                .batches
                .get_mut(&batch)
                .expect("a held task's batch is counted");
            *held -= 1;
            if *held == 0 {
                state.batches.remove(&batch);
                state.sent.remove(&batch);
                if let Some((count, _)) = state.waiting.remove(&batch) {
                    free.insert(batch, count);
                }
            }
        }
        free
    }

    /// Splits `finished` into what is announced now (with whatever waited
    /// under the same keys) and what waits for a held task of its batch.
    pub(super) fn sort(&self, finished: BTreeMap<Uuid, i64>, at: Instant) -> Sorted {
        let mut state = self.state();
        let mut sorted = Sorted::default();
        for (key, count) in finished {
            if state.batches.contains_key(&key) {
                let quiet = !state.waiting.contains_key(&key)
                    && state
                        .sent
                        .get(&key)
                        .is_none_or(|sent| *sent + LONGEST_WAIT <= at);
                if quiet {
                    state.sent.insert(key, at);
                    sorted.now.insert(key, count);
                    continue;
                }
                let waiting = state
                    .waiting
                    .entry(key)
                    .or_insert_with(|| (0, self.due(at)));
                waiting.0 += count;
                let due = waiting.1;
                if !state.timer {
                    state.timer = true;
                    sorted.start_timer = Some(due);
                }
            } else {
                let waited = state.waiting.remove(&key).map_or(0, |(n, _)| n);
                sorted.now.insert(key, count + waited);
            }
        }
        sorted
    }

    /// Takes the counts due by `at`, and says when the next are; `None`
    /// ends the timer.
    pub(super) fn overdue(&self, at: Instant) -> (BTreeMap<Uuid, i64>, Option<Instant>) {
        let mut state = self.state();
        let due: Vec<Uuid> = state
            .waiting
            .iter()
            .filter(|(_, (_, due))| *due <= at)
            .map(|(key, _)| *key)
            .collect();
        let mut taken = BTreeMap::new();
        for key in due {
            if let Some((count, _)) = state.waiting.remove(&key) {
                taken.insert(key, count);
                if state.batches.contains_key(&key) {
                    state.sent.insert(key, at);
                }
            }
        }
        let next = state.waiting.values().map(|(_, due)| *due).min();
        state.timer = next.is_some();
        (taken, next)
    }

    /// Takes every waiting count: the store is closing.
    pub(super) fn drain(&self) -> BTreeMap<Uuid, i64> {
        self.state()
            .waiting
            .drain()
            .map(|(key, (count, _))| (key, count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcq_kernel::Spec;

    fn task(task_id: i64, batch: Option<Uuid>) -> ClaimedTask {
        ClaimedTask {
            task_id,
            job_id: Uuid::new_v4(),
            batch_id: batch,
            lease_token: Uuid::new_v4(),
            attempt: 1,
            spec: Spec::default(),
            chunks: None,
        }
    }

    /// Tasks 1, 2 and 3 of batch `b` held, and the first job announced.
    fn three_held(b: Uuid, at: Instant) -> Holding {
        let h = Holding::default();
        h.hold(&[task(1, Some(b)), task(2, Some(b)), task(3, Some(b))]);
        let first = h.sort([(b, 1)].into(), at);
        assert_eq!(
            first.now,
            [(b, 1)].into(),
            "the first after a quiet goes at once"
        );
        assert!(first.start_timer.is_none());
        assert!(h.let_go([1]).is_empty(), "tasks 2 and 3 are still held");
        h
    }

    #[test]
    fn a_batch_held_waits_and_goes_out_with_its_last_task() {
        let (b, other) = (Uuid::new_v4(), Uuid::new_v4());
        let t0 = Instant::now();
        let h = three_held(b, t0);
        let sorted = h.sort([(b, 1), (other, 2)].into(), t0);
        assert_eq!(
            sorted.now,
            [(other, 2)].into(),
            "a batch not held goes at once"
        );
        assert!(sorted.start_timer.is_some());
        assert!(h.let_go([2]).is_empty(), "task 3 is still held");
        let sorted = h.sort([(b, 1)].into(), t0);
        assert!(
            sorted.now.is_empty() && sorted.start_timer.is_none(),
            "one timer is running"
        );
        assert_eq!(
            h.let_go([3, 99]),
            [(b, 2)].into(),
            "the last task lets both go"
        );
        assert!(h.let_go([3]).is_empty(), "nothing twice");
        let sorted = h.sort([(b, 1)].into(), t0);
        assert_eq!(
            sorted.now,
            [(b, 1)].into(),
            "nothing of the batch is held now"
        );
    }

    #[test]
    fn after_a_quiet_the_next_job_goes_at_once() {
        let b = Uuid::new_v4();
        let t0 = Instant::now();
        let h = three_held(b, t0);
        let held_at = t0 + LONGEST_WAIT / 2;
        assert!(
            h.sort([(b, 1)].into(), held_at).now.is_empty(),
            "soon after the last"
        );
        let (due, next) = h.overdue(held_at + LONGEST_WAIT);
        assert_eq!(due, [(b, 1)].into(), "sent by the timer");
        assert_eq!(next, None);
        let sent_at = held_at + LONGEST_WAIT;
        assert!(
            h.sort([(b, 1)].into(), sent_at + LONGEST_WAIT / 2)
                .now
                .is_empty(),
            "the timer's send counts as the last"
        );
        h.overdue(sent_at + LONGEST_WAIT * 2);
        assert_eq!(
            h.sort([(b, 1)].into(), sent_at + LONGEST_WAIT * 3).now,
            [(b, 1)].into(),
            "quiet again"
        );
    }

    #[test]
    fn a_jittered_wait_lasts_half_to_all_of_the_longest() {
        let b = Uuid::new_v4();
        let h = Holding::jittered();
        h.hold(&[task(1, Some(b))]);
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..20)
            .map(|i| {
                let at = t0 + LONGEST_WAIT * 3 * i;
                assert_eq!(
                    h.sort([(b, 1)].into(), at).now,
                    [(b, 1)].into(),
                    "after a quiet"
                );
                let due = h.sort([(b, 1)].into(), at).start_timer.expect("a timer");
                assert_eq!(h.overdue(due).0, [(b, 1)].into());
                due - at
            })
            .collect();
        for wait in &waits {
            assert!(
                *wait >= LONGEST_WAIT / 2 && *wait <= LONGEST_WAIT,
                "{wait:?}"
            );
        }
        assert!(
            waits.iter().any(|w| *w != waits[0]),
            "the waits differ: {waits:?}"
        );
    }

    #[test]
    fn jobs_of_their_own_and_tasks_claimed_twice_are_counted_right() {
        let (b, lone) = (Uuid::new_v4(), Uuid::new_v4());
        let h = Holding::default();
        h.hold(&[task(1, None), task(2, Some(b))]);
        h.hold(&[task(2, Some(b))]);
        let t0 = Instant::now();
        assert_eq!(h.sort([(lone, 1)].into(), t0).now, [(lone, 1)].into());
        assert_eq!(h.sort([(b, 1)].into(), t0).now, [(b, 1)].into());
        assert!(h.sort([(b, 3)].into(), t0).now.is_empty());
        assert!(h.let_go([1]).is_empty(), "a job of its own holds no batch");
        assert_eq!(
            h.let_go([2]),
            [(b, 3)].into(),
            "a task held twice is one task"
        );
    }

    #[test]
    fn counts_go_out_after_their_longest_wait_or_when_the_store_closes() {
        let (b, c) = (Uuid::new_v4(), Uuid::new_v4());
        let h = Holding::default();
        h.hold(&[task(1, Some(b)), task(2, Some(c))]);
        let t0 = Instant::now();
        h.sort([(b, 1), (c, 1)].into(), t0);
        assert!(h.sort([(b, 2)].into(), t0).start_timer.is_some());
        let t1 = t0 + LONGEST_WAIT / 2;
        h.sort([(c, 1)].into(), t1);
        let (due, next) = h.overdue(t0 + LONGEST_WAIT / 4);
        assert!(due.is_empty());
        assert_eq!(next, Some(t0 + LONGEST_WAIT));
        let (due, next) = h.overdue(t0 + LONGEST_WAIT);
        assert_eq!(due, [(b, 2)].into());
        assert_eq!(
            next,
            Some(t1 + LONGEST_WAIT),
            "the timer goes on for the other"
        );
        assert_eq!(h.drain(), [(c, 1)].into());
        let (due, next) = h.overdue(t1 + LONGEST_WAIT);
        assert!(due.is_empty() && next.is_none(), "the timer ends");
        assert!(
            h.sort([(b, 1)].into(), t1).start_timer.is_some(),
            "and the next wait starts one"
        );
    }
}
