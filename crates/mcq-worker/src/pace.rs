//! The recent compute time per task, which sizes the prefetch window.

/// Moving average of the compute time of recent tasks.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pace {
    average_ms: Option<f64>,
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

    /// Forgets the average when the worker runs out of work: the next
    /// batch may hold tasks of another size, and until one of them has
    /// finished only free slots are claimed, so long tasks are not hoarded
    /// on the strength of short ones.
    pub(crate) fn reset(&mut self) {
        self.average_ms = None;
    }

    /// The average in milliseconds, if a task finished since the last reset.
    pub(crate) fn average_ms(&self) -> Option<f64> {
        self.average_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_until_a_task_finished_and_after_a_reset() {
        let mut pace = Pace::default();
        assert_eq!(pace.average_ms(), None);
        pace.record(10.0);
        assert_eq!(pace.average_ms(), Some(10.0));
        pace.reset();
        assert_eq!(pace.average_ms(), None);
        pace.record(f64::NAN);
        assert_eq!(pace.average_ms(), None, "a NaN is no sample");
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
