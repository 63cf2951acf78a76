//! Quick single-thread timing of the kernel's estimators against the
//! original loop, interleaved and taking the best of many short runs so a
//! noisy shared machine still gives comparable numbers:
//! `cargo run --release -p mcq-kernel --example speed [periods] [rounds]`.

use std::sync::atomic::AtomicBool;

use mcq_kernel::original::{NetRandom, Xoshiro256, original_price_net, original_price_xoshiro};
use mcq_kernel::{CHUNK_PATHS, Spec, VarianceReduction};

/// Seconds since the first call. Runs are short (about a millisecond), so
/// the best of many is one that no other process interrupted.
fn cpu() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let periods = args.first().copied().unwrap_or(20) as u32;
    let rounds = args.get(1).copied().unwrap_or(30);
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
                ..Spec::default()
            }
            .validate()
            .unwrap()
        })
        .collect();
    let mut best = vec![f64::INFINITY; specs.len() + 2];
    let mut net = NetRandom::new(1);
    let mut rng = Xoshiro256::new(1);
    let paths = 2 * CHUNK_PATHS;
    for _ in 0..rounds {
        for (i, v) in specs.iter().enumerate() {
            let t = cpu();
            std::hint::black_box(v.run_chunks(0..2, &cancel).unwrap());
            best[i] = best[i].min(cpu() - t);
        }
        let t = cpu();
        std::hint::black_box(original_price_xoshiro(
            30.0,
            30.0,
            1.4,
            0.8,
            1.08,
            periods,
            paths / 4,
            true,
            &mut rng,
        ));
        best[specs.len()] = best[specs.len()].min(4.0 * (cpu() - t));
        let t = cpu();
        std::hint::black_box(original_price_net(
            30.0,
            30.0,
            1.4,
            0.8,
            1.08,
            periods,
            paths / 4,
            true,
            &mut net,
        ));
        best[specs.len() + 1] = best[specs.len() + 1].min(4.0 * (cpu() - t));
    }
    let steps = (paths * u64::from(periods)) as f64;
    for (i, vr) in vrs.iter().enumerate() {
        println!("{vr:?}: {:.3} ns/path-step", best[i] * 1e9 / steps);
    }
    println!(
        "original xoshiro: {:.3} ns/path-step",
        best[specs.len()] * 1e9 / steps
    );
    println!(
        "original .NET: {:.3} ns/path-step",
        best[specs.len() + 1] * 1e9 / steps
    );
}
