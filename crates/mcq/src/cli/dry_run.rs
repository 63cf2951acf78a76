//! The summary `mcq submit --dry-run` prints: what would be queued, and
//! what it would take on the server and on its live workers.

use mcq_client::{DryRun, FleetBasis};

/// Prints a dry run's answer for people (`--json` prints the server's).
pub(crate) fn print_dry_run(answer: &DryRun) {
    for line in summary(answer) {
        println!("{line}");
    }
}

/// The lines of [`print_dry_run`].
fn summary(answer: &DryRun) -> Vec<String> {
    let (local, fleet) = (&answer.local, &answer.fleet);
    let mut lines = vec![
        "dry run: nothing was queued".to_owned(),
        format!(
            "  {} jobs in {} tasks, {} paths",
            answer.jobs, answer.tasks, answer.paths
        ),
    ];
    if answer.exact_jobs > 0 {
        lines.push(format!("  {} of them priced exactly", answer.exact_jobs));
    }
    if answer.unpredicted_jobs > 0 {
        lines.push(format!(
            "  {} with a target standard error, left out below: their paths are known only once they run",
            answer.unpredicted_jobs
        ));
    }
    let speed = local
        .ns_per_path_step
        .map(|ns| format!(", {ns:.3} ns per path-step"))
        .unwrap_or_default();
    lines.push(format!(
        "  on the server: {} of compute{speed}; {} wall on its {} cores",
        seconds(local.compute_s),
        seconds(local.wall_s),
        local.cores
    ));
    let basis = match fleet.basis {
        FleetBasis::History => format!(
            "measured on {} recent jobs, {:.2}× the server's time",
            fleet.history_jobs, fleet.speed_ratio
        ),
        FleetBasis::Calibration => "no recent jobs: taken at the server's speed".to_owned(),
    };
    lines.push(match fleet.wall_s {
        Some(wall) => format!(
            "  on the fleet: {} workers, {} slots ({basis}): {} of compute, {} wall",
            fleet.workers,
            fleet.slots,
            seconds(fleet.compute_s),
            seconds(wall)
        ),
        None => "  on the fleet: no live worker; the work would wait for one".to_owned(),
    });
    if let Some(cost) = &answer.cost {
        let fleet = cost
            .fleet
            .map_or_else(|| "no live worker".to_owned(), |c| format!("{c:.3e}"));
        lines.push(format!(
            "  cost: server {:.3e}, fleet {fleet} (local {} and cloud {} per core-hour, billed per {} s)",
            cost.local, cost.local_per_core_hour, cost.cloud_per_core_hour, cost.cloud_granularity_s
        ));
    }
    lines
}

/// Seconds with three significant digits, or minutes and hours when long.
fn seconds(s: f64) -> String {
    if s >= 7200.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcq_client::{DryRunCost, FleetPrediction, LocalPrediction};

    fn answer(wall: Option<f64>) -> DryRun {
        DryRun {
            jobs: 100,
            tasks: 100,
            paths: 100_000_000,
            exact_jobs: 0,
            unpredicted_jobs: 2,
            local: LocalPrediction {
                compute_s: 0.62,
                cores: 2,
                wall_s: 0.31,
                ns_per_path_step: Some(0.31),
            },
            fleet: FleetPrediction {
                workers: 2,
                slots: 4,
                basis: FleetBasis::History,
                history_jobs: 200,
                speed_ratio: 1.1,
                compute_s: 0.682,
                wall_s: wall,
            },
            cost: Some(DryRunCost {
                local_per_core_hour: 0.04,
                cloud_per_core_hour: 0.05,
                cloud_granularity_s: 60.0,
                local: 6.9e-6,
                fleet: wall.map(|_| 3.3e-3),
            }),
        }
    }

    #[test]
    fn the_summary_names_counts_times_fleet_and_cost() {
        let text = summary(&answer(Some(0.17))).join("\n");
        for part in [
            "nothing was queued",
            "100 jobs in 100 tasks, 100000000 paths",
            "2 with a target standard error",
            "620.0 ms of compute, 0.310 ns per path-step; 310.0 ms wall on its 2 cores",
            "2 workers, 4 slots (measured on 200 recent jobs, 1.10× the server's time)",
            "170.0 ms wall",
            "fleet 3.300e-3",
            "billed per 60 s",
        ] {
            assert!(text.contains(part), "{part:?} missing from\n{text}");
        }
        let idle = summary(&answer(None)).join("\n");
        assert!(
            idle.contains("no live worker; the work would wait"),
            "{idle}"
        );
        assert!(idle.contains("fleet no live worker"), "{idle}");
    }

    #[test]
    fn long_times_read_in_minutes_and_hours() {
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(2.5), "2.50 s");
        assert_eq!(seconds(600.0), "10.0 min");
        assert_eq!(seconds(36_000.0), "10.0 h");
    }
}
