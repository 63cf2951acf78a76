//! The bridge from the async claimer to the kernel on a rayon pool.
//!
//! Claimed tasks wait in a [`LocalQueue`]. A compute slot is one rayon job
//! holding a semaphore permit, so at most `concurrency` tasks compute at
//! once and the tokio runtime never blocks. A slot takes tasks from the
//! queue one after the other until it is empty, so a finished task is
//! followed by the next on the same thread: handing each task over through
//! the claimer would cost a wake-up of the async runtime per task, with the
//! core idle meanwhile (docs/worker.md). Each outcome goes to the completer's
//! outbox; the permit is returned when the slot finds the queue empty (or
//! closed), however its last task ended, and only after that task's outcome
//! is in the outbox, so a claimer woken by the free slot finds it there.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcq_kernel::{Spec, SpecError, ValidSpec};
use mcq_queue::{ClaimedTask, TaskOutput};
use tokio::sync::OwnedSemaphorePermit;
use uuid::Uuid;

use crate::completer::Reporter;

/// How one task's computation ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Computed; to be completed. Boxed: a partial is kilobytes of exact sums.
    Done(Box<TaskOutput>),
    /// The kernel refused the spec or panicked; to be recorded as a failed attempt.
    Failed { error: String, panicked: bool },
    /// Stopped through its cancel flag; to be handed back.
    Cancelled,
}

/// A finished computation, sent to the completer.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) task_id: i64,
    pub(crate) lease_token: Uuid,
    pub(crate) outcome: Outcome,
    pub(crate) compute_ms: f64,
}

/// Valid specs recently computed, by spec without its seed: the worker's
/// one cache of the kernel's sampling tables.
///
/// A valid spec builds its tables the first time it is priced, and they
/// depend on the model only; for tiny tasks building them is most of the
/// work (measured with `perf`: 38% of a worker's CPU during a burn-down of
/// 2-path jobs, with tables built per task). The specs of a batch
/// usually differ only in their seed, so each task's spec is taken from
/// the one kept here ([`mcq_kernel::ValidSpec::with_seed`]) and the tables
/// are built once.
#[derive(Debug, Default)]
pub(crate) struct Specs {
    recent: Mutex<VecDeque<(Spec, ValidSpec)>>,
}

/// Distinct seedless specs kept; a linear scan of a few is cheaper than
/// hashing a spec.
const SPECS_KEPT: usize = 8;

impl Specs {
    /// `spec` validated, sharing the tables of an equal seedless spec if
    /// one was seen recently.
    fn validate(&self, spec: &Spec) -> Result<ValidSpec, Vec<SpecError>> {
        let seedless = Spec {
            seed: None,
            ..spec.clone()
        };
        if let Some(seed) = spec.seed {
            let recent = self.lock();
            if let Some((_, valid)) = recent.iter().find(|(s, _)| *s == seedless) {
                return Ok(valid.with_seed(seed));
            }
        }
        let valid = spec.validate()?;
        let mut recent = self.lock();
        if recent.len() >= SPECS_KEPT {
            recent.pop_back();
        }
        recent.push_front((seedless, valid.clone()));
        Ok(valid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Spec, ValidSpec)>> {
        // Each operation is one deque call: a panic cannot leave it half-done.
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Claimed tasks waiting for a compute slot: filled by the claimer, taken
/// by the slots.
#[derive(Debug)]
pub(crate) struct LocalQueue {
    state: Mutex<Waiting>,
    /// Signalled when a slot takes a task and leaves at most `low_water`
    /// waiting, so the claimer can top up.
    taken: tokio::sync::Notify,
    /// Set by the claimer: the most tasks left waiting at which it wants
    /// to hear of a take. Waking it at every take, to find it need not
    /// claim yet, would preempt a kernel thread each time (docs/worker.md).
    low_water: AtomicUsize,
}

impl Default for LocalQueue {
    fn default() -> Self {
        LocalQueue {
            state: Mutex::default(),
            taken: tokio::sync::Notify::new(),
            low_water: AtomicUsize::new(usize::MAX),
        }
    }
}

#[derive(Debug, Default)]
struct Waiting {
    tasks: VecDeque<(ClaimedTask, Arc<AtomicBool>)>,
    /// Set at shutdown: slots take nothing more.
    closed: bool,
}

impl LocalQueue {
    /// Adds a claimed task and its cancel flag at the back.
    pub(crate) fn push(&self, task: ClaimedTask, cancel: Arc<AtomicBool>) {
        self.lock().tasks.push_back((task, cancel));
    }

    /// The next task for a slot, if the queue is open and not empty.
    fn take(&self) -> Option<(ClaimedTask, Arc<AtomicBool>)> {
        let (next, left) = {
            let mut waiting = self.lock();
            if waiting.closed {
                (None, 0)
            } else {
                (waiting.tasks.pop_front(), waiting.tasks.len())
            }
        };
        if next.is_some() && left <= self.low_water.load(Ordering::Relaxed) {
            self.taken.notify_one();
        }
        next
    }

    /// Asks to hear of takes only once at most `tasks` are left waiting.
    pub(crate) fn wake_at_or_below(&self, tasks: usize) {
        self.low_water.store(tasks, Ordering::Relaxed);
    }

    /// Takes up to `n` tasks from the back (the last claimed), for handing
    /// them to another worker; they come out in queue order.
    pub(crate) fn take_back(&self, n: usize) -> Vec<(ClaimedTask, Arc<AtomicBool>)> {
        let mut waiting = self.lock();
        let keep = waiting.tasks.len().saturating_sub(n);
        waiting.tasks.split_off(keep).into()
    }

    /// Tasks waiting.
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once a slot has taken a task (at once if one did since the
    /// last call returned).
    pub(crate) async fn taken(&self) {
        self.taken.notified().await;
    }

    /// Closes the queue and returns what never started.
    pub(crate) fn close(&self) -> Vec<(ClaimedTask, Arc<AtomicBool>)> {
        let mut waiting = self.lock();
        waiting.closed = true;
        waiting.tasks.drain(..).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // Each operation is one deque call or flag: a panic cannot leave it half-done.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Starts a compute slot on `pool`: it runs the tasks of `queue` one after
/// the other, reporting each outcome to `out`, and drops `permit` once it
/// finds the queue empty or closed.
pub(crate) fn spawn(
    pool: &rayon::ThreadPool,
    specs: Arc<Specs>,
    queue: Arc<LocalQueue>,
    permit: OwnedSemaphorePermit,
    out: Reporter,
) {
    pool.spawn(move || {
        while let Some((task, cancel)) = queue.take() {
            run_one(&specs, &task, &cancel, &out);
        }
        drop(permit);
    });
}

/// Computes one task and reports its outcome; a panic in the kernel is
/// caught and reported as a failed attempt.
fn run_one(specs: &Specs, task: &ClaimedTask, cancel: &AtomicBool, out: &Reporter) {
    let start = Instant::now();
    let run = || compute(specs, task, cancel, start);
    let outcome = match catch_unwind(AssertUnwindSafe(run)) {
        Ok(outcome) => outcome,
        Err(payload) => Outcome::Failed {
            error: panic_text(payload.as_ref()),
            panicked: true,
        },
    };
    let compute_ms = start.elapsed().as_secs_f64() * 1e3;
    out.report(Finished {
        task_id: task.task_id,
        lease_token: task.lease_token,
        outcome,
        compute_ms,
    });
}

/// Runs the kernel for one task on the calling thread. A task that covers
/// every chunk of its job is finished here, into the job's result: the
/// store then records it with no partial to write and merge.
pub(crate) fn compute(
    specs: &Specs,
    task: &ClaimedTask,
    cancel: &AtomicBool,
    start: Instant,
) -> Outcome {
    if cancel.load(Ordering::Relaxed) {
        return Outcome::Cancelled;
    }
    let valid = match specs.validate(&task.spec) {
        Ok(valid) => valid,
        Err(errors) => {
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Outcome::Failed {
                error: format!("invalid spec: {}", text.join("; ")),
                panicked: false,
            };
        }
    };
    let output = match &task.chunks {
        Some(chunks) if chunks.start == 0 && Some(chunks.end) == valid.chunk_count() => {
            valid.run_chunks(chunks.clone(), cancel).map(|partial| {
                TaskOutput::Result(valid.finish(&partial, start.elapsed().as_secs_f64() * 1e3))
            })
        }
        Some(chunks) => valid
            .run_chunks(chunks.clone(), cancel)
            .map(TaskOutput::Partial),
        None => valid.price(cancel).map(TaskOutput::Result),
    };
    match output {
        Ok(output) => Outcome::Done(Box::new(output)),
        Err(mcq_kernel::Cancelled) => Outcome::Cancelled,
    }
}

/// The message of a panic payload (`panic!` gives `&str` or `String`).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    format!("kernel panicked: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_differing_in_seed_share_tables_and_keep_their_seed() {
        let specs = Specs::default();
        let spec = |seed| Spec {
            runs: Some(1000),
            seed: Some(seed),
            ..Spec::default()
        };
        let first = specs.validate(&spec(1)).expect("valid");
        let second = specs.validate(&spec(2)).expect("valid");
        assert_eq!(first.spec(), &spec(1));
        assert_eq!(second.spec(), &spec(2));
        assert_eq!(specs.lock().len(), 1, "one entry for both seeds");
        let bad = Spec {
            down: 2.0,
            ..spec(3)
        };
        assert!(specs.validate(&bad).is_err());
        assert_eq!(specs.lock().len(), 1, "invalid specs are not kept");
        for periods in 1..=20 {
            specs.validate(&Spec { periods, ..spec(4) }).expect("valid");
        }
        assert_eq!(specs.lock().len(), SPECS_KEPT);
    }

    fn task(id: i64, seed: u64) -> ClaimedTask {
        ClaimedTask {
            task_id: id,
            job_id: Uuid::now_v7(),
            lease_token: Uuid::new_v4(),
            attempt: 1,
            spec: Spec {
                runs: Some(1000),
                seed: Some(seed),
                ..Spec::default()
            },
            chunks: None,
        }
    }

    #[tokio::test]
    async fn the_claimer_hears_of_takes_only_from_its_mark_down() {
        let queue = LocalQueue::default();
        for id in 1..=5 {
            queue.push(task(id, id as u64), Arc::default());
        }
        let heard = |queue: &LocalQueue| {
            let taken = queue.taken();
            tokio::pin!(taken);
            std::future::Future::poll(
                taken.as_mut(),
                &mut std::task::Context::from_waker(std::task::Waker::noop()),
            )
            .is_ready()
        };
        queue.take().expect("a task");
        assert!(heard(&queue), "without a mark every take is told");
        queue.wake_at_or_below(2);
        queue.take().expect("a task");
        assert!(!heard(&queue), "three left, above the mark");
        queue.take().expect("a task");
        assert!(heard(&queue), "two left: at the mark");
        let back = queue.take_back(5);
        assert_eq!(
            back.iter().map(|(t, _)| t.task_id).collect::<Vec<_>>(),
            [4, 5],
            "taken from the back, in queue order"
        );
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn one_slot_runs_every_waiting_task_in_order_then_frees_its_permit() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let queue = Arc::new(LocalQueue::default());
        for id in 1..=3 {
            queue.push(task(id, id as u64), Arc::default());
        }
        let outbox = Arc::new(crate::completer::Outbox::new(Arc::new(
            crate::pace::Pace::new(),
        )));
        let (reporter, _woken) = Reporter::new(outbox.clone(), Arc::default(), 1);
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let permit = slots.clone().try_acquire_owned().expect("a free slot");
        // One start, no claimer: the slot itself goes on to the next task.
        spawn(&pool, Arc::default(), queue.clone(), permit, reporter);
        let all = slots.acquire().await.expect("the slot comes back");
        drop(all);
        assert!(queue.is_empty());
        let done = outbox.take_done(10);
        assert_eq!(
            done.iter().map(|d| d.task_id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // Each was computed as `mcq price` would, seed for seed.
        for d in &done {
            let TaskOutput::Result(result) = &d.output else {
                panic!("a whole-job task brings its result");
            };
            let alone = task(d.task_id, d.task_id as u64)
                .spec
                .validate()
                .expect("valid")
                .price(&AtomicBool::new(false))
                .expect("not cancelled");
            assert_eq!(result.price.to_bits(), alone.price.to_bits());
        }
    }

    #[test]
    fn a_closed_queue_gives_its_tasks_back_and_no_more_to_slots() {
        let queue = LocalQueue::default();
        queue.push(task(1, 1), Arc::default());
        queue.push(task(2, 2), Arc::default());
        assert_eq!(queue.take().map(|(t, _)| t.task_id), Some(1));
        let left: Vec<i64> = queue.close().into_iter().map(|(t, _)| t.task_id).collect();
        assert_eq!(left, vec![2]);
        queue.push(task(3, 3), Arc::default());
        assert!(queue.take().is_none(), "a closed queue starts nothing");
    }

    #[test]
    fn panic_payloads_become_readable_errors() {
        let caught = catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: boom 7");
        let caught = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: plain");
    }
}
