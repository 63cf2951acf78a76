//! A validated spec and the ways to price it: chunk by chunk (for the
//! service), or all at once on the current rayon pool.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::antithetic::antithetic_pairs;
use crate::error::Cancelled;
use crate::estimate::{self, Estimate};
use crate::exact;
use crate::geometric::MAX_GEOMETRIC_PERIODS;
use crate::model::Model;
use crate::rng::{Stream, fresh_seed};
use crate::simulate::block_paths;
use crate::spec::{Method, Spec, VarianceReduction};
use crate::tables::Tables;
use crate::validate::MAX_RUNS;
use crate::{Partial, PriceResult};

/// Paths in one chunk: the fixed unit of the random streams. Part of the
/// reproducibility contract — changing it changes every seeded result.
pub const CHUNK_PATHS: u64 = 1 << 16;

/// Chunks of the first round in target-standard-error mode.
const FIRST_ROUND_CHUNKS: u64 = 4;

/// z such that P(|N(0,1)| < z) = 0.95.
const Z95: f64 = 1.959_963_984_540_054;

/// What the Monte Carlo loop computes per path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sampler {
    Plain,
    Antithetic,
    Arithmetic,
    Geometric,
    /// Both controls; the better one is chosen from the same paths.
    Both,
}

/// A spec that passed every check of [`Spec::validate`], with its seed
/// settled; only validation makes one, and deserialising one validates
/// again. Cheap to make and to clone: the sampling tables are built the
/// first time the spec is priced, and clones (and [`ValidSpec::with_seed`])
/// share them, so one spec kept where the kernel runs builds them once.
#[derive(Clone)]
pub struct ValidSpec {
    spec: Spec,
    model: Model,
    sampler: Sampler,
    /// The spec asks for delta: the chunks also sum pathwise deltas.
    delta: bool,
    tables: Arc<Tables>,
}

impl fmt::Debug for ValidSpec {
    /// The spec and which tables exist; the tables' contents would fill screens.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidSpec")
            .field("spec", &self.spec)
            .field("sampler", &self.sampler)
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ValidSpec {
    /// Equal specs (the rest is derived from the spec).
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl ValidSpec {
    /// A spec that passed every check, its missing seed drawn (or its
    /// seed dropped, for `exact`). Builds no table.
    pub(crate) fn new(spec: &Spec) -> Self {
        let mut spec = spec.clone();
        let model = Model::new(&spec);
        if spec.method == Method::Exact {
            spec.seed = None;
        } else if spec.seed.is_none() {
            spec.seed = Some(fresh_seed());
        }
        let sampler = match spec.variance_reduction {
            VarianceReduction::None => Sampler::Plain,
            VarianceReduction::Antithetic => Sampler::Antithetic,
            VarianceReduction::Arithmetic => Sampler::Arithmetic,
            VarianceReduction::Geometric => Sampler::Geometric,
            VarianceReduction::Auto if spec.periods <= MAX_GEOMETRIC_PERIODS => Sampler::Both,
            VarianceReduction::Auto => Sampler::Arithmetic,
        };
        Self {
            delta: spec.wants_delta(),
            spec,
            model,
            sampler,
            tables: Arc::default(),
        }
    }

    /// Builds now the tables that pricing this spec uses, so that a
    /// timed run that follows measures the paths alone.
    pub fn build_tables(&self) {
        if self.spec.method == Method::Exact {
            return;
        }
        let (model, tables) = (&self.model, &*self.tables);
        match self.sampler {
            Sampler::Antithetic => {
                tables.pairs(model);
            }
            Sampler::Plain | Sampler::Arithmetic => {
                tables.blocks(model);
            }
            Sampler::Geometric | Sampler::Both => {
                tables.blocks(model);
                tables.geometric(model);
            }
        }
    }

    /// Names of the tables built so far, for tests of who builds what.
    #[cfg(test)]
    pub(crate) fn tables_built(&self) -> Vec<&'static str> {
        self.tables.built()
    }

    /// The same spec with another seed, sharing this one's tables: they
    /// depend on the model only, so a worker pricing a batch of specs that
    /// differ only in their seed builds them once. `exact` has no seed.
    #[must_use]
    pub fn with_seed(&self, seed: u64) -> ValidSpec {
        let mut copy = self.clone();
        if copy.spec.method != Method::Exact {
            copy.spec.seed = Some(seed);
        }
        copy
    }

    /// The spec (with the seed, once drawn).
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Number of chunks of a fixed-`runs` Monte Carlo spec (`None` for
    /// `exact` and target-standard-error specs, which run as one unit).
    pub fn chunk_count(&self) -> Option<u64> {
        match (self.spec.method, self.spec.runs) {
            (Method::Mc, Some(runs)) if self.spec.target_std_error.is_none() => {
                Some(runs.div_ceil(CHUNK_PATHS))
            }
            _ => None,
        }
    }

    /// Paths of chunk `chunk`: full chunks, the last one shorter, none past
    /// the end. Target-standard-error specs use full chunks only.
    fn chunk_paths(&self, chunk: u64) -> u64 {
        match self.chunk_count() {
            Some(_) => {
                let runs = self.spec.runs.unwrap_or(0);
                runs.saturating_sub(chunk.saturating_mul(CHUNK_PATHS))
                    .min(CHUNK_PATHS)
            }
            None if self.spec.method == Method::Mc => CHUNK_PATHS,
            None => 0,
        }
    }

    fn run_chunk(&self, chunk: u64) -> Partial {
        let paths = self.chunk_paths(chunk);
        if paths == 0 {
            return Partial::default();
        }
        let stream = Stream::new(self.spec.seed.unwrap_or(0), chunk);
        if self.delta {
            self.chunk_sums::<true>(stream, paths)
        } else {
            self.chunk_sums::<false>(stream, paths)
        }
    }

    /// One chunk's partial, with the pathwise delta summed when `DELTA`.
    fn chunk_sums<const DELTA: bool>(&self, stream: Stream, paths: u64) -> Partial {
        let (model, tables) = (&self.model, &*self.tables);
        let geometric = || &tables.geometric(model).payoff[..];
        let blocks = || tables.blocks(model);
        let sums = match self.sampler {
            Sampler::Antithetic => {
                let pairs = paths.div_ceil(2);
                let plan = tables.pairs(model);
                return Partial::from_chunk(
                    2 * pairs,
                    pairs,
                    &antithetic_pairs::<DELTA>(model, plan, stream, pairs),
                );
            }
            Sampler::Plain => {
                block_paths::<false, false, DELTA>(model, blocks(), &[], stream, paths)
            }
            Sampler::Arithmetic => {
                block_paths::<true, false, DELTA>(model, blocks(), &[], stream, paths)
            }
            Sampler::Geometric => {
                block_paths::<false, true, DELTA>(model, blocks(), geometric(), stream, paths)
            }
            Sampler::Both => {
                block_paths::<true, true, DELTA>(model, blocks(), geometric(), stream, paths)
            }
        };
        Partial::from_chunk(paths, paths, &sums)
    }

    /// Simulates chunks `chunks` on the calling thread, checking `cancel`
    /// between chunks. Chunks past the end of a fixed-`runs` spec, and any
    /// chunk of an `exact` spec, contribute nothing.
    pub fn run_chunks(
        &self,
        chunks: Range<u64>,
        cancel: &AtomicBool,
    ) -> Result<Partial, Cancelled> {
        let mut total = Partial::default();
        for chunk in chunks {
            if cancel.load(Ordering::Relaxed) {
                return Err(Cancelled);
            }
            total.merge(&self.run_chunk(chunk));
        }
        Ok(total)
    }

    /// Chunks `chunks` spread over the current rayon pool. The merge is
    /// exact, so the grouping rayon picks does not change a bit.
    fn run_parallel(&self, chunks: Range<u64>, cancel: &AtomicBool) -> Result<Partial, Cancelled> {
        chunks
            .into_par_iter()
            .map(|chunk| self.run_chunks(chunk..chunk + 1, cancel))
            .try_reduce(Partial::default, |mut a, b| {
                a.merge(&b);
                Ok(a)
            })
    }

    fn estimate(&self, partial: &Partial) -> Estimate {
        let moments = partial.moments();
        match self.sampler {
            Sampler::Plain => estimate::plain(&moments),
            Sampler::Antithetic => estimate::antithetic(&moments),
            Sampler::Arithmetic => estimate::control(&moments, VarianceReduction::Arithmetic, 0.0),
            Sampler::Geometric => estimate::control(
                &moments,
                VarianceReduction::Geometric,
                self.geometric_mean(),
            ),
            Sampler::Both => estimate::best_control(&moments, Some(self.geometric_mean())),
        }
    }

    fn geometric_mean(&self) -> f64 {
        self.tables.geometric_mean(&self.model)
    }

    fn result(
        &self,
        partial: &Partial,
        estimate: &Estimate,
        elapsed_ms: f64,
        max_paths_reached: bool,
    ) -> PriceResult {
        let price = self.model.scale * estimate.mean;
        let std_error = self.model.scale * estimate.variance.sqrt();
        let delta = self.delta.then(|| {
            let mu = match estimate.used {
                VarianceReduction::Geometric => self.geometric_mean(),
                _ => 0.0,
            };
            estimate::delta(&partial.moments(), estimate.used, mu)
        });
        PriceResult {
            price,
            std_error,
            ci95: [price - Z95 * std_error, price + Z95 * std_error],
            paths: partial.paths,
            seed: self.spec.seed,
            method: Method::Mc,
            option: self.spec.option,
            variance_reduction: estimate.used,
            variance_reduction_factor: Some(estimate.factor),
            max_paths_reached,
            elapsed_ms,
            delta: delta.map(|d| self.model.delta_scale * d.mean),
            delta_std_error: delta.map(|d| self.model.delta_scale * d.variance.sqrt()),
        }
    }

    fn exact_result(&self, started: Instant) -> PriceResult {
        let exact = exact::meet_in_the_middle(&self.model);
        let price = self.model.scale * exact.payoff;
        PriceResult {
            price,
            std_error: 0.0,
            ci95: [price, price],
            paths: 1u64 << self.spec.periods.min(63),
            seed: None,
            method: Method::Exact,
            option: self.spec.option,
            variance_reduction: VarianceReduction::None,
            variance_reduction_factor: None,
            max_paths_reached: false,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
            delta: self.delta.then_some(self.model.delta_scale * exact.delta),
            delta_std_error: self.delta.then_some(0.0),
        }
    }

    /// Turns the merged partial of all chunks into a result. For an `exact`
    /// spec the partial is ignored and the exact price computed.
    pub fn finish(&self, partial: &Partial, elapsed_ms: f64) -> PriceResult {
        if self.spec.method == Method::Exact {
            let mut result = self.exact_result(Instant::now());
            result.elapsed_ms += elapsed_ms;
            return result;
        }
        let max_reached =
            self.chunk_count().is_none() && partial.paths >= max_tolerance_chunks() * CHUNK_PATHS;
        self.result(partial, &self.estimate(partial), elapsed_ms, max_reached)
    }

    /// Prices the whole spec in this process on the current rayon pool
    /// (all methods and modes), checking `cancel` between chunks.
    pub fn price(&self, cancel: &AtomicBool) -> Result<PriceResult, Cancelled> {
        // The reported time is the computation's: tables come first.
        self.build_tables();
        let started = Instant::now();
        if self.spec.method == Method::Exact {
            return Ok(self.exact_result(started));
        }
        let elapsed = || started.elapsed().as_secs_f64() * 1e3;
        if let Some(chunks) = self.chunk_count() {
            let partial = self.run_parallel(0..chunks, cancel)?;
            return Ok(self.result(&partial, &self.estimate(&partial), elapsed(), false));
        }
        self.price_to_target(cancel, started)
    }

    /// Target-standard-error mode: rounds of chunks 0..c1, c1..c2, … where
    /// each next total is projected from the standard error so far (at least
    /// 1.25× and at most 16× the chunks done). The projection depends only
    /// on the sums, so a seed always gives the same rounds and result.
    fn price_to_target(
        &self,
        cancel: &AtomicBool,
        started: Instant,
    ) -> Result<PriceResult, Cancelled> {
        let target = self.spec.target_std_error.unwrap_or(f64::INFINITY);
        let max_chunks = max_tolerance_chunks();
        let mut partial = Partial::default();
        let (mut done, mut next) = (0u64, FIRST_ROUND_CHUNKS.min(max_chunks));
        loop {
            partial.merge(&self.run_parallel(done..next, cancel)?);
            done = next;
            let estimate = self.estimate(&partial);
            let std_error = self.model.scale * estimate.variance.sqrt();
            let elapsed = started.elapsed().as_secs_f64() * 1e3;
            if std_error <= target {
                return Ok(self.result(&partial, &estimate, elapsed, false));
            }
            if done >= max_chunks {
                return Ok(self.result(&partial, &estimate, elapsed, true));
            }
            let ratio = std_error / target;
            // An f64 → u64 cast saturates, so a huge projection is safe.
            let wanted = (done as f64 * ratio * ratio * 1.1).ceil() as u64;
            next = wanted
                .clamp(done + done.div_ceil(4), done.saturating_mul(16))
                .min(max_chunks);
        }
    }
}

/// Chunks target-standard-error mode may run: at most [`MAX_RUNS`] paths.
fn max_tolerance_chunks() -> u64 {
    MAX_RUNS / CHUNK_PATHS
}
