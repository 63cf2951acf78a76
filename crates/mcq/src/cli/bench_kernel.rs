//! `mcq bench kernel`: nanoseconds per path-step of the kernel against a
//! faithful port of the original loop, measured side by side in one run;
//! the same on other inputs; scaling over threads; and time to a target
//! standard error, plain against the best control variate.
//!
//! The machine is usually shared, so the runs of different rows are
//! interleaved (load that comes and goes hits all of them alike) and each
//! row reports the fastest and the median of its repeats. Ratios are taken
//! between the fastest runs of the same invocation.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use mcq_kernel::original::{NetRandom, Sample, Xoshiro256};
use mcq_kernel::{
    CHUNK_PATHS, DEFAULT_DOWN, DEFAULT_UP, OptionKind, Spec, ValidSpec, VarianceReduction,
};
use serde_json::{Value, json};

/// Flags of this subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Paths per timed kernel run at the defaults (whole chunks of 65536;
    /// the original loop runs an eighth of them, other shapes the same
    /// number of path-steps).
    #[arg(long, default_value_t = 1 << 20)]
    paths: u64,
    /// Timed runs per row; the fastest and the median are reported.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Periods per path (the sample's 20 by default).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    periods: u32,
    /// Most threads in the scaling table [default: all cores].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    max_threads: Option<u16>,
    /// Standard error for the time-to-target comparison (0 skips it).
    #[arg(long, default_value_t = 1e-3)]
    target_std_error: f64,
    /// Skip the table of other inputs (periods, p near 0 and 1, puts).
    #[arg(long)]
    no_shapes: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
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

/// A timed single-thread run of `chunks` chunks of `valid`.
fn kernel_run<'a>(valid: ValidSpec, chunks: u64) -> Run<'a> {
    let never = AtomicBool::new(false);
    let steps = (chunks * CHUNK_PATHS) as f64 * f64::from(valid.spec().periods);
    Box::new(move || time(|| valid.run_chunks(0..chunks, &never)) * 1e9 / steps)
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let chunks = args.paths.div_ceil(CHUNK_PATHS).max(1);
    let paths = chunks * CHUNK_PATHS;
    let original_paths = (paths / 8).max(1);
    let n = args.periods;

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
    let single = interleave(&mut rows, args.repeats);
    let names: Vec<String> = rows.into_iter().map(|(name, _)| name).collect();
    let faithful = single[0].best();
    let ratio = faithful / single[originals].best();

    let shapes = if args.no_shapes {
        Vec::new()
    } else {
        shapes(paths * u64::from(n), args.repeats)?
    };
    let scaling = scaling(&args, paths)?;
    let to_target = if args.target_std_error > 0.0 {
        to_target(&args)?
    } else {
        Vec::new()
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
    Ok(ExitCode::SUCCESS)
}

/// One input shape of the "other inputs" table.
struct Shape {
    name: &'static str,
    periods: u32,
    interest: f64,
    exercise: f64,
    option: OptionKind,
}

/// The inputs on which "never slower than 1 ns per path-step" is checked:
/// short and long paths, p near 0 and near 1, puts, deep in and out of the
/// money. p = (interest − 0.8)/0.6 with the default up 1.4 and down 0.8.
const SHAPES: [Shape; 11] = {
    const fn shape(name: &'static str, periods: u32, interest: f64, exercise: f64) -> Shape {
        Shape {
            name,
            periods,
            interest,
            exercise,
            option: OptionKind::Call,
        }
    }
    const fn put(mut s: Shape) -> Shape {
        s.option = OptionKind::Put;
        s
    }
    [
        shape("defaults (20 periods, call)", 20, 1.08, 30.0),
        shape("1 period", 1, 1.08, 30.0),
        shape("2 periods", 2, 1.08, 30.0),
        shape("7 periods", 7, 1.08, 30.0),
        shape("40 periods", 40, 1.08, 30.0),
        shape("400 periods", 400, 1.08, 30.0),
        shape("p = 0.001 (interest 0.8006)", 20, 0.8006, 30.0),
        shape("p = 0.999 (interest 1.3994)", 20, 1.3994, 30.0),
        put(shape("put", 20, 1.08, 30.0)),
        put(shape("put, 1 period", 1, 1.08, 30.0)),
        shape("deep out of the money (strike 300)", 20, 1.08, 300.0),
    ]
};

/// One row of the "other inputs" table: ns per path-step per estimator
/// (`None` where the estimator does not accept the shape).
struct ShapeRow {
    name: &'static str,
    periods: u32,
    p: f64,
    put: bool,
    estimators: Vec<Option<Samples>>,
}

/// Every estimator on every shape, single thread, about `steps`
/// path-steps per run (whole chunks).
fn shapes(steps: u64, repeats: u32) -> anyhow::Result<Vec<ShapeRow>> {
    let mut rows: Vec<(String, Run<'_>)> = Vec::new();
    let mut slots = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let chunks = (steps / u64::from(shape.periods))
            .div_ceil(CHUNK_PATHS)
            .max(1);
        for (j, (_, vr)) in ESTIMATORS.iter().enumerate() {
            let spec = Spec {
                periods: shape.periods,
                interest: shape.interest,
                exercise: shape.exercise,
                option: shape.option,
                runs: Some(chunks * CHUNK_PATHS),
                seed: Some(1),
                variance_reduction: *vr,
                ..Spec::default()
            };
            if let Ok(valid) = spec.validate() {
                rows.push((String::new(), kernel_run(valid, chunks)));
                slots.push((i, j));
            }
        }
    }
    let samples = interleave(&mut rows, repeats);
    let mut out: Vec<ShapeRow> = SHAPES
        .iter()
        .map(|s| ShapeRow {
            name: s.name,
            periods: s.periods,
            p: (s.interest - DEFAULT_DOWN) / (DEFAULT_UP - DEFAULT_DOWN),
            put: s.option == OptionKind::Put,
            estimators: ESTIMATORS.iter().map(|_| None).collect(),
        })
        .collect();
    for ((i, j), s) in slots.into_iter().zip(samples) {
        out[i].estimators[j] = Some(s);
    }
    Ok(out)
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
    let pools = (1..=max)
        .map(|threads| rayon::ThreadPoolBuilder::new().num_threads(threads).build())
        .collect::<Result<Vec<_>, _>>()
        .context("thread pool")?;
    let never = AtomicBool::new(false);
    let steps = runs as f64 * f64::from(args.periods);
    let mut samples: Vec<Samples> = pools.iter().map(|_| Samples::default()).collect();
    let mut prices = vec![Vec::new(); pools.len()];
    for _ in 0..args.repeats.div_ceil(2) {
        for ((pool, s), prices) in pools.iter().zip(&mut samples).zip(&mut prices) {
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

/// Everything one invocation measured, for printing.
struct Report<'a> {
    args: &'a Args,
    paths: u64,
    original_paths: u64,
    cpus: usize,
    names: &'a [String],
    single: &'a [Samples],
    ratio: f64,
    shapes: &'a [ShapeRow],
    scaling: &'a [Scaling],
    to_target: &'a [ToTarget],
}

/// A variance reduction's name as in the JSON contract (`arithmetic`, …).
fn vr_name(vr: VarianceReduction) -> String {
    serde_json::to_value(vr)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Report<'_> {
    fn efficiency(&self, s: &Scaling) -> (f64, f64) {
        let speedup = self.scaling[0].samples.best() / s.samples.best();
        (speedup, speedup / s.threads as f64)
    }

    /// The slowest best time over every shape and estimator.
    fn worst_shape(&self) -> Option<(&str, &str, f64)> {
        self.shapes
            .iter()
            .flat_map(|row| {
                row.estimators
                    .iter()
                    .zip(ESTIMATORS)
                    .filter_map(move |(s, (e, _))| s.as_ref().map(|s| (row.name, e, s.best())))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))
    }

    fn json(&self) -> Value {
        let faithful = self.single[0].best();
        json!({
            "periods": self.args.periods,
            "paths_per_run": self.paths,
            "original_paths_per_run": self.original_paths,
            "repeats": self.args.repeats,
            "cpus": self.cpus,
            "single_thread": self.names.iter().zip(self.single).map(|(name, s)| json!({
                "name": name,
                "ns_per_path_step": s.best(),
                "median_ns_per_path_step": s.median(),
                "speedup_vs_original": faithful / s.best(),
            })).collect::<Vec<_>>(),
            "ratio_plain_vs_original": self.ratio,
            "shapes": self.shapes.iter().map(|row| json!({
                "name": row.name,
                "periods": row.periods,
                "p": row.p,
                "put": row.put,
                "ns_per_path_step": ESTIMATORS.iter().zip(&row.estimators)
                    .map(|((_, vr), s)| (vr_name(*vr), s.as_ref().map_or(Value::Null, Samples::json)))
                    .collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
            "worst_shape_ns_per_path_step": self.worst_shape().map(|w| w.2),
            "scaling": self.scaling.iter().map(|s| {
                let (speedup, efficiency) = self.efficiency(s);
                json!({
                    "threads": s.threads,
                    "ns_per_path_step": s.samples.best(),
                    "median_ns_per_path_step": s.samples.median(),
                    "speedup": speedup,
                    "efficiency": efficiency,
                    "same_bits_as_one_thread": s.same_bits,
                })
            }).collect::<Vec<_>>(),
            "to_target": self.to_target.iter().map(|t| json!({
                "estimator": t.estimator,
                "variance_reduction": vr_name(t.used),
                "target_std_error": self.args.target_std_error,
                "paths": t.paths,
                "std_error": t.std_error,
                "max_paths_reached": t.max_paths_reached,
                "ms": t.ms.best(),
                "median_ms": t.ms.median(),
            })).collect::<Vec<_>>(),
        })
    }

    fn text(&self) -> String {
        let mut out = format!(
            "mcq bench kernel: {} periods, {} paths per kernel run (original loop: {}), {} repeats interleaved, {} CPUs\n",
            self.args.periods, self.paths, self.original_paths, self.args.repeats, self.cpus
        );
        out += "\nsingle thread, defaults                                ns/path-step: best   median   best vs faithful\n";
        let faithful = self.single[0].best();
        for (name, s) in self.names.iter().zip(self.single) {
            out += &format!(
                "{name:<62} {:>8.3} {:>8.3} {:>9.1}×\n",
                s.best(),
                s.median(),
                faithful / s.best()
            );
        }
        out += &format!(
            "\nkernel plain vs the faithful original loop: {:.1}× (target ≥ 20×)\n",
            self.ratio
        );
        if !self.shapes.is_empty() {
            out += "\nother inputs, single thread, best ns/path-step\n";
            out += &format!("{:<38}", "shape");
            for (name, _) in ESTIMATORS {
                let short = name.split(' ').next().unwrap_or(name);
                out += &format!(" {short:>10}");
            }
            out += "\n";
            for row in self.shapes {
                out += &format!("{:<38}", row.name);
                for s in &row.estimators {
                    match s {
                        Some(s) => out += &format!(" {:>10.3}", s.best()),
                        None => out += &format!(" {:>10}", "—"),
                    }
                }
                out += "\n";
            }
            if let Some((shape, estimator, ns)) = self.worst_shape() {
                out += &format!(
                    "slowest: {estimator} on {shape}, {ns:.3} ns/path-step (target ≤ 1)\n"
                );
            }
        }
        out += "\nthreads   ns/path-step (wall): best   median   speedup   efficiency   same bits as 1 thread\n";
        for s in self.scaling {
            let (speedup, efficiency) = self.efficiency(s);
            out += &format!(
                "{:>7} {:>26.3} {:>8.3} {:>8.2}× {:>11.0}% {:>10}\n",
                s.threads,
                s.samples.best(),
                s.samples.median(),
                speedup,
                100.0 * efficiency,
                s.same_bits
            );
        }
        if !self.to_target.is_empty() {
            out += &format!(
                "\ntime to a standard error of {:e} at the defaults ({} threads, validation included)\n",
                self.args.target_std_error,
                rayon::current_num_threads()
            );
            for t in self.to_target {
                out += &format!(
                    "{:<20} ({:<10}) {:>12} paths  std error {:.3e}  {:>9.1} ms best {:>9.1} ms median{}\n",
                    t.estimator,
                    vr_name(t.used),
                    t.paths,
                    t.std_error,
                    t.ms.best(),
                    t.ms.median(),
                    if t.max_paths_reached {
                        "  (path limit hit)"
                    } else {
                        ""
                    }
                );
            }
            if let [plain, best] = self.to_target {
                out += &format!(
                    "control variate speed-up: {:.0}× (median time), {:.0}× fewer paths\n",
                    plain.ms.median() / best.ms.median(),
                    plain.paths as f64 / best.paths as f64
                );
            }
        }
        out
    }
}
