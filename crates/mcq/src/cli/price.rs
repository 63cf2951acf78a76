//! `mcq price`: price one option locally, the way the original sample did,
//! but exact or with an error estimate, reproducibly and on every core.

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::ValueEnum;
use mcq_kernel::{
    DEFAULT_DOWN, DEFAULT_EXERCISE, DEFAULT_INITIAL, DEFAULT_INTEREST, DEFAULT_PERIODS, DEFAULT_UP,
    Greek, Method, OptionKind, PriceResult, Spec, SpecError, VarianceReduction,
};

use super::count::count;
use super::exit::{Outcome, bad_input};

/// Flags of this subcommand. Names and defaults are those of the original
/// sample (a public contract).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Spot price S0 (> 0).
    #[arg(long, default_value_t = DEFAULT_INITIAL)]
    initial: f64,
    /// Strike K (>= 0).
    #[arg(long, default_value_t = DEFAULT_EXERCISE)]
    exercise: f64,
    /// Up factor per period (> interest).
    #[arg(long, default_value_t = DEFAULT_UP)]
    up: f64,
    /// Down factor per period (0 < down < interest).
    #[arg(long, default_value_t = DEFAULT_DOWN)]
    down: f64,
    /// Gross interest factor per period, e.g. 1.08.
    #[arg(long, default_value_t = DEFAULT_INTEREST)]
    interest: f64,
    /// Number of periods.
    #[arg(long, default_value_t = DEFAULT_PERIODS, value_parser = count::<u32>(0..=u64::from(u32::MAX)))]
    periods: u32,
    /// Monte Carlo paths (1e6 = 1_000_000) [default: 1000000 unless --target-std-error is given].
    #[arg(long, value_parser = count::<u64>(0..=u64::MAX))]
    runs: Option<u64>,
    /// Call or put on the arithmetic average.
    #[arg(long, value_enum, default_value_t = OptionArg::Call)]
    option: OptionArg,
    /// Monte Carlo or the exact price (periods <= 40).
    #[arg(long, value_enum, default_value_t = MethodArg::Mc)]
    method: MethodArg,
    /// Seed of the random streams, 0 to 2^53 - 1 as the service accepts
    /// (drawn and printed when absent).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=mcq_kernel::MAX_SEED))]
    seed: Option<u64>,
    /// Worker threads [default: all cores; at most 1024]. The result does
    /// not depend on it.
    #[arg(long, value_parser = count::<u16>(1..=1024))]
    threads: Option<u16>,
    /// Simulate until the standard error is at most this (instead of --runs).
    #[arg(long)]
    target_std_error: Option<f64>,
    /// Variance reduction of the Monte Carlo estimator.
    #[arg(long, value_enum, default_value_t = VarianceArg::Auto)]
    variance_reduction: VarianceArg,
    /// Sensitivities to report besides the price: delta (∂price/∂initial,
    /// from the same paths, with its standard error).
    #[arg(long, value_enum, value_delimiter = ',')]
    greeks: Vec<GreekArg>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OptionArg {
    Call,
    Put,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MethodArg {
    Mc,
    Exact,
}

#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
enum GreekArg {
    Delta,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum VarianceArg {
    None,
    Antithetic,
    Arithmetic,
    Geometric,
    Auto,
}

impl Args {
    fn spec(&self) -> Spec {
        Spec {
            initial: self.initial,
            exercise: self.exercise,
            up: self.up,
            down: self.down,
            interest: self.interest,
            periods: self.periods,
            runs: self.runs,
            target_std_error: self.target_std_error,
            option: match self.option {
                OptionArg::Call => OptionKind::Call,
                OptionArg::Put => OptionKind::Put,
            },
            method: match self.method {
                MethodArg::Mc => Method::Mc,
                MethodArg::Exact => Method::Exact,
            },
            seed: self.seed,
            variance_reduction: match self.variance_reduction {
                VarianceArg::None => VarianceReduction::None,
                VarianceArg::Antithetic => VarianceReduction::Antithetic,
                VarianceArg::Arithmetic => VarianceReduction::Arithmetic,
                VarianceArg::Geometric => VarianceReduction::Geometric,
                VarianceArg::Auto => VarianceReduction::Auto,
            },
            greeks: self
                .greeks
                .iter()
                .map(|greek| match greek {
                    GreekArg::Delta => Greek::Delta,
                })
                .collect(),
        }
        .with_defaults()
    }
}

/// The command-line flag of a spec field.
fn flag(error: &SpecError) -> String {
    format!("--{}", error.field().replace('_', "-"))
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let spec = args.spec();
    let valid = spec.validate().map_err(|errors| {
        let lines: Vec<String> = errors
            .iter()
            .map(|error| format!("{}: {error}", flag(error)))
            .collect();
        bad_input(lines.join("\nerror: "))
    })?;
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(threads) = args.threads {
        pool = pool.num_threads(usize::from(threads));
    }
    let pool = pool.build().context("starting the worker threads")?;
    let threads = pool.current_num_threads();
    let never = AtomicBool::new(false);
    let result = pool
        .install(|| valid.price(&never))
        .context("pricing was cancelled")?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&result).context("encoding the result")?
        );
    } else {
        print!("{}", human(&result, args.periods, threads));
    }
    Ok(Outcome::Done)
}

/// The text report: price ± error, interval, paths, time and speed.
fn human(r: &PriceResult, periods: u32, threads: usize) -> String {
    let kind = match r.option {
        OptionKind::Call => "call",
        OptionKind::Put => "put",
    };
    let mut out = String::new();
    match r.method {
        Method::Exact => {
            out += &format!("{kind} price   {:.12} (exact)\n", r.price);
            if let Some(delta) = r.delta {
                out += &format!("delta        {delta:.12} (exact)\n");
            }
            out += &format!("paths        {} enumerated (meet in the middle)\n", r.paths);
        }
        Method::Mc => {
            out += &format!(
                "{kind} price   {:.6} ± {:.6} (standard error)\n",
                r.price, r.std_error
            );
            out += &format!("95% interval [{:.6}, {:.6}]\n", r.ci95[0], r.ci95[1]);
            if let (Some(delta), Some(error)) = (r.delta, r.delta_std_error) {
                out += &format!("delta        {delta:.6} ± {error:.6} (standard error)\n");
            }
            let seed = r.seed.map_or_else(String::new, |s| format!(", seed {s}"));
            out += &format!("paths        {}{seed}\n", r.paths);
            let factor = r.variance_reduction_factor.unwrap_or(1.0);
            let vr = serde_json::to_value(r.variance_reduction)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            out += &format!("variance     {vr} (variance cut {factor:.1}×)\n");
            if r.max_paths_reached {
                out +=
                    "warning      stopped at the path limit before reaching --target-std-error\n";
            }
        }
    }
    let steps = r.paths as f64 * f64::from(periods);
    let rate = if r.elapsed_ms > 0.0 {
        steps / (r.elapsed_ms / 1e3)
    } else {
        0.0
    };
    out += &format!(
        "time         {:.3} ms on {threads} threads, {rate:.3e} path-steps/s\n",
        r.elapsed_ms
    );
    out
}
