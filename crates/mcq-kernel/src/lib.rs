//! The pricing kernel of mcq: Asian options on the binomial path model of
//! the original sample, priced exactly or by reproducible Monte Carlo.
//!
//! This crate depends on no async runtime and no database: the service calls
//! it from worker threads, and the same code prices locally.
//!
//! The flow: [`Spec::validate`] checks a request (cheaply, building no
//! table) and returns a [`ValidSpec`]; [`ValidSpec::price`] prices it on
//! the current rayon pool, or the service runs [`ValidSpec::run_chunks`]
//! for ranges of chunks on any workers, merges the [`Partial`]s and calls
//! [`ValidSpec::finish`]. The sampling tables are built the first time a
//! valid spec is priced and shared by its clones. With a seed, every route
//! gives the same bits.

mod antithetic;
mod blocks;
mod error;
mod estimate;
mod exact;
mod exact_sum;
mod geometric;
mod integral;
mod model;
pub mod original;
mod pair_blocks;
mod partial;
mod pricing;
mod result;
mod rng;
mod seeds;
mod simulate;
mod spec;
mod tables;
mod validate;

pub use error::{Cancelled, SpecError};
pub use exact::MAX_EXACT_PERIODS;
pub use exact_sum::ExactSum;
pub use geometric::MAX_GEOMETRIC_PERIODS;
pub use partial::Partial;
pub use pricing::{CHUNK_PATHS, ValidSpec};
pub use result::PriceResult;
pub use seeds::{deserialize_seed, job_seed};
pub use spec::{
    DEFAULT_DOWN, DEFAULT_EXERCISE, DEFAULT_INITIAL, DEFAULT_INTEREST, DEFAULT_PERIODS,
    DEFAULT_RUNS, DEFAULT_UP, Greek, MAX_SEED, Method, OptionKind, Spec, VarianceReduction,
};
pub use validate::{MAX_PATH_VALUE, MAX_PERIODS, MAX_RUNS, MIN_RUNS};
