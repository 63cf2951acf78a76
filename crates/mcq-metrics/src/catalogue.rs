//! Every metric mcq exports: name, kind, labels and meaning. The names
//! follow Prometheus conventions (`mcq_` prefix, `_total` on counters,
//! base units in the name); docs/operations.md shows this table and a
//! test keeps the two equal.

/// What kind of series a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (until the process restarts).
    Counter,
    /// A value read or set now.
    Gauge,
    /// Observations counted into the buckets of [`crate::DURATION_BUCKETS`]
    /// or [`crate::HTTP_BUCKETS`].
    Histogram,
}

impl Kind {
    /// The name the text format gives the kind (`# TYPE` lines).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Which processes export a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `mcq serve`, on its `/metrics`.
    Server,
    /// Every worker: `mcq worker --metrics-listen`, and the embedded
    /// workers of `mcq serve` on the server's `/metrics`.
    Worker,
    /// Every process that exports metrics.
    Every,
}

/// One exported metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name in the text format.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Its labels (besides `le` on histogram buckets).
    pub labels: &'static [&'static str],
    /// Who exports it.
    pub source: Source,
    /// What it counts or measures (the `# HELP` line).
    pub help: &'static str,
}

/// Build information: always 1, with the version as a label.
pub const BUILD_INFO: &str = "mcq_build_info";
/// HTTP requests answered.
pub const HTTP_REQUESTS: &str = "mcq_http_requests_total";
/// Time to answer an HTTP request.
pub const HTTP_DURATION: &str = "mcq_http_request_duration_seconds";
/// Jobs enqueued.
pub const JOBS_SUBMITTED: &str = "mcq_jobs_submitted_total";
/// Unfinished tasks by state.
pub const QUEUE_TASKS: &str = "mcq_queue_tasks";
/// Age of the oldest due queued task.
pub const QUEUE_OLDEST_AGE: &str = "mcq_queue_oldest_queued_age_seconds";
/// Workers by state.
pub const WORKERS: &str = "mcq_workers";
/// When the queue-wide gauges were read.
pub const QUEUE_READ_AT: &str = "mcq_queue_read_timestamp_seconds";
/// Failed reads of the queue-wide gauges.
pub const QUEUE_READ_FAILURES: &str = "mcq_queue_read_failures_total";
/// Tasks claimed.
pub const TASKS_CLAIMED: &str = "mcq_tasks_claimed_total";
/// Claims of a task on its second or later attempt.
pub const TASKS_RETRIED: &str = "mcq_tasks_retried_total";
/// Claims that found every staged row of a tenant held by other claims.
pub const CLAIMS_CONTENDED: &str = "mcq_claims_contended_total";
/// Completions accepted.
pub const TASKS_COMPLETED: &str = "mcq_tasks_completed_total";
/// Failed attempts recorded.
pub const TASKS_FAILED: &str = "mcq_tasks_failed_total";
/// Attempts that panicked in the kernel.
pub const TASKS_PANICKED: &str = "mcq_tasks_panicked_total";
/// Tasks stopped through their cancel flag.
pub const TASKS_CANCELLED: &str = "mcq_tasks_cancelled_total";
/// Tasks handed back unfinished.
pub const TASKS_RELEASED: &str = "mcq_tasks_released_total";
/// Unstarted tasks handed to an idle worker.
pub const TASKS_HANDED_OFF: &str = "mcq_tasks_handed_off_total";
/// Expired leases put back in the queue.
pub const TASKS_RESCUED: &str = "mcq_tasks_rescued_total";
/// Expired leases on their last attempt, failed.
pub const TASKS_EXPIRED_FAILED: &str = "mcq_tasks_expired_failed_total";
/// Late completions and failures refused by fencing.
pub const COMPLETIONS_REFUSED: &str = "mcq_completions_refused_total";
/// Paths computed.
pub const PATHS: &str = "mcq_paths_total";
/// Turns of a worker's loop.
pub const WORKER_LOOP_TURNS: &str = "mcq_worker_loop_turns_total";
/// Submission to first claim.
pub const TASK_PICKUP: &str = "mcq_task_pickup_seconds";
/// Kernel time of a task.
pub const TASK_COMPUTE: &str = "mcq_task_compute_seconds";
/// Submission to completion recorded.
pub const TASK_END_TO_END: &str = "mcq_task_end_to_end_seconds";

/// Every metric, servers' first.
pub const CATALOGUE: &[Metric] = &[
    Metric {
        name: BUILD_INFO,
        kind: Kind::Gauge,
        labels: &["version"],
        source: Source::Every,
        help: "Always 1; the label names the version of the mcq binary.",
    },
    Metric {
        name: HTTP_REQUESTS,
        kind: Kind::Counter,
        labels: &["method", "route", "status"],
        source: Source::Server,
        help: "HTTP requests answered, by method, route template (`/v1/jobs/{id}`; `(no route)` for unknown paths) and status code.",
    },
    Metric {
        name: HTTP_DURATION,
        kind: Kind::Histogram,
        labels: &["method", "route"],
        source: Source::Server,
        help: "Seconds from a request's arrival until its answer's head is ready, by method and route template.",
    },
    Metric {
        name: JOBS_SUBMITTED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Server,
        help: "Jobs enqueued by this server (idempotent replays enqueue nothing and are not counted).",
    },
    Metric {
        name: QUEUE_TASKS,
        kind: Kind::Gauge,
        labels: &["state"],
        source: Source::Server,
        help: "Unfinished tasks of the whole queue by state: `queued` (due, waiting for a worker), `scheduled` (waiting out a retry backoff), `running` (under a lease). Read at most once per refresh interval.",
    },
    Metric {
        name: QUEUE_OLDEST_AGE,
        kind: Kind::Gauge,
        labels: &[],
        source: Source::Server,
        help: "Seconds the oldest due queued task has waited (0 when none waits). Read at most once per refresh interval.",
    },
    Metric {
        name: WORKERS,
        kind: Kind::Gauge,
        labels: &["state"],
        source: Source::Server,
        help: "Workers heard from in the last five minutes by state: `active`, `draining`, `lost` (no heartbeat for longer than a lease). Read at most once per refresh interval.",
    },
    Metric {
        name: QUEUE_READ_AT,
        kind: Kind::Gauge,
        labels: &[],
        source: Source::Server,
        help: "Unix time (the database's clock) at which the queue-wide gauges were last read.",
    },
    Metric {
        name: QUEUE_READ_FAILURES,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Server,
        help: "Reads of the queue-wide gauges that failed or took longer than 2 s; the gauges keep their last values.",
    },
    Metric {
        name: TASKS_CLAIMED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Tasks claimed under a lease.",
    },
    Metric {
        name: TASKS_RETRIED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Claims of a task on its second or later attempt (after a failed attempt or an expired lease).",
    },
    Metric {
        name: CLAIMS_CONTENDED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Claims that found every staged row of a tenant held by other claims and were tried again shortly; many per second means a large fleet queues on few staged batches.",
    },
    Metric {
        name: TASKS_COMPLETED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Task completions the store accepted.",
    },
    Metric {
        name: TASKS_FAILED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Failed attempts recorded (the kernel refused the spec or panicked); the task is retried with backoff or fails its job.",
    },
    Metric {
        name: TASKS_PANICKED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Attempts that panicked inside the kernel.",
    },
    Metric {
        name: TASKS_CANCELLED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Tasks stopped through their cancel flag (job cancelled, or shutdown past its timeout).",
    },
    Metric {
        name: TASKS_RELEASED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Tasks handed back to the queue unfinished (cancelled, or at shutdown).",
    },
    Metric {
        name: TASKS_HANDED_OFF,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Claimed tasks not yet started, handed back for a worker that ran out of work.",
    },
    Metric {
        name: TASKS_RESCUED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Tasks whose lease expired (their worker vanished) put back in the queue by this process's reaper.",
    },
    Metric {
        name: TASKS_EXPIRED_FAILED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Tasks whose lease expired on their last allowed attempt, failed with their job by this process's reaper.",
    },
    Metric {
        name: COMPLETIONS_REFUSED,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Late completions and failures refused by fencing: the lease had expired and the task was claimed again, or its job was cancelled.",
    },
    Metric {
        name: PATHS,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Paths computed by finished tasks (simulated, or enumerated by the exact methods).",
    },
    Metric {
        name: WORKER_LOOP_TURNS,
        kind: Kind::Counter,
        labels: &[],
        source: Source::Worker,
        help: "Turns of the workers' loops: about one per finished task, claim and announcement; far more means a loop spins.",
    },
    Metric {
        name: TASK_PICKUP,
        kind: Kind::Histogram,
        labels: &[],
        source: Source::Worker,
        help: "Seconds from a job's submission to the first claim of each of its tasks (first attempts only).",
    },
    Metric {
        name: TASK_COMPUTE,
        kind: Kind::Histogram,
        labels: &[],
        source: Source::Worker,
        help: "Kernel seconds of each computed task.",
    },
    Metric {
        name: TASK_END_TO_END,
        kind: Kind::Histogram,
        labels: &[],
        source: Source::Worker,
        help: "Seconds from a job's submission until a task's completion was accepted; for a job of one task, the job's end-to-end time.",
    },
];

/// The catalogue entry of `name`.
pub fn metric(name: &str) -> Option<&'static Metric> {
    CATALOGUE.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prometheus_conventions() {
        let mut seen = std::collections::HashSet::new();
        for m in CATALOGUE {
            assert!(seen.insert(m.name), "{} listed twice", m.name);
            assert!(m.name.starts_with("mcq_"), "{}", m.name);
            assert!(
                m.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                m.name
            );
            assert_eq!(
                m.kind == Kind::Counter,
                m.name.ends_with("_total"),
                "{}: counters, and only counters, end in _total",
                m.name
            );
            if m.kind == Kind::Histogram {
                assert!(m.name.ends_with("_seconds"), "{}", m.name);
            }
            assert!(!m.labels.contains(&"le"), "{}", m.name);
        }
    }

    /// docs/operations.md has one row per metric, with its type and labels.
    #[test]
    fn the_operations_page_lists_every_metric() {
        let page = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ));
        let rows: Vec<Vec<&str>> = page
            .lines()
            .filter(|l| l.starts_with("| `mcq_"))
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        assert_eq!(rows.len(), CATALOGUE.len(), "one row per metric");
        for m in CATALOGUE {
            let name = format!("`{}`", m.name);
            let row = rows
                .iter()
                .find(|r| r[1] == name)
                .unwrap_or_else(|| panic!("{} has no row", m.name));
            assert_eq!(row[2], m.kind.as_str(), "{}", m.name);
            let labels: Vec<String> = m.labels.iter().map(|l| format!("`{l}`")).collect();
            assert_eq!(row[3], labels.join(", "), "{}", m.name);
        }
    }
}
