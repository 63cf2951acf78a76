//! Running the kernel for one claimed task, and the validated specs that
//! tasks of one batch share.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use mcq_kernel::{Spec, SpecError, ValidSpec};
use mcq_queue::{ClaimedTask, ComputeSpan, TaskOutput};

use crate::hold::Hold;
use uuid::Uuid;

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

/// A finished computation, reported by its slot to the worker's loop.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) task_id: i64,
    pub(crate) lease_token: Uuid,
    pub(crate) outcome: Outcome,
    pub(crate) compute_ms: f64,
    /// When it ran, for the job's phases (`None` only where nothing ran).
    pub(crate) compute_span: Option<ComputeSpan>,
    /// Its job is not part of a batch.
    pub(crate) lone: bool,
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

/// Computes one task; a panic in the kernel is caught and becomes a
/// failed attempt.
pub(crate) fn run_one(
    specs: &Specs,
    task: &ClaimedTask,
    cancel: &AtomicBool,
    hold: Option<&Hold>,
) -> Finished {
    let start = Instant::now();
    let started = SystemTime::now();
    if let Some(hold) = hold {
        // A sleeping thread is a held slot that costs no CPU.
        std::thread::sleep(hold.duration);
    }
    let run = || compute(specs, task, cancel, start);
    let outcome = match catch_unwind(AssertUnwindSafe(run)) {
        Ok(outcome) => outcome,
        Err(payload) => Outcome::Failed {
            error: panic_text(payload.as_ref()),
            panicked: true,
        },
    };
    if let Some(hold) = hold {
        hold.spans.record(start, Instant::now());
    }
    let elapsed = start.elapsed();
    Finished {
        task_id: task.task_id,
        lease_token: task.lease_token,
        outcome,
        compute_ms: elapsed.as_secs_f64() * 1e3,
        compute_span: Some(ComputeSpan::measured(started, elapsed)),
        lone: task.batch_id.is_none(),
    }
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
    fn only_a_task_of_a_job_without_a_batch_is_lone() {
        let specs = Specs::default();
        let task = |batch_id| ClaimedTask {
            task_id: 1,
            job_id: Uuid::now_v7(),
            batch_id,
            lease_token: Uuid::new_v4(),
            attempt: 1,
            spec: Spec {
                runs: Some(100),
                seed: Some(1),
                ..Spec::default()
            },
            chunks: None,
        };
        let cancel = AtomicBool::new(false);
        let alone = run_one(&specs, &task(None), &cancel, None);
        assert!(alone.lone);
        assert!(matches!(alone.outcome, Outcome::Done(_)));
        let batched = run_one(&specs, &task(Some(Uuid::now_v7())), &cancel, None);
        assert!(!batched.lone);
    }

    #[test]
    fn panic_payloads_become_readable_errors() {
        let caught = catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: boom 7");
        let caught = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(caught.as_ref()), "kernel panicked: plain");
    }
}
