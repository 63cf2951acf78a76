//! Same seed, same bits: whatever the threads, chunking or merge order,
//! for the price and for delta.

use mcq_kernel::{CHUNK_PATHS, Greek, Partial, PriceResult, Spec, VarianceReduction};

use super::{running, valid};

fn on_threads(threads: usize, spec: &Spec) -> PriceResult {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let v = valid(spec.clone());
    pool.install(|| v.price(&running()).expect("not cancelled"))
}

fn same_bits(a: &PriceResult, b: &PriceResult) {
    assert_eq!(a.price.to_bits(), b.price.to_bits(), "{a:?} vs {b:?}");
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits());
    assert_eq!(a.paths, b.paths);
    assert_eq!(
        a.variance_reduction_factor.map(f64::to_bits),
        b.variance_reduction_factor.map(f64::to_bits)
    );
    assert_eq!(a.delta.map(f64::to_bits), b.delta.map(f64::to_bits));
    assert_eq!(
        a.delta_std_error.map(f64::to_bits),
        b.delta_std_error.map(f64::to_bits)
    );
}

#[test]
fn identical_on_one_two_and_eight_threads() {
    for vr in [
        VarianceReduction::None,
        VarianceReduction::Antithetic,
        VarianceReduction::Auto,
    ] {
        let spec = Spec {
            runs: Some(10 * CHUNK_PATHS + 123),
            seed: Some(42),
            variance_reduction: vr,
            greeks: vec![Greek::Delta],
            ..Spec::default()
        };
        let one = on_threads(1, &spec);
        same_bits(&one, &on_threads(2, &spec));
        same_bits(&one, &on_threads(8, &spec));
    }
    let target = Spec {
        runs: None,
        target_std_error: Some(5e-3),
        seed: Some(9),
        greeks: vec![Greek::Delta],
        ..Spec::default()
    };
    same_bits(&on_threads(1, &target), &on_threads(8, &target));
}

#[test]
fn any_chunking_and_merge_order_gives_the_same_bits() {
    let spec = valid(Spec {
        runs: Some(9 * CHUNK_PATHS - 7),
        seed: Some(7),
        greeks: vec![Greek::Delta],
        ..Spec::default()
    });
    let n = spec.chunk_count().unwrap();
    assert_eq!(n, 9);
    let whole = spec.run_chunks(0..n, &running()).unwrap();
    for cuts in [vec![0, 1, 9], vec![0, 4, 5, 9], vec![0, 2, 3, 6, 8, 9]] {
        let parts: Vec<Partial> = cuts
            .windows(2)
            .map(|w| spec.run_chunks(w[0]..w[1], &running()).unwrap())
            .collect();
        // Through JSON, as partials travel between workers and the database.
        let parts: Vec<Partial> = parts
            .iter()
            .map(|p| serde_json::from_str(&serde_json::to_string(p).unwrap()).unwrap())
            .collect();
        let mut reversed = Partial::default();
        for p in parts.iter().rev() {
            reversed.merge(p);
        }
        // ((a + b) + c) vs (a + (b + c)) shaped groupings.
        let mut tail = Partial::default();
        for p in &parts[1..] {
            tail.merge(p);
        }
        let mut grouped = parts[0].clone();
        grouped.merge(&tail);
        assert_eq!(reversed, whole, "cuts {cuts:?}");
        assert_eq!(grouped, whole, "cuts {cuts:?}");
    }
    assert_eq!(whole.paths, 9 * CHUNK_PATHS - 7);
    same_bits(&spec.finish(&whole, 0.0), &spec.price(&running()).unwrap());
}

/// Paths of up to 10 periods are drawn several per random number and
/// counted, paths of 11 to 15 periods and short antithetic pairs are
/// counted too; a last chunk that ends inside a group of paths or pairs
/// must not change that the bits are the same.
#[test]
fn short_paths_give_the_same_bits_on_any_threads_and_chunking() {
    for periods in [1, 3, 6, 9, 12] {
        for vr in [
            VarianceReduction::None,
            VarianceReduction::Antithetic,
            VarianceReduction::Auto,
        ] {
            let spec = Spec {
                periods,
                runs: Some(5 * CHUNK_PATHS + 11),
                seed: Some(u64::from(periods)),
                variance_reduction: vr,
                greeks: vec![Greek::Delta],
                ..Spec::default()
            };
            let one = on_threads(1, &spec);
            same_bits(&one, &on_threads(2, &spec));
            same_bits(&one, &on_threads(8, &spec));
            let v = valid(spec);
            let mut parts = Partial::default();
            for chunks in [3..6, 0..1, 1..3] {
                parts.merge(&v.run_chunks(chunks, &running()).unwrap());
            }
            same_bits(&one, &v.finish(&parts, 0.0));
        }
    }
}

#[test]
fn a_seed_is_drawn_and_reported_when_absent() {
    let spec = valid(Spec {
        runs: Some(1000),
        seed: None,
        ..Spec::default()
    });
    let seed = spec.spec().seed.expect("seed drawn");
    let again = valid(Spec {
        runs: Some(1000),
        seed: Some(seed),
        ..Spec::default()
    });
    same_bits(
        &spec.price(&running()).unwrap(),
        &again.price(&running()).unwrap(),
    );
    assert_eq!(spec.price(&running()).unwrap().seed, Some(seed));
}

#[test]
fn cancelling_stops_the_computation() {
    let spec = valid(Spec {
        runs: Some(100 * CHUNK_PATHS),
        seed: Some(1),
        ..Spec::default()
    });
    let cancel = std::sync::atomic::AtomicBool::new(true);
    assert!(spec.price(&cancel).is_err());
    assert!(spec.run_chunks(0..3, &cancel).is_err());
}

#[test]
fn reseeding_a_validated_spec_equals_validating_the_reseeded_spec() {
    for vr in [
        VarianceReduction::None,
        VarianceReduction::Antithetic,
        VarianceReduction::Auto,
    ] {
        let base = Spec {
            runs: Some(3 * CHUNK_PATHS + 5),
            seed: Some(1),
            variance_reduction: vr,
            ..Spec::default()
        };
        let reseeded = valid(base.clone()).with_seed(77);
        assert_eq!(reseeded.spec().seed, Some(77));
        let fresh = valid(Spec {
            seed: Some(77),
            ..base.clone()
        });
        same_bits(
            &reseeded.price(&running()).expect("not cancelled"),
            &fresh.price(&running()).expect("not cancelled"),
        );
        let original = valid(base).price(&running()).expect("not cancelled");
        assert_ne!(
            original.price.to_bits(),
            fresh
                .price(&running())
                .expect("not cancelled")
                .price
                .to_bits(),
            "another seed, another estimate"
        );
    }
}
