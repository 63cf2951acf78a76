//! Checks a [`Spec`] once and precomputes what the estimators need.

use std::ops::Range;
use std::sync::atomic::AtomicBool;

use crate::{Partial, PriceResult, Spec};

/// Paths in one chunk: the fixed unit of the random streams. Part of the
/// reproducibility contract — changing it changes every seeded result.
pub const CHUNK_PATHS: u64 = 1 << 16;

/// A spec that passed validation, with the model's derived quantities.
#[derive(Debug, Clone)]
pub struct ValidSpec {
    spec: Spec,
}

/// One problem with a spec; `field()` names the offending spec field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// Placeholder until the kernel owner writes the real variants.
    #[error("{field}: {message}")]
    Invalid {
        /// Field name as in the JSON spec.
        field: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl SpecError {
    /// The spec field (JSON name) this error is about.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::Invalid { field, .. } => field,
        }
    }
}

/// The computation was stopped through its cancel flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

impl Spec {
    /// Validates every field; returns all problems found, not just the first.
    pub fn validate(&self) -> Result<ValidSpec, Vec<SpecError>> {
        todo!("kernel")
    }
}

impl ValidSpec {
    /// The spec (with the seed, once drawn).
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Number of chunks of a fixed-`runs` Monte Carlo spec (`None` for
    /// `exact` and target-standard-error specs, which run as one unit).
    pub fn chunk_count(&self) -> Option<u64> {
        todo!("kernel")
    }

    /// Simulates chunks `chunks` on the calling thread, checking `cancel`
    /// between chunks.
    pub fn run_chunks(&self, chunks: Range<u64>, cancel: &AtomicBool) -> Result<Partial, Cancelled> {
        let _ = (chunks, cancel);
        todo!("kernel")
    }

    /// Turns the merged partial of all chunks into a result.
    pub fn finish(&self, partial: &Partial, elapsed_ms: f64) -> PriceResult {
        let _ = (partial, elapsed_ms);
        todo!("kernel")
    }

    /// Prices the whole spec in this process on the current rayon pool
    /// (all methods and modes), checking `cancel` between chunks.
    pub fn price(&self, cancel: &AtomicBool) -> Result<PriceResult, Cancelled> {
        let _ = cancel;
        todo!("kernel")
    }
}
