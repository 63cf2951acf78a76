//! Printing what one `mcq bench kernel` invocation measured: tables or one
//! JSON object.

use mcq_kernel::VarianceReduction;
use serde_json::{Value, json};

use super::shapes::ShapeRow;
use super::{Args, ESTIMATORS, Samples, Scaling, ToTarget};

/// Everything one invocation measured, for printing.
pub(super) struct Report<'a> {
    pub(super) args: &'a Args,
    pub(super) paths: u64,
    pub(super) original_paths: u64,
    pub(super) cpus: usize,
    pub(super) names: &'a [String],
    pub(super) single: &'a [Samples],
    /// Plain kernel against the faithful loop: [fastest, median] runs.
    pub(super) ratio: [f64; 2],
    pub(super) shapes: &'a [ShapeRow],
    pub(super) scaling: &'a [Scaling],
    pub(super) to_target: &'a [ToTarget],
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

    pub(super) fn json(&self) -> Value {
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
            "ratio_plain_vs_original": self.ratio[0],
            "ratio_plain_vs_original_medians": self.ratio[1],
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

    pub(super) fn text(&self) -> String {
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
            "\nkernel plain vs the faithful original loop: {:.1}× fastest vs fastest, {:.1}× median vs median (target ≥ 20×)\n",
            self.ratio[0], self.ratio[1]
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
