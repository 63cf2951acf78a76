//! The bridge from the async claimer to the kernel on a rayon pool.
//!
//! Each task runs as one rayon job holding a semaphore permit, so at most
//! `concurrency` tasks compute at once and the tokio runtime never blocks.
//! The outcome goes to the completer's outbox; the permit is returned
//! when the job ends, however it ends, and only after the outcome is in the
//! outbox, so a claimer woken by the free slot finds it there.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Validated specs recently computed, by spec without its seed.
///
/// Validation builds the kernel's sampling tables, which depend on the
/// model only; for tiny tasks that was most of a worker's CPU (measured
/// with `perf`: 38% in building tables during a burn-down of 2-path jobs).
/// The specs of a batch usually differ only in their seed, so the tables
/// are built once and shared ([`mcq_kernel::ValidSpec::with_seed`]).
#[derive(Debug, Default)]
pub(crate) struct Specs {
    recent: Mutex<VecDeque<(Spec, ValidSpec)>>,
}

/// Distinct seedless specs kept; a linear scan of a few is cheaper than
/// hashing a spec.
const SPECS_KEPT: usize = 8;

impl Specs {
    /// `spec` validated, from the tables of an equal seedless spec if one
    /// was seen recently.
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

/// Runs `task` on `pool`; the outcome is reported to `out` and `permit` is
/// dropped afterwards.
pub(crate) fn spawn(
    pool: &rayon::ThreadPool,
    specs: Arc<Specs>,
    task: ClaimedTask,
    cancel: Arc<AtomicBool>,
    permit: OwnedSemaphorePermit,
    out: Reporter,
) {
    pool.spawn(move || {
        let start = Instant::now();
        let run = || compute(&specs, &task, &cancel, start);
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
        drop(permit);
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

    #[test]
    fn panic_payloads_become_readable_errors() {
        let caught = catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: boom 7");
        let caught = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: plain");
    }
}
