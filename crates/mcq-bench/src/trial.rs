//! What running one trial on any platform hands back to the runner.

use uuid::Uuid;

use crate::breakdown::Breakdown;

/// One call's answer and timing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallOutcome {
    /// Server job id (service only).
    pub job_id: Option<Uuid>,
    /// Price.
    pub price: f64,
    /// Its standard error.
    pub std_error: f64,
    /// Where its time went.
    pub breakdown: Breakdown,
}

/// One trial's measurements, calls in batch order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrialOutcome {
    /// First submit to last result seen, in milliseconds.
    pub wall_ms: f64,
    /// Computations that could run at once.
    pub slots: u32,
    /// Every call.
    pub calls: Vec<CallOutcome>,
    /// Status polls made while waiting.
    pub polls: u32,
}
