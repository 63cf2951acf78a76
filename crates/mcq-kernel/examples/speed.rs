//! Quick single-thread timing of the kernel's estimators against the
//! original loop, interleaved and taking the best of many short runs so a
//! noisy shared machine still gives comparable numbers:
//! `cargo run --release -p mcq-kernel --example speed [periods] [rounds] [delta]`
//! (`delta`: the estimators also estimate delta).
//!
//! The last two rows check that the faithful loop's branch costs nothing
//! but its mispredictions: at p ≈ 0.002 the branch is predictable, and the
//! branch and select versions should then run at the same speed.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use mcq_kernel::original::{NetRandom, Sample, Xoshiro256};
use mcq_kernel::{CHUNK_PATHS, Greek, Spec, VarianceReduction};

/// Seconds taken by `f`. Runs are short (milliseconds), so the best of many
/// is one that no other process interrupted.
fn seconds<T>(f: impl FnOnce() -> T) -> f64 {
    let start = Instant::now();
    std::hint::black_box(f());
    start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let periods = args.first().copied().unwrap_or(20) as u32;
    let rounds = args.get(1).copied().unwrap_or(30);
    let greeks = if std::env::args().any(|a| a == "delta") {
        vec![Greek::Delta]
    } else {
        Vec::new()
    };
    let cancel = AtomicBool::new(false);
    let vrs = [
        VarianceReduction::None,
        VarianceReduction::Arithmetic,
        VarianceReduction::Geometric,
        VarianceReduction::Auto,
        VarianceReduction::Antithetic,
    ];
    let specs: Vec<_> = vrs
        .iter()
        .map(|&vr| {
            Spec {
                periods,
                runs: Some(1 << 20),
                seed: Some(1),
                variance_reduction: vr,
                greeks: greeks.clone(),
                ..Spec::default()
            }
            .validate()
            .unwrap()
        })
        .collect();
    let mut names: Vec<String> = vrs.iter().map(|vr| format!("kernel {vr:?}")).collect();
    names.extend(
        [
            "original .NET, branch (faithful)",
            "original .NET, select",
            "original xoshiro, branch",
            "original .NET, branch, p = 0.002",
            "original .NET, select, p = 0.002",
        ]
        .map(String::from),
    );
    let mut best = vec![f64::INFINITY; names.len()];
    let mut net = NetRandom::new(1);
    let mut xoshiro = Xoshiro256::new(1);
    let paths = 2 * CHUNK_PATHS;
    // The original loop runs a quarter of the paths; its time is scaled up.
    let (n, k) = (periods, paths / 4);
    for _ in 0..rounds {
        let mut times: Vec<f64> = specs
            .iter()
            .map(|v| seconds(|| v.run_chunks(0..2, &cancel).unwrap()))
            .collect();
        let scaled = |t: f64| 4.0 * t;
        let sample = Sample::defaults(n, k);
        // interest 0.801: p = 0.001 / 0.6, the up arm is almost never taken.
        let predictable = Sample {
            interest: 0.801,
            ..sample
        };
        times.push(scaled(seconds(|| sample.price_net(&mut net))));
        times.push(scaled(seconds(|| sample.price_net_select(&mut net))));
        times.push(scaled(seconds(|| sample.price_xoshiro(&mut xoshiro))));
        times.push(scaled(seconds(|| predictable.price_net(&mut net))));
        times.push(scaled(seconds(|| predictable.price_net_select(&mut net))));
        for (b, t) in best.iter_mut().zip(times) {
            *b = b.min(t);
        }
    }
    let steps = (paths * u64::from(periods)) as f64;
    for (name, t) in names.iter().zip(&best) {
        println!("{name}: {:.3} ns/path-step", t * 1e9 / steps);
    }
}
