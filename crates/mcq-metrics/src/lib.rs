//! The Prometheus metrics of mcq: what each one is ([`CATALOGUE`]), the
//! buckets its histograms count into, and the one exporter of the process.
//!
//! Code that records goes through the `metrics` facade (`metrics::counter!`
//! and friends) after [`install`] has made mcq's recorder the process's
//! global one; `GET /metrics` of `mcq serve` and `mcq worker
//! --metrics-listen` answer [`Exporter::render`]. Handles registered
//! before [`install`] record nothing, so every component that records
//! calls it first (it is idempotent and cheap after the first call).
//!
//! [`text`] parses the exposition format strictly, for the tests that
//! scrape real processes.

mod catalogue;
pub mod text;

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub use catalogue::*;

/// Media type of [`Exporter::render`]: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds (seconds) of the task histograms' buckets: jobs of 1 ms
/// to 10 min, about three buckets per factor of ten.
pub const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

/// Upper bounds (seconds) of the HTTP latency buckets: from a probe's
/// half millisecond to the longest long poll.
pub const HTTP_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// How often histogram samples are folded into their buckets between
/// scrapes; without it a process nobody scrapes keeps every sample.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's recorder, seen from the side that renders it.
#[derive(Debug, Clone)]
pub struct Exporter {
    handle: PrometheusHandle,
}

static EXPORTER: OnceLock<Exporter> = OnceLock::new();

/// Installs mcq's recorder as the process's global one (once; later calls
/// return the same exporter) and describes every metric of the catalogue.
///
/// If another recorder was installed first, mcq's metrics go to it and
/// this exporter renders nothing of them; a warning says so.
pub fn install() -> &'static Exporter {
    EXPORTER.get_or_init(|| {
        let mut builder = PrometheusBuilder::new();
        for m in CATALOGUE.iter().filter(|m| m.kind == Kind::Histogram) {
            let buckets = if m.name == HTTP_DURATION {
                HTTP_BUCKETS
            } else {
                DURATION_BUCKETS
            };
            builder = builder
                .set_buckets_for_metric(Matcher::Full(m.name.to_owned()), buckets)
                .expect("the bucket lists are not empty");
        }
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "another metrics recorder was installed first: /metrics shows none of mcq's metrics"
            );
        }
        for m in CATALOGUE {
            match m.kind {
                Kind::Counter => metrics::describe_counter!(m.name, m.help),
                Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
                Kind::Histogram => metrics::describe_histogram!(m.name, m.help),
            }
        }
        metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("mcq-metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                }
            });
        if let Err(err) = spawned {
            // Scrapes fold the samples too; only an unscraped process grows.
            tracing::warn!(error = %err, "could not start the metrics upkeep thread");
        }
        Exporter { handle }
    })
}

impl Exporter {
    /// Every metric of the process in the text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_span_a_millisecond_to_ten_minutes_in_order() {
        for buckets in [DURATION_BUCKETS, HTTP_BUCKETS] {
            assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
        }
        assert_eq!(DURATION_BUCKETS.first(), Some(&0.001));
        assert_eq!(DURATION_BUCKETS.last(), Some(&600.0));
    }

    /// The exporter's own output passes the strict parser, with the
    /// catalogue's types and help, and histograms as real histograms.
    #[test]
    fn the_exporter_renders_what_the_parser_accepts() {
        let exporter = install();
        metrics::counter!(TASKS_COMPLETED).increment(3);
        metrics::counter!(HTTP_REQUESTS, "method" => "GET", "route" => "/v1/jobs/{id}", "status" => "200")
            .increment(1);
        metrics::gauge!(QUEUE_TASKS, "state" => "queued").set(7.0);
        metrics::histogram!(TASK_COMPUTE).record(0.003);
        metrics::histogram!(TASK_COMPUTE).record(700.0);
        let text = exporter.render();
        let scrape = text::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        for name in [
            TASKS_COMPLETED,
            HTTP_REQUESTS,
            QUEUE_TASKS,
            TASK_COMPUTE,
            BUILD_INFO,
        ] {
            let family = scrape
                .family(name)
                .unwrap_or_else(|| panic!("{name} missing\n{text}"));
            let m = metric(name).expect("in the catalogue");
            assert_eq!(family.kind, m.kind.as_str(), "{name}");
            assert_eq!(family.help.as_deref(), Some(m.help), "{name}");
        }
        assert!(scrape.sum(TASKS_COMPLETED, &[]) >= 3.0);
        assert_eq!(scrape.sum(QUEUE_TASKS, &[("state", "queued")]), 7.0);
        assert!(scrape.sum(&format!("{TASK_COMPUTE}_bucket"), &[("le", "0.005")]) >= 1.0);
        assert!(scrape.sum(&format!("{TASK_COMPUTE}_count"), &[]) >= 2.0);
        assert_eq!(
            scrape.sum(BUILD_INFO, &[("version", env!("CARGO_PKG_VERSION"))]),
            1.0
        );
    }
}
