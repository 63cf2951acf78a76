//! `mcq bench kernel`: nanoseconds per path-step of the kernel against a
//! faithful port of the original loop, measured side by side in one run;
//! the same on other inputs; scaling over threads; and time to a target
//! standard error, plain against the best control variate.
//!
//! The machine is usually shared, so the runs of different rows are
//! interleaved (load that comes and goes hits all of them alike) and each
//! row reports the fastest and the median of its repeats. The headline
//! ratio, plain kernel against the faithful loop, is given fastest against
//! fastest and median against median, both from the same invocation.

mod report;
mod shapes;

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use mcq_kernel::original::{NetRandom, Sample, Xoshiro256};
use mcq_kernel::{CHUNK_PATHS, Greek, MAX_RUNS, Spec, ValidSpec, VarianceReduction};
use serde_json::{Value, json};

use report::Report;
use shapes::shapes;

use super::count::count;
use super::exit::{Outcome, bad_input};

/// Most paths per timed run: the scaling table prices four times as many
/// in one spec, which takes at most `MAX_RUNS` paths (whole chunks).
const MAX_PATHS: u64 = MAX_RUNS / 4 / CHUNK_PATHS * CHUNK_PATHS;

/// Most repeats: every row keeps one sample per repeat.
const MAX_REPEATS: u64 = 1000;

/// Most threads in the scaling table (one pool of that size at a time).
const MAX_THREADS: u64 = 1024;

/// Flags of this subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Paths per timed kernel run at the defaults (rounded up to whole
    /// chunks of 65536; the original loop runs an eighth of them, other
    /// shapes the same number of path-steps) [at most 2499936256].
    #[arg(long, allow_negative_numbers = true, default_value_t = 1 << 20, value_parser = count::<u64>(1..=MAX_PATHS))]
    paths: u64,
    /// Timed runs per row; the fastest and the median are reported.
    #[arg(long, allow_negative_numbers = true, default_value_t = 10, value_parser = count::<u32>(1..=MAX_REPEATS))]
    repeats: u32,
    /// Periods per path (the sample's 20 by default; up^periods must stay
    /// at most 1e100 with the default up of 1.4, so at most 684).
    #[arg(long, allow_negative_numbers = true, default_value_t = 20, value_parser = count::<u32>(1..=1000))]
    periods: u32,
    /// Most threads in the scaling table [default: all cores].
    #[arg(long, allow_negative_numbers = true, value_parser = count::<u16>(1..=MAX_THREADS))]
    max_threads: Option<u16>,
    /// Standard error for the time-to-target comparison (a finite number
    /// greater than 0).
    #[arg(long, default_value_t = 1e-3, value_parser = positive_finite, allow_negative_numbers = true)]
    target_std_error: f64,
    /// Skip the time-to-target comparison.
    #[arg(long)]
    no_target: bool,
    /// Skip the table of other inputs (periods, p near 0 and 1, puts).
    #[arg(long)]
    no_shapes: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

/// Parses `--target-std-error`: a standard error is a finite number
/// greater than 0 (NaN or 0 would make the section meaningless).
fn positive_finite(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|e| format!("{e}: give a number such as 1e-3"))?;
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "must be a finite number greater than 0 (got {value}); use --no-target to skip the section"
        ))
    }
}

/// The estimators, in column order.
const ESTIMATORS: [(&str, VarianceReduction); 5] = [
    ("plain", VarianceReduction::None),
    ("arithmetic control", VarianceReduction::Arithmetic),
    ("geometric control", VarianceReduction::Geometric),
    ("auto (both controls)", VarianceReduction::Auto),
    ("antithetic", VarianceReduction::Antithetic),
];

/// Name of the faithful row, against which every ratio is taken.
const FAITHFUL: &str = "original loop, .NET System.Random, branch per step (faithful)";

/// Seconds taken by `f`; its result is kept opaque so the work is not
/// optimised away.
fn time<T>(f: impl FnOnce() -> T) -> f64 {
    let start = Instant::now();
    std::hint::black_box(f());
    start.elapsed().as_secs_f64()
}

/// The timings of one row, in ns per path-step.
#[derive(Debug, Default)]
struct Samples(Vec<f64>);

impl Samples {
    fn best(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn median(&self) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
        }
    }

    fn json(&self) -> Value {
        json!({ "best": self.best(), "median": self.median() })
    }
}

/// A timed run: returns ns per path-step.
type Run<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// Runs every row `repeats` times, interleaved, and collects the samples.
fn interleave(rows: &mut [(String, Run<'_>)], repeats: u32) -> Vec<Samples> {
    let mut samples: Vec<Samples> = rows.iter().map(|_| Samples::default()).collect();
    for _ in 0..repeats {
        for ((_, run), s) in rows.iter_mut().zip(&mut samples) {
            s.0.push(run());
        }
    }
    samples
}

/// Validates a benchmark spec; the inputs are ours, so a rejection is a bug.
fn validate(spec: Spec) -> anyhow::Result<ValidSpec> {
    spec.validate().map_err(|errors| {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("benchmark spec rejected: {}", text.join("; "))
    })
}

/// A timed single-thread run of `chunks` chunks of `valid`; the tables are
/// built before, so every sample times the paths alone.
fn kernel_run<'a>(valid: ValidSpec, chunks: u64) -> Run<'a> {
    valid.build_tables();
    let never = AtomicBool::new(false);
    let steps = (chunks * CHUNK_PATHS) as f64 * f64::from(valid.spec().periods);
    Box::new(move || time(|| valid.run_chunks(0..chunks, &never)) * 1e9 / steps)
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let chunks = args.paths.div_ceil(CHUNK_PATHS).max(1);
    let paths = chunks * CHUNK_PATHS;
    let original_paths = (paths / 8).max(1);
    let n = args.periods;
    // The flags must describe specs the kernel accepts (e.g. up^periods
    // must stay finite); say which flag to change, as `mcq price` does.
    if let Err(errors) = (Spec {
        periods: n,
        runs: Some(4 * paths),
        seed: Some(1),
        variance_reduction: VarianceReduction::None,
        ..Spec::default()
    })
    .validate()
    {
        let lines: Vec<String> = errors
            .iter()
            .map(|error| {
                let flag = match error.field() {
                    "runs" => "--paths",
                    _ => "--periods",
                };
                format!("{flag}: {error}")
            })
            .collect();
        return Err(bad_input(lines.join("\nerror: ")));
    }

    // Single thread, at the defaults: run_chunks computes on this thread.
    let mut rows: Vec<(String, Run<'_>)> = Vec::new();
    let steps = original_paths as f64 * f64::from(n);
    let sample = Sample::defaults(n, original_paths);
    let (mut net, mut net2, mut xoshiro) =
        (NetRandom::new(1), NetRandom::new(1), Xoshiro256::new(1));
    rows.push((
        FAITHFUL.into(),
        Box::new(move || time(|| sample.price_net(&mut net)) * 1e9 / steps),
    ));
    rows.push((
        "original loop, .NET System.Random, select (not faithful)".into(),
        Box::new(move || time(|| sample.price_net_select(&mut net2)) * 1e9 / steps),
    ));
    rows.push((
        "original loop, xoshiro256++, branch per step".into(),
        Box::new(move || time(|| sample.price_xoshiro(&mut xoshiro)) * 1e9 / steps),
    ));
    let originals = rows.len();
    for (name, vr) in ESTIMATORS {
        let valid = validate(Spec {
            periods: n,
            runs: Some(paths),
            seed: Some(1),
            variance_reduction: vr,
            ..Spec::default()
        })?;
        rows.push((format!("kernel, {name}"), kernel_run(valid, chunks)));
    }
    // The same estimators asked for delta too, interleaved with the rows
    // above, so the cost of delta is read off one run.
    for (name, vr) in ESTIMATORS {
        let valid = validate(Spec {
            periods: n,
            runs: Some(paths),
            seed: Some(1),
            variance_reduction: vr,
            greeks: vec![Greek::Delta],
            ..Spec::default()
        })?;
        rows.push((
            format!("kernel, {name}, with delta"),
            kernel_run(valid, chunks),
        ));
    }
    let single = interleave(&mut rows, args.repeats);
    let names: Vec<String> = rows.into_iter().map(|(name, _)| name).collect();
    // Fastest against fastest, and median against median: on a machine
    // whose speed comes and goes the two can differ a lot.
    let ratio = [
        single[0].best() / single[originals].best(),
        single[0].median() / single[originals].median(),
    ];

    let shapes = if args.no_shapes {
        Vec::new()
    } else {
        shapes(paths * u64::from(n), args.repeats)?
    };
    let scaling = scaling(&args, paths)?;
    let to_target = if args.no_target {
        Vec::new()
    } else {
        to_target(&args)?
    };

    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let report = Report {
        args: &args,
        paths,
        original_paths,
        cpus,
        names: &names,
        single: &single,
        ratio,
        shapes: &shapes,
        scaling: &scaling,
        to_target: &to_target,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).context("encoding the report")?
        );
    } else {
        print!("{}", report.text());
    }
    Ok(Outcome::Done)
}

/// One row of the scaling table.
struct Scaling {
    threads: usize,
    samples: Samples,
    same_bits: bool,
}

/// The plain estimator priced on 1..=N threads (4× the single-thread paths,
/// so every thread gets several chunks), interleaved; wall time.
fn scaling(args: &Args, paths: u64) -> anyhow::Result<Vec<Scaling>> {
    let max = args
        .max_threads
        .map_or_else(rayon::current_num_threads, usize::from);
    let runs = 4 * paths;
    let valid = validate(Spec {
        periods: args.periods,
        runs: Some(runs),
        seed: Some(1),
        variance_reduction: VarianceReduction::None,
        ..Spec::default()
    })?;
    let never = AtomicBool::new(false);
    let steps = runs as f64 * f64::from(args.periods);
    let mut samples: Vec<Samples> = (0..max).map(|_| Samples::default()).collect();
    let mut prices = vec![Vec::new(); max];
    for _ in 0..args.repeats.div_ceil(2) {
        for (threads, (s, prices)) in (1..=max).zip(samples.iter_mut().zip(&mut prices)) {
            // One pool alive at a time: pools of 1 ..= max threads kept
            // together would hold max·(max + 1)/2 threads.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .context("thread pool")?;
            let start = Instant::now();
            let result = pool.install(|| valid.price(&never)).context("cancelled")?;
            s.0.push(start.elapsed().as_secs_f64() * 1e9 / steps);
            prices.push(result.price.to_bits());
        }
    }
    let reference = prices[0][0];
    Ok(samples
        .into_iter()
        .zip(prices)
        .enumerate()
        .map(|(i, (samples, prices))| Scaling {
            threads: i + 1,
            samples,
            same_bits: prices.iter().all(|&p| p == reference),
        })
        .collect())
}

/// Time to the target standard error at the defaults, plain and the best
/// control, on all cores.
struct ToTarget {
    estimator: &'static str,
    /// Control the run used (`auto` resolved).
    used: VarianceReduction,
    paths: u64,
    std_error: f64,
    max_paths_reached: bool,
    /// Wall milliseconds from the request (validation included) to the
    /// answer, one sample per repeat.
    ms: Samples,
}

/// Runs plain and `auto` in target-standard-error mode, interleaved.
fn to_target(args: &Args) -> anyhow::Result<Vec<ToTarget>> {
    let never = AtomicBool::new(false);
    let mut out: Vec<ToTarget> = Vec::new();
    for _ in 0..args.repeats.div_ceil(2) {
        for (i, (estimator, vr)) in [
            ("plain", VarianceReduction::None),
            ("auto (best control)", VarianceReduction::Auto),
        ]
        .into_iter()
        .enumerate()
        {
            let start = Instant::now();
            let valid = validate(Spec {
                runs: None,
                target_std_error: Some(args.target_std_error),
                seed: Some(1),
                variance_reduction: vr,
                ..Spec::default()
            })?;
            let r = valid.price(&never).context("cancelled")?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if out.len() <= i {
                out.push(ToTarget {
                    estimator,
                    used: r.variance_reduction,
                    paths: r.paths,
                    std_error: r.std_error,
                    max_paths_reached: r.max_paths_reached,
                    ms: Samples::default(),
                });
            }
            out[i].ms.0.push(ms);
        }
    }
    Ok(out)
}
