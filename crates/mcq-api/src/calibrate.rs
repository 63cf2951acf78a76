//! The kernel's speed on this server, measured by short timed runs and
//! kept for ten minutes: the basis of a dry run's predictions.
//!
//! What a Monte Carlo path costs depends on the periods, the estimator
//! (which control variates are sampled) and whether delta is summed, not
//! on the prices or the seed; an exact pricing's cost depends on the
//! periods and delta. Each such [`Shape`] is timed once (the median of
//! nine runs of about 2·10⁷ path-steps, 5–20 ms each, on every core at
//! once, after the tables are built; fewer, but at least three, when they
//! take over 100 ms) and cached, so a dry run of a 100,000-job batch of
//! one shape times the kernel once.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcq_kernel::{CHUNK_PATHS, Method, Spec, ValidSpec, VarianceReduction};

/// How long a measured speed is used before it is measured again: the
/// load on the machine changes, and so does what a path costs.
const KEPT_FOR: Duration = Duration::from_secs(600);
/// Most Monte Carlo shapes timed within [`KEPT_FOR`]; see the module.
const MAX_TIMED_SHAPES: usize = 32;
/// Path-steps of one timed Monte Carlo run.
const TIMED_PATH_STEPS: u64 = 20_000_000;
/// Most chunks of one timed Monte Carlo run (16 chunks: 1M paths).
const MAX_TIMED_CHUNKS: u64 = 16;
/// Timed runs per shape on each core; the median of all is kept.
const RUNS: usize = 9;
/// Fewest timed runs per shape on each core.
const MIN_RUNS: usize = 3;
/// Time past which no further run starts once [`MIN_RUNS`] are done:
/// shapes whose single run is long (hundreds of periods, or exact
/// pricings near 30 periods) are timed fewer times.
const TIMING_BUDGET: Duration = Duration::from_millis(100);
/// Most periods an exact pricing is timed at; above, the time is scaled
/// from there (meet in the middle costs about 2^(n/2) · n).
const MAX_TIMED_EXACT_PERIODS: u32 = 30;

/// What a job's kernel time depends on, besides its number of paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    method: Method,
    periods: u32,
    variance_reduction: VarianceReduction,
    delta: bool,
}

impl Shape {
    /// The shape of a valid spec.
    pub(crate) fn of(spec: &Spec) -> Shape {
        Shape {
            method: spec.method,
            periods: spec.periods,
            // The exact method ignores the estimator.
            variance_reduction: match spec.method {
                Method::Mc => spec.variance_reduction,
                Method::Exact => VarianceReduction::None,
            },
            delta: spec.wants_delta(),
        }
    }
}

/// The measured cost of one shape: milliseconds per path (Monte Carlo) or
/// per pricing (exact).
#[derive(Debug, Clone, Copy)]
struct Measured {
    ms: f64,
    at: Instant,
}

/// Measured shapes, and how many Monte Carlo shapes may be timed.
struct Calibrations {
    measured: Mutex<HashMap<Shape, Measured>>,
    budget: usize,
}

fn global() -> &'static Calibrations {
    static GLOBAL: OnceLock<Calibrations> = OnceLock::new();
    GLOBAL.get_or_init(|| Calibrations::new(MAX_TIMED_SHAPES))
}

/// Milliseconds of one core per unit of `spec`'s shape: per path for
/// Monte Carlo, per pricing for `exact`. `spec` is the first spec seen of
/// its shape and is what gets timed (its prices do not change the cost).
/// Blocks while timing: call it off the async threads.
pub(crate) fn ms_per_unit(spec: &ValidSpec) -> f64 {
    global().ms_per_unit(spec)
}

impl Calibrations {
    fn new(budget: usize) -> Calibrations {
        Calibrations {
            measured: Mutex::default(),
            budget,
        }
    }

    fn ms_per_unit(&self, spec: &ValidSpec) -> f64 {
        let periods = spec.spec().periods;
        if spec.spec().method == Method::Exact && periods > MAX_TIMED_EXACT_PERIODS {
            let timed = Spec {
                periods: MAX_TIMED_EXACT_PERIODS,
                ..spec.spec().clone()
            };
            // Fewer periods keep a valid spec valid (the overflow guard only
            // loosens); should it not, the cost is unknown and taken as 0.
            let Ok(timed) = timed.validate() else {
                return 0.0;
            };
            let half_steps = f64::from(periods - MAX_TIMED_EXACT_PERIODS) / 2.0;
            return self.ms_per_unit(&timed) * half_steps.exp2() * f64::from(periods)
                / f64::from(MAX_TIMED_EXACT_PERIODS);
        }
        let shape = Shape::of(spec.spec());
        let now = Instant::now();
        {
            // A poisoned map only lost an entry being written: it is sound.
            let mut measured = self
                .measured
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            measured.retain(|_, m| now.duration_since(m.at) < KEPT_FOR);
            if let Some(m) = measured.get(&shape) {
                return m.ms;
            }
            let timed_mc = measured.keys().filter(|s| s.method == Method::Mc).count();
            if shape.method == Method::Mc && timed_mc >= self.budget {
                let nearest = measured
                    .iter()
                    .filter(|(s, _)| s.same_but_periods(&shape))
                    .min_by(|(a, _), (b, _)| {
                        a.periods_distance(&shape)
                            .total_cmp(&b.periods_distance(&shape))
                    });
                if let Some((s, m)) = nearest {
                    return m.ms * f64::from(shape.periods) / f64::from(s.periods.max(1));
                }
            }
        }
        // Two requests may time the same shape at once; both results are
        // measurements, and the later one is kept.
        let ms = time(spec);
        self.measured
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(shape, Measured { ms, at: now });
        ms
    }
}

impl Shape {
    /// The same estimator, method and delta, whatever the periods.
    fn same_but_periods(&self, other: &Shape) -> bool {
        Shape {
            periods: other.periods,
            ..*self
        } == *other
    }

    /// How far apart two shapes' periods are, as a ratio (log scale).
    fn periods_distance(&self, other: &Shape) -> f64 {
        (f64::from(self.periods.max(1)) / f64::from(other.periods.max(1)))
            .ln()
            .abs()
    }
}

/// Times the kernel on `spec`'s shape. Monte Carlo runs on every core at
/// once, as workers and `mcq price` run it: a core's speed with its
/// neighbours busy (shared caches, memory, clock) is what work spread
/// over the machine gets, and under load from elsewhere the timing sees
/// that load too.
fn time(spec: &ValidSpec) -> f64 {
    match spec.spec().method {
        Method::Mc => {
            let seeded = spec.with_seed(0);
            seeded.build_tables();
            let periods = u64::from(spec.spec().periods.max(1));
            let chunks = TIMED_PATH_STEPS
                .div_ceil(periods * CHUNK_PATHS)
                .clamp(1, MAX_TIMED_CHUNKS);
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let mut times: Vec<f64> = std::thread::scope(|scope| {
                let threads: Vec<_> = (0..cores)
                    .map(|_| {
                        let seeded = &seeded;
                        scope.spawn(move || {
                            let cancel = AtomicBool::new(false);
                            timings(|| {
                                // Never cancelled: the flag stays false.
                                let _ = seeded.run_chunks(0..chunks, &cancel);
                            })
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .flat_map(|thread| thread.join().unwrap_or_default())
                    .collect()
            });
            median(&mut times) / (chunks * CHUNK_PATHS) as f64
        }
        Method::Exact => {
            let cancel = AtomicBool::new(false);
            median(&mut timings(|| {
                let _ = spec.price(&cancel);
            }))
        }
    }
}

/// Timings of `run` in milliseconds: [`RUNS`] of them, or as many as
/// [`TIMING_BUDGET`] holds if that is fewer, but at least [`MIN_RUNS`].
fn timings(mut run: impl FnMut()) -> Vec<f64> {
    let started = Instant::now();
    let mut times = Vec::with_capacity(RUNS);
    while times.len() < RUNS && (times.len() < MIN_RUNS || started.elapsed() < TIMING_BUDGET) {
        let run_started = Instant::now();
        run();
        times.push(run_started.elapsed().as_secs_f64() * 1e3);
    }
    times
}

/// The median of `times` (0 for none: a timing thread that panicked).
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(spec: Spec) -> ValidSpec {
        spec.with_defaults().validate().unwrap()
    }

    #[test]
    fn prices_and_seeds_do_not_change_the_shape_but_periods_and_delta_do() {
        let base = Spec::default().with_defaults();
        let other_prices = Spec {
            exercise: 35.0,
            initial: 25.0,
            seed: Some(7),
            ..base.clone()
        };
        assert_eq!(Shape::of(&base), Shape::of(&other_prices));
        let longer = Spec {
            periods: 40,
            ..base.clone()
        };
        assert_ne!(Shape::of(&base), Shape::of(&longer));
        let with_delta = Spec {
            greeks: vec![mcq_kernel::Greek::Delta],
            ..base.clone()
        };
        assert_ne!(Shape::of(&base), Shape::of(&with_delta));
    }

    #[test]
    fn a_path_costs_more_with_more_periods_and_is_measured_once() {
        let short = valid(Spec {
            periods: 10,
            ..Spec::default()
        });
        let long = valid(Spec {
            periods: 200,
            ..Spec::default()
        });
        let (a, b) = (ms_per_unit(&short), ms_per_unit(&long));
        assert!(a > 0.0 && b > 0.0, "{a} {b}");
        // Twenty times the steps per path: a path cannot cost less.
        assert!(b > 2.0 * a, "10 periods {a} ms per path, 200 periods {b}");
        // Cached: the same number again, whatever the noise.
        assert_eq!(ms_per_unit(&short), a);
    }

    #[test]
    fn past_its_budget_a_new_shape_is_scaled_from_the_nearest_timed_one() {
        let calibrations = Calibrations::new(1);
        let at = |periods| {
            valid(Spec {
                periods,
                ..Spec::default()
            })
        };
        let ten = calibrations.ms_per_unit(&at(10));
        assert!(ten > 0.0);
        // Not timed: exactly the 10-period cost per step, and not kept.
        let forty = calibrations.ms_per_unit(&at(40));
        assert!((forty / ten - 4.0).abs() < 1e-9, "{ten} {forty}");
        assert_eq!(calibrations.measured.lock().unwrap().len(), 1);
        // Another estimator has no timed shape to scale from: timed.
        let antithetic = valid(Spec {
            periods: 10,
            variance_reduction: VarianceReduction::Antithetic,
            ..Spec::default()
        });
        assert_ne!(Shape::of(antithetic.spec()), Shape::of(at(10).spec()));
        assert!(calibrations.ms_per_unit(&antithetic) > 0.0);
        assert_eq!(calibrations.measured.lock().unwrap().len(), 2);
    }

    #[test]
    fn exact_pricings_are_timed_and_scaled_past_thirty_periods() {
        let at = |periods| {
            valid(Spec {
                periods,
                method: Method::Exact,
                runs: None,
                ..Spec::default()
            })
        };
        let thirty = ms_per_unit(&at(30));
        let forty = ms_per_unit(&at(40));
        assert!(thirty > 0.0);
        // Scaled, not timed: exactly 2^5 · 40/30 times the 30-period time.
        assert!(
            (forty / thirty - 32.0 * 40.0 / 30.0).abs() < 1e-9,
            "{thirty} {forty}"
        );
    }
}
