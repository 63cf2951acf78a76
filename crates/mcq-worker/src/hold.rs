//! Held tasks: a benchmark-only mode in which each task keeps its compute
//! slot for a fixed time without using the CPU before it is computed.
//!
//! `mcq bench scale` runs hundreds of worker loops on one machine this
//! way: the queue sees the claims, leases and completions of a fleet whose
//! tasks take `duration` each, while the machine only sleeps. No flag of
//! `mcq worker` or `mcq serve` sets it and the HTTP API has no field for
//! it; it exists only for a [`WorkerConfig`](crate::WorkerConfig) built in
//! code. Results stay real: after the hold the task's own spec is priced
//! as usual (the benchmark submits specs of a few paths), so a held worker
//! can delay a job, never fake its price.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long each task holds its slot, and where the holds are recorded.
#[derive(Debug, Clone)]
pub struct Hold {
    /// Time each task keeps its slot, asleep, before it is computed.
    pub duration: Duration,
    /// When each task of this worker started and ended, for the pickup
    /// latency (the gap a free slot waited for its next task).
    pub spans: Arc<HoldSpans>,
}

impl Hold {
    /// Holds of `duration`, recorded in a fresh [`HoldSpans`].
    pub fn new(duration: Duration) -> Hold {
        Hold {
            duration,
            spans: Arc::default(),
        }
    }
}

/// Start and end of every held task of one worker, in the order they ended.
#[derive(Debug, Default)]
pub struct HoldSpans {
    spans: Mutex<Vec<(Instant, Instant)>>,
}

impl HoldSpans {
    /// Records one task held from `start` to `end`.
    pub(crate) fn record(&self, start: Instant, end: Instant) {
        self.lock().push((start, end));
    }

    /// Takes the spans recorded so far.
    pub fn take(&self) -> Vec<(Instant, Instant)> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Instant, Instant)>> {
        // Each operation is one push or swap: a panic cannot leave it half-done.
        self.spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
