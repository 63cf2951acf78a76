//! Integration tests of the pricing kernel through its public API.

use std::sync::atomic::AtomicBool;

use mcq_kernel::{PriceResult, Spec, ValidSpec};

mod accuracy;
mod delta;
mod reproducibility;
mod validation;

/// A flag that is never raised.
fn running() -> AtomicBool {
    AtomicBool::new(false)
}

fn valid(spec: Spec) -> ValidSpec {
    spec.validate()
        .unwrap_or_else(|errors| panic!("{spec:?} rejected: {errors:?}"))
}

fn price(spec: Spec) -> PriceResult {
    valid(spec).price(&running()).expect("not cancelled")
}
