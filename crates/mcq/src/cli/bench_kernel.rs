//! `mcq bench kernel`: nanoseconds per path-step of the kernel against a
//! faithful port of the original loop, measured side by side in one run;
//! scaling over threads; and time to a target standard error, plain against
//! the best control variate.
//!
//! The machine is usually shared, so every figure is the fastest of several
//! short runs, and the runs of different estimators are interleaved: load
//! that comes and goes hits all of them alike, and ratios stay meaningful.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use mcq_kernel::original::{NetRandom, Xoshiro256, original_price_net, original_price_xoshiro};
use mcq_kernel::{
    CHUNK_PATHS, DEFAULT_DOWN, DEFAULT_EXERCISE, DEFAULT_INITIAL, DEFAULT_INTEREST, DEFAULT_UP,
    PriceResult, Spec, ValidSpec, VarianceReduction,
};
use serde_json::json;

/// Flags of this subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Paths per timed kernel run (whole chunks of 65536; the original loop
    /// runs an eighth of them).
    #[arg(long, default_value_t = 1 << 20)]
    paths: u64,
    /// Timed runs per measurement; the fastest is reported.
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
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

/// The estimators timed single-threaded, in table order.
const KERNEL_ROWS: [(&str, VarianceReduction); 5] = [
    ("kernel, plain", VarianceReduction::None),
    ("kernel, arithmetic control", VarianceReduction::Arithmetic),
    ("kernel, geometric control", VarianceReduction::Geometric),
    ("kernel, auto (both controls)", VarianceReduction::Auto),
    ("kernel, antithetic", VarianceReduction::Antithetic),
];

fn spec(periods: u32, runs: u64, vr: VarianceReduction) -> anyhow::Result<ValidSpec> {
    let spec = Spec {
        periods,
        runs: Some(runs),
        seed: Some(1),
        variance_reduction: vr,
        ..Spec::default()
    };
    spec.validate().map_err(|errors| {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("benchmark spec rejected: {}", text.join("; "))
    })
}

/// Seconds taken by `f`; its result is kept opaque so the work is not
/// optimised away.
fn time<T>(f: impl FnOnce() -> T) -> f64 {
    let start = Instant::now();
    std::hint::black_box(f());
    start.elapsed().as_secs_f64()
}

/// The original loop at the defaults, with either generator.
enum Generator<'a> {
    Net(&'a mut NetRandom),
    Xoshiro(&'a mut Xoshiro256),
}

fn original(periods: u32, paths: u64, generator: Generator<'_>) -> f64 {
    let (s, k, u, d, r) = (
        DEFAULT_INITIAL,
        DEFAULT_EXERCISE,
        DEFAULT_UP,
        DEFAULT_DOWN,
        DEFAULT_INTEREST,
    );
    match generator {
        Generator::Net(rng) => original_price_net(s, k, u, d, r, periods, paths, true, rng),
        Generator::Xoshiro(rng) => original_price_xoshiro(s, k, u, d, r, periods, paths, true, rng),
    }
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let chunks = args.paths.div_ceil(CHUNK_PATHS).max(1);
    let paths = chunks * CHUNK_PATHS;
    let original_paths = (paths / 8).max(1);
    let never = AtomicBool::new(false);
    let specs = KERNEL_ROWS
        .iter()
        .map(|&(_, vr)| spec(args.periods, paths, vr))
        .collect::<anyhow::Result<Vec<_>>>()?;

    // Single thread: run_chunks computes on the calling thread.
    let (mut net, mut xoshiro) = (NetRandom::new(1), Xoshiro256::new(1));
    let mut best = vec![f64::INFINITY; specs.len() + 2];
    for _ in 0..args.repeats {
        let t = time(|| original(args.periods, original_paths, Generator::Net(&mut net)));
        best[0] = best[0].min(t * paths as f64 / original_paths as f64);
        let t = time(|| {
            original(
                args.periods,
                original_paths,
                Generator::Xoshiro(&mut xoshiro),
            )
        });
        best[1] = best[1].min(t * paths as f64 / original_paths as f64);
        for (i, valid) in specs.iter().enumerate() {
            let t = time(|| valid.run_chunks(0..chunks, &never));
            best[i + 2] = best[i + 2].min(t);
        }
    }
    let steps = paths as f64 * f64::from(args.periods);
    let ns: Vec<f64> = best.iter().map(|t| t * 1e9 / steps).collect();
    let mut names = vec![
        "original loop, .NET System.Random (faithful)",
        "original loop, xoshiro256++",
    ];
    names.extend(KERNEL_ROWS.iter().map(|(name, _)| *name));

    let scaling = scaling(&args, paths)?;
    let to_target = if args.target_std_error > 0.0 {
        to_target(&args)?
    } else {
        Vec::new()
    };

    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if args.json {
        let report = json!({
            "periods": args.periods,
            "paths_per_run": paths,
            "repeats": args.repeats,
            "cpus": cpus,
            "single_thread": names.iter().zip(&ns).map(|(name, t)| json!({
                "name": name, "ns_per_path_step": t, "speedup_vs_original": ns[0] / t,
            })).collect::<Vec<_>>(),
            "ratio_plain_vs_original": ns[0] / ns[2],
            "scaling": scaling.iter().map(|s| json!({
                "threads": s.threads, "ns_per_path_step": s.ns, "speedup": scaling[0].ns / s.ns,
                "same_bits_as_one_thread": s.same_bits,
            })).collect::<Vec<_>>(),
            "to_target": to_target.iter().map(|(name, r)| json!({
                "estimator": name, "target_std_error": args.target_std_error, "result": r,
            })).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("encoding the report")?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "mcq bench kernel: {} periods, {paths} paths per run (original loop: {original_paths}), best of {}, {cpus} CPUs",
        args.periods, args.repeats
    );
    println!("\nsingle thread                                  ns/path-step   vs original");
    for (name, t) in names.iter().zip(&ns) {
        println!("{name:<46} {t:>12.3} {:>12.1}×", ns[0] / t);
    }
    println!(
        "\nkernel plain vs the original loop: {:.1}× (target ≥ 20×)",
        ns[0] / ns[2]
    );
    println!("\nthreads   ns/path-step (wall)   speedup   same bits as 1 thread");
    for s in &scaling {
        println!(
            "{:>7} {:>20.3} {:>9.2}× {:>10}",
            s.threads,
            s.ns,
            scaling[0].ns / s.ns,
            s.same_bits
        );
    }
    if !to_target.is_empty() {
        println!(
            "\ntime to a standard error of {:e} at the defaults ({} threads)",
            args.target_std_error,
            rayon::current_num_threads()
        );
        for (name, r) in &to_target {
            println!(
                "{name:<34} {:>12} paths {:>10.1} ms   std error {:.2e}{}",
                r.paths,
                r.elapsed_ms,
                r.std_error,
                if r.max_paths_reached {
                    "  (path limit hit)"
                } else {
                    ""
                }
            );
        }
        if let [(_, plain), (_, best)] = &to_target[..] {
            println!(
                "control variate speed-up: {:.0}×",
                plain.elapsed_ms / best.elapsed_ms
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One row of the scaling table.
struct Scaling {
    threads: usize,
    ns: f64,
    same_bits: bool,
}

/// The plain estimator on 1..=N threads, 4× the single-thread paths so
/// every thread gets several chunks.
fn scaling(args: &Args, paths: u64) -> anyhow::Result<Vec<Scaling>> {
    let max = args
        .max_threads
        .map_or_else(rayon::current_num_threads, usize::from);
    let runs = 4 * paths;
    let valid = spec(args.periods, runs, VarianceReduction::None)?;
    let never = AtomicBool::new(false);
    let mut rows = Vec::new();
    let mut reference: Option<f64> = None;
    for threads in 1..=max {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .context("thread pool")?;
        let mut best = f64::INFINITY;
        let mut price = 0.0;
        for _ in 0..args.repeats.div_ceil(2) {
            let start = Instant::now();
            let result = pool.install(|| valid.price(&never)).context("cancelled")?;
            best = best.min(start.elapsed().as_secs_f64());
            price = result.price;
        }
        let same_bits = *reference.get_or_insert(price) == price;
        rows.push(Scaling {
            threads,
            ns: best * 1e9 / (runs as f64 * f64::from(args.periods)),
            same_bits,
        });
    }
    Ok(rows)
}

/// Time to the target standard error at the defaults: plain, then auto.
fn to_target(args: &Args) -> anyhow::Result<Vec<(&'static str, PriceResult)>> {
    let never = AtomicBool::new(false);
    let mut out = Vec::new();
    for (name, vr) in [
        ("plain", VarianceReduction::None),
        ("auto (best control)", VarianceReduction::Auto),
    ] {
        let spec = Spec {
            runs: None,
            target_std_error: Some(args.target_std_error),
            seed: Some(1),
            variance_reduction: vr,
            ..Spec::default()
        };
        let valid = spec
            .validate()
            .map_err(|e| anyhow::anyhow!("target spec rejected: {e:?}"))?;
        out.push((name, valid.price(&never).context("cancelled")?));
    }
    Ok(out)
}
