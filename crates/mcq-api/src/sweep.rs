//! Sweeps: a base spec and a grid of field values expanded into one spec
//! per grid point, checked all or nothing, its size known before anything
//! is expanded.

use std::collections::HashSet;

use mcq_api_types::{BatchGrid, FieldProblem, Sweep};
use mcq_kernel::{MAX_PERIODS, MAX_RUNS, MAX_SEED, MIN_RUNS, Spec};
use serde_json::{Map, Value};

use crate::problem::ApiError;

/// The fields a sweep may vary: every field of a spec.
fn spec_fields() -> Vec<String> {
    let full = Spec {
        runs: Some(1),
        target_std_error: Some(1.0),
        seed: Some(1),
        greeks: vec![mcq_kernel::Greek::Delta],
        ..Spec::default()
    };
    match serde_json::to_value(full) {
        Ok(Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The number of jobs a sweep asks for (grid points × `repeat`), checked
/// against `limit` before any of them exists, so that a small request
/// cannot make the server build a huge one.
pub(crate) fn job_count(sweep: &Sweep, repeat: u32, limit: usize) -> Result<usize, ApiError> {
    let asked = sweep
        .points()
        .and_then(|n| n.checked_mul(u64::from(repeat)));
    match asked.and_then(|n| usize::try_from(n).ok()) {
        Some(n) if n <= limit => Ok(n),
        _ => Err(ApiError::TooManyJobs { limit, asked }),
    }
}

/// The base spec as a JSON object, fields left out where the user left
/// them out (so that a swept `target_std_error` does not meet a default
/// `runs`).
fn base_object(base: &Spec) -> Map<String, Value> {
    match serde_json::to_value(base) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Checks the shape of a sweep: every axis a spec field with at least one
/// value, each value of the field's type and listed once, and `repeat`
/// usable. Every problem is reported with its JSON pointer.
pub(crate) fn check(base: &Spec, sweep: &Sweep, repeat: u32) -> Result<(), Vec<FieldProblem>> {
    let fields = spec_fields();
    let object = base_object(base);
    let mut errors = Vec::new();
    let mut problem = |pointer: String, detail: String| {
        errors.push(FieldProblem { pointer, detail });
    };
    if sweep.axes.is_empty() {
        problem(
            "/sweep".into(),
            "a sweep needs at least one field, e.g. {\"exercise\": [25, 30, 35]}".into(),
        );
    }
    for axis in &sweep.axes {
        let pointer = format!("/sweep/{}", escape(&axis.field));
        if !fields.contains(&axis.field) {
            problem(
                pointer,
                format!(
                    "{:?} is not a spec field; a sweep may vary {}",
                    axis.field,
                    fields.join(", ")
                ),
            );
            continue;
        }
        if axis.values.is_empty() {
            problem(pointer.clone(), format!("{} lists no values", axis.field));
        }
        for (i, value) in axis.values.iter().enumerate() {
            if axis.values[..i].contains(value) {
                problem(
                    format!("{pointer}/{i}"),
                    format!(
                        "{} lists {value} twice; each grid point is priced once (use repeat for more)",
                        axis.field
                    ),
                );
                continue;
            }
            let mut point = object.clone();
            point.insert(axis.field.clone(), value.clone());
            if let Err(err) = serde_json::from_value::<Spec>(Value::Object(point)) {
                problem(format!("{pointer}/{i}"), err.to_string());
            }
        }
    }
    for (field, detail) in out_of_bounds(base) {
        if sweep.fields().any(|f| f == field) {
            problem(format!("/spec/{field}"), detail);
        }
    }
    if repeat == 0 {
        problem("/repeat".into(), "repeat must be at least 1".into());
    }
    // A seed fixed per point (by the base spec or an axis) would give a
    // point's repeats one stream; the batch's base seed gives each job its own.
    let fixed = if sweep.fields().any(|f| f == "seed") {
        Some("/sweep/seed")
    } else {
        base.seed.is_some().then_some("/spec/seed")
    };
    if let Some(pointer) = fixed.filter(|_| repeat > 1) {
        problem(
            pointer.into(),
            format!(
                "a seed fixed per grid point with repeat {repeat} would price every point {repeat} times \
                 identically; give the batch a base seed instead (top-level \"seed\": job i gets \
                 job_seed(seed, i)), or leave seeds out (each job draws its own)"
            ),
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The base spec's fields that break a bound of their own (the bounds the
/// OpenAPI schema states for each field), with why. Validating the
/// expanded jobs finds these for the fields the sweep leaves alone; a
/// field the sweep sets would escape it, yet the base must be a spec as
/// the schema describes it.
fn out_of_bounds(base: &Spec) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let positive = [
        ("initial", base.initial),
        ("up", base.up),
        ("down", base.down),
        ("interest", base.interest),
    ];
    for (field, value) in positive {
        if value.is_nan() || value <= 0.0 {
            out.push((field, format!("{field} ({value}) must be above 0")));
        }
    }
    if base.exercise.is_nan() || base.exercise < 0.0 {
        out.push((
            "exercise",
            format!("exercise ({}) must not be negative", base.exercise),
        ));
    }
    if !(1..=MAX_PERIODS).contains(&base.periods) {
        out.push((
            "periods",
            format!("periods ({}) must be from 1 to {MAX_PERIODS}", base.periods),
        ));
    }
    if let Some(runs) = base.runs.filter(|r| !(MIN_RUNS..=MAX_RUNS).contains(r)) {
        out.push((
            "runs",
            format!("runs ({runs}) must be from {MIN_RUNS} to {MAX_RUNS}"),
        ));
    }
    if let Some(target) = base.target_std_error.filter(|t| t.is_nan() || *t <= 0.0) {
        out.push((
            "target_std_error",
            format!("target_std_error ({target}) must be above 0"),
        ));
    }
    if let Some(seed) = base.seed.filter(|s| *s > MAX_SEED) {
        out.push(("seed", format!("seed ({seed}) must be at most {MAX_SEED}")));
    }
    let mut greeks = base.greeks.clone();
    greeks.sort_by_key(|g| g.name());
    greeks.dedup();
    if greeks.len() < base.greeks.len() {
        out.push(("greeks", "greeks lists a greek twice".into()));
    }
    out
}

/// The specs of every grid point in grid order, each `repeat` times, with
/// defaults filled. [`check`] must have passed.
pub(crate) fn expand(base: &Spec, grid: &BatchGrid) -> Result<Vec<Spec>, ApiError> {
    let object = base_object(base);
    let points = grid.sweep.points().ok_or(ApiError::Internal)?;
    let mut specs = Vec::new();
    for index in 0..points {
        let mut point = object.clone();
        for (axis, pick) in grid.sweep.axes.iter().zip(grid.sweep.point(index)) {
            point.insert(axis.field.clone(), axis.values[pick].clone());
        }
        let spec = serde_json::from_value::<Spec>(Value::Object(point))
            .map_err(|_| ApiError::Internal)?
            .with_defaults();
        for _ in 1..grid.repeat {
            specs.push(spec.clone());
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// Where a problem found validating the spec of job `job` of a sweep
/// points: at the value of the swept field, or at the base spec's field.
pub(crate) fn pointer(grid: &BatchGrid, job: usize, field: &str) -> String {
    let index = job as u64 / u64::from(grid.repeat.max(1));
    let picks = grid.sweep.point(index);
    match grid.sweep.axes.iter().position(|axis| axis.field == field) {
        Some(axis) => format!("/sweep/{}/{}", escape(field), picks[axis]),
        None => format!("/spec/{}", escape(field)),
    }
}

/// Drops problems already listed: a base spec's bad field is bad at every
/// grid point, and a bad swept value at every point that uses it.
pub(crate) fn dedup(errors: Vec<FieldProblem>) -> Vec<FieldProblem> {
    let mut seen = HashSet::new();
    errors
        .into_iter()
        .filter(|e| seen.insert((e.pointer.clone(), e.detail.clone())))
        .collect()
}

/// A field name as one RFC 6901 pointer token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(json: &str) -> Sweep {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn expands_the_product_in_order_with_repeats() {
        let grid = BatchGrid {
            sweep: sweep(r#"{"exercise": [25, 30], "periods": [10, 20, 30]}"#),
            repeat: 2,
        };
        let specs = expand(&Spec::default(), &grid).unwrap();
        let got: Vec<(f64, u32)> = specs.iter().map(|s| (s.exercise, s.periods)).collect();
        let want: Vec<(f64, u32)> = [25.0, 30.0]
            .into_iter()
            .flat_map(|k| [10, 20, 30].into_iter().map(move |n| (k, n)))
            .flat_map(|p| [p, p])
            .collect();
        assert_eq!(got, want);
        assert!(
            specs
                .iter()
                .all(|s| s.runs == Some(1_000_000) && s.seed.is_none())
        );
    }

    #[test]
    fn the_count_is_checked_before_expanding() {
        let axis = format!(
            "[{}]",
            (0..1000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let huge = sweep(&format!(
            r#"{{"a": {axis}, "b": {axis}, "c": {axis}, "d": {axis}}}"#
        ));
        assert!(matches!(
            job_count(&huge, 1, 100_000),
            Err(ApiError::TooManyJobs { limit: 100_000, .. })
        ));
        let grid = sweep(r#"{"exercise": [1, 2, 3], "periods": [1, 2]}"#);
        assert_eq!(job_count(&grid, 5, 30).unwrap(), 30);
        assert!(job_count(&grid, 6, 30).is_err());
    }

    #[test]
    fn every_bad_axis_is_pointed_at() {
        let bad = sweep(
            r#"{"strike": [1], "periods": [], "exercise": [25, "x", 25], "option": ["put", "straddle"]}"#,
        );
        let errors = check(&Spec::default(), &bad, 1).unwrap_err();
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/sweep/strike",
                "/sweep/periods",
                "/sweep/exercise/1",
                "/sweep/exercise/2",
                "/sweep/option/1"
            ],
            "{errors:#?}"
        );
        assert!(
            errors[0].detail.contains("exercise"),
            "{}",
            errors[0].detail
        );
    }

    #[test]
    fn a_base_field_the_sweep_sets_still_keeps_its_bounds() {
        let base = Spec {
            up: 0.0,
            periods: 2000,
            runs: Some(1),
            ..Spec::default()
        };
        let grid = sweep(r#"{"up": [1.4], "periods": [10], "exercise": [30]}"#);
        let errors = check(&base, &grid, 1).unwrap_err();
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        // `runs` is not swept: the expanded jobs' validation reports it.
        assert_eq!(pointers, ["/spec/up", "/spec/periods"], "{errors:#?}");
        assert!(check(&Spec::default(), &grid, 1).is_ok());
    }

    #[test]
    fn a_fixed_seed_cannot_be_repeated() {
        let seeded = Spec {
            seed: Some(7),
            ..Spec::default()
        };
        let grid = sweep(r#"{"exercise": [25, 30]}"#);
        assert!(check(&seeded, &grid, 1).is_ok());
        let errors = check(&seeded, &grid, 3).unwrap_err();
        assert_eq!(errors[0].pointer, "/spec/seed");
        let errors = check(&Spec::default(), &sweep(r#"{"seed": [1, 2]}"#), 3).unwrap_err();
        assert_eq!(errors[0].pointer, "/sweep/seed");
        assert!(check(&Spec::default(), &sweep(r#"{"seed": [1, 2]}"#), 1).is_ok());
        assert_eq!(
            check(&Spec::default(), &grid, 0).unwrap_err()[0].pointer,
            "/repeat"
        );
    }

    #[test]
    fn validation_problems_point_at_the_swept_value_or_the_base() {
        let grid = BatchGrid {
            sweep: sweep(r#"{"up": [1.5, 1.05], "periods": [10, 20]}"#),
            repeat: 2,
        };
        // Job 5 is point 2: up = 1.05 (index 1), periods = 10 (index 0).
        assert_eq!(pointer(&grid, 5, "up"), "/sweep/up/1");
        assert_eq!(pointer(&grid, 5, "periods"), "/sweep/periods/0");
        assert_eq!(pointer(&grid, 5, "down"), "/spec/down");
    }
}
