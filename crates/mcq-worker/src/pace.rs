//! The recent compute time per task, which sizes the prefetch window.

use mcq_kernel::Spec;
use mcq_queue::ClaimedTask;

/// What makes two tasks take the same time: their job's spec but its seed,
/// and the chunks the task computes (`None`: the whole job).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskShape {
    spec: Spec,
    chunks: Option<u64>,
}

impl TaskShape {
    pub(crate) fn of(task: &ClaimedTask) -> TaskShape {
        TaskShape {
            spec: Spec {
                seed: None,
                ..task.spec.clone()
            },
            chunks: task.chunks.as_ref().map(|c| c.end - c.start),
        }
    }
}

/// The shape of the tasks claimed since the worker last ran out of work.
#[derive(Debug, Default, Clone, PartialEq)]
enum Shapes {
    #[default]
    None,
    /// Every one of them had this shape.
    One(TaskShape),
    /// They differed.
    Mixed,
}

/// Moving average of the compute time of recent tasks.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pace {
    average_ms: Option<f64>,
    shapes: Shapes,
    /// The average when the worker last ran out of work, with the shape of
    /// every task behind it.
    kept: Option<(TaskShape, f64)>,
}

/// Weight of the newest sample: the average follows a change of job shape
/// within a few dozen tasks.
const WEIGHT: f64 = 0.1;

impl Pace {
    /// Adds one computed task's time.
    pub(crate) fn record(&mut self, compute_ms: f64) {
        if !compute_ms.is_finite() {
            return;
        }
        self.average_ms = Some(match self.average_ms {
            None => compute_ms,
            Some(old) => old + WEIGHT * (compute_ms - old),
        });
    }

    /// Notes a claimed task's shape. The first task of new work with the
    /// shape of every task of the last brings that work's average back:
    /// its tasks take the same time, so the worker claims ahead while the
    /// first of them runs instead of after it.
    pub(crate) fn claimed(&mut self, task: &ClaimedTask) {
        match &self.shapes {
            Shapes::Mixed => {}
            Shapes::One(shape) => {
                if *shape != TaskShape::of(task) {
                    self.shapes = Shapes::Mixed;
                }
            }
            Shapes::None => {
                let shape = TaskShape::of(task);
                if self.average_ms.is_none()
                    && let Some((kept, ms)) = &self.kept
                    && *kept == shape
                {
                    self.average_ms = Some(*ms);
                }
                self.shapes = Shapes::One(shape);
            }
        }
    }

    /// The worker ran out of work: it forgets the average, since the next
    /// batch may hold tasks of another size, and until one of them has
    /// finished only free slots are claimed, so long tasks are not hoarded
    /// on the strength of short ones. It keeps it for new work whose first
    /// task has the shape of every task behind the average.
    pub(crate) fn rest(&mut self) {
        if let (Some(ms), Shapes::One(shape)) =
            (self.average_ms.take(), std::mem::take(&mut self.shapes))
        {
            self.kept = Some((shape, ms));
        }
    }

    /// The average in milliseconds, if a task finished since the last
    /// rest, or the kept one came back.
    pub(crate) fn average_ms(&self) -> Option<f64> {
        self.average_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(runs: u64, seed: u64, chunks: Option<std::ops::Range<u64>>) -> ClaimedTask {
        ClaimedTask {
            task_id: 1,
            job_id: uuid::Uuid::nil(),
            batch_id: None,
            lease_token: uuid::Uuid::nil(),
            attempt: 1,
            spec: Spec {
                runs: Some(runs),
                seed: Some(seed),
                ..Spec::default()
            },
            chunks,
        }
    }

    #[test]
    fn unknown_until_a_task_finished_and_after_a_rest() {
        let mut pace = Pace::default();
        assert_eq!(pace.average_ms(), None);
        pace.record(10.0);
        assert_eq!(pace.average_ms(), Some(10.0));
        pace.rest();
        assert_eq!(pace.average_ms(), None);
        pace.record(f64::NAN);
        assert_eq!(pace.average_ms(), None, "a NaN is no sample");
    }

    #[test]
    fn new_work_of_the_same_shape_brings_the_average_back() {
        let mut pace = Pace::default();
        for seed in 0..3 {
            pace.claimed(&task(1_000_000, seed, Some(0..16)));
            pace.record(4.0);
        }
        pace.rest();
        assert_eq!(pace.average_ms(), None);
        // Another seed, the same spec and chunks: the same time.
        pace.claimed(&task(1_000_000, 99, Some(0..16)));
        assert_eq!(pace.average_ms(), Some(4.0));
        pace.record(6.0);
        pace.rest();
        pace.claimed(&task(1_000_000, 7, Some(16..32)));
        assert_eq!(
            pace.average_ms(),
            Some(4.2),
            "kept again, moved by the new sample"
        );
    }

    #[test]
    fn new_work_of_another_shape_or_after_mixed_work_starts_unknown() {
        let mut pace = Pace::default();
        pace.claimed(&task(1_000_000, 1, Some(0..16)));
        pace.record(4.0);
        pace.rest();
        pace.claimed(&task(1_000_000, 2, Some(0..64)));
        assert_eq!(pace.average_ms(), None, "other chunks");
        pace.rest();
        pace.claimed(&task(2_000_000, 2, Some(0..16)));
        assert_eq!(pace.average_ms(), None, "another spec");
        pace.record(8.0);
        pace.claimed(&task(1_000_000, 3, Some(0..16)));
        pace.record(4.0);
        pace.rest();
        pace.claimed(&task(2_000_000, 4, Some(0..16)));
        assert_eq!(pace.average_ms(), None, "nothing is kept from mixed work");
        pace.rest();
        pace.claimed(&task(1_000_000, 4, Some(0..16)));
        assert_eq!(
            pace.average_ms(),
            Some(4.0),
            "the last average of that shape alone, not the mixed one"
        );
    }

    #[test]
    fn the_average_moves_towards_new_samples() {
        let mut pace = Pace::default();
        pace.record(100.0);
        for _ in 0..100 {
            pace.record(1.0);
        }
        let average = pace.average_ms().expect("known");
        assert!((1.0..1.01).contains(&average), "{average}");
    }
}
