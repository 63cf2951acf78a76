//! The "other inputs" table: every estimator on inputs other than the
//! defaults, where the kernel must stay under 1 ns per path-step.

use mcq_kernel::{CHUNK_PATHS, DEFAULT_DOWN, DEFAULT_UP, MAX_RUNS, OptionKind, Spec};

use super::{ESTIMATORS, Run, Samples, interleave, kernel_run};

/// One input shape of the "other inputs" table.
pub(super) struct Shape {
    name: &'static str,
    periods: u32,
    interest: f64,
    exercise: f64,
    option: OptionKind,
}

/// The inputs on which "never slower than 1 ns per path-step" is checked:
/// short and long paths, p near 0 and near 1, puts, deep in and out of the
/// money. p = (interest − 0.8)/0.6 with the default up 1.4 and down 0.8.
pub(super) const SHAPES: [Shape; 13] = {
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
        // Two-block paths: counted up to 15 periods, walked from 16, where
        // the controls' per-path work weighs most.
        shape("12 periods", 12, 1.08, 30.0),
        shape("17 periods", 17, 1.08, 30.0),
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
pub(super) struct ShapeRow {
    pub(super) name: &'static str,
    pub(super) periods: u32,
    pub(super) p: f64,
    pub(super) put: bool,
    pub(super) estimators: Vec<Option<Samples>>,
}

/// Every estimator on every shape, single thread, about `steps`
/// path-steps per run (whole chunks).
pub(super) fn shapes(steps: u64, repeats: u32) -> anyhow::Result<Vec<ShapeRow>> {
    let mut rows: Vec<(String, Run<'_>)> = Vec::new();
    let mut slots = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        // Capped so a long default run still gives valid specs here.
        let chunks = (steps / u64::from(shape.periods))
            .div_ceil(CHUNK_PATHS)
            .clamp(1, MAX_RUNS / CHUNK_PATHS);
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
