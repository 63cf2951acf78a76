//! The pricing kernel of mcq: Asian options on the binomial path model of
//! the original sample, priced exactly or by reproducible Monte Carlo.
//!
//! This crate depends on no async runtime and no database: the service calls
//! it from worker threads, and the same code prices locally.

mod partial;
mod result;
mod spec;
mod validate;

pub use partial::Partial;
pub use result::PriceResult;
pub use spec::{
    DEFAULT_DOWN, DEFAULT_EXERCISE, DEFAULT_INITIAL, DEFAULT_INTEREST, DEFAULT_PERIODS,
    DEFAULT_RUNS, Method, OptionKind, Spec, VarianceReduction,
};
pub use validate::{CHUNK_PATHS, Cancelled, SpecError, ValidSpec};
