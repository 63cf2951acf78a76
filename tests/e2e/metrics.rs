//! `/metrics` of real processes: a small batch through `mcq serve` and a
//! worker (a separate `mcq worker --metrics-listen`, or embedded in the
//! server), then the scrapes are parsed strictly, every series the
//! Grafana dashboard queries must be there with the labels it groups by,
//! and the counters must have moved exactly as the batch says.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mcq_client::{BatchRequest, Client};
use mcq_kernel::{Method, Spec};
use mcq_metrics::text::{Scrape, parse};
use mcq_metrics::{self as names, CATALOGUE, Source};
use mcq_tests::{McqProcess, TempDir};

/// Jobs of one task each (exact pricing, or fewer paths than a task
/// holds), quick to compute.
fn specs() -> Vec<Spec> {
    let mut specs: Vec<Spec> = (8..14)
        .map(|periods| Spec {
            method: Method::Exact,
            runs: None,
            periods,
            ..Spec::default()
        })
        .collect();
    specs.extend((0..6).map(|seed| Spec {
        runs: Some(20_000),
        seed: Some(seed),
        ..Spec::default()
    }));
    specs
}

/// `GET url` as text, after checking the status and media type.
async fn scrape(http: &reqwest::Client, url: &str) -> Scrape {
    let response = http
        .get(url)
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {url}: {err}"));
    assert_eq!(response.status(), 200, "GET {url}");
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .expect("ASCII")
        .to_owned();
    assert_eq!(content_type, mcq_metrics::CONTENT_TYPE, "GET {url}");
    let text = response.text().await.expect("body");
    parse(&text).unwrap_or_else(|err| panic!("GET {url} is no valid scrape: {err}\n{text}"))
}

/// Waits for the worker's log to name its metrics address.
fn metrics_url(worker: &McqProcess) -> String {
    let start = Instant::now();
    loop {
        if let Some(rest) = worker.log_text().split("metrics listening on ").nth(1) {
            // Up to a quote too, should the log be JSON.
            return rest
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '"')
                .collect();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never logged its metrics address\n{}",
            worker.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Scrapes `urls` until `done` holds for their union's samples, or panics
/// after a minute showing the last scrape. The worker counts a completion
/// once the store's answer is back, a moment after the batch reads done;
/// the queue gauges lag by up to a refresh interval.
async fn scrape_until(
    http: &reqwest::Client,
    urls: &[String],
    what: &str,
    done: impl Fn(&[Scrape]) -> bool,
) -> Vec<Scrape> {
    let start = Instant::now();
    loop {
        let mut scrapes = Vec::new();
        for url in urls {
            scrapes.push(scrape(http, url).await);
        }
        if done(&scrapes) {
            return scrapes;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never held; last scrapes:\n{scrapes:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn sum(scrapes: &[Scrape], name: &str, labels: &[(&str, &str)]) -> f64 {
    scrapes.iter().map(|s| s.sum(name, labels)).sum()
}

/// The metric names and the grouping labels of every query of the
/// dashboard: (query, names, labels).
fn dashboard_queries() -> Vec<(String, BTreeSet<String>, BTreeSet<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/grafana/mcq.json");
    let text = std::fs::read_to_string(path).expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    let mut stack: Vec<&serde_json::Value> = vec![&dashboard["panels"]];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => {
                if let Some(expr) = map.get("expr").and_then(|e| e.as_str()) {
                    exprs.push(expr.to_owned());
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    assert!(
        exprs.len() >= 10,
        "the dashboard queries too little: {exprs:?}"
    );
    exprs
        .into_iter()
        .map(|expr| {
            let names = identifiers(&expr)
                .into_iter()
                .filter(|w| w.starts_with("mcq_"))
                .collect();
            let mut labels = BTreeSet::new();
            for part in expr.split(" by (").skip(1) {
                let inside = part.split(')').next().unwrap_or_default();
                labels.extend(inside.split(',').map(|l| l.trim().to_owned()));
            }
            for part in expr.split('{').skip(1) {
                let inside = part.split('}').next().unwrap_or_default();
                for matcher in inside.split(',') {
                    let label: String = matcher
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    // `{{route}}` legend syntax never reaches `expr`.
                    labels.insert(label);
                }
            }
            labels.retain(|l| !l.is_empty());
            (expr, names, labels)
        })
        .collect()
}

fn identifiers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every series the dashboard queries is in `scrapes`, and each label it
/// groups or filters by is on some series the same query reads.
fn check_dashboard(scrapes: &[Scrape]) {
    for (expr, names, labels) in dashboard_queries() {
        assert!(!names.is_empty(), "{expr}: reads no mcq metric");
        for name in &names {
            assert!(
                scrapes.iter().any(|s| s.has_sample(name)),
                "{expr}: {name} is not exported"
            );
        }
        for label in &labels {
            let present = scrapes.iter().any(|s| {
                names
                    .iter()
                    .any(|n| s.samples(n).any(|x| x.labels.contains_key(label)))
            });
            assert!(present, "{expr}: no series of {names:?} has label {label}");
        }
    }
}

/// Every family the process exports is in the catalogue with its type,
/// and every catalogued metric of `sources` is exported with its labels.
fn check_catalogue(scrapes: &[Scrape], sources: &[Source]) {
    for scrape in scrapes {
        for (name, family) in &scrape.families {
            let metric = names::metric(name)
                .unwrap_or_else(|| panic!("{name} is exported but not in the catalogue"));
            assert_eq!(family.kind, metric.kind.as_str(), "{name}");
        }
    }
    for metric in CATALOGUE.iter().filter(|m| sources.contains(&m.source)) {
        let family = scrapes
            .iter()
            .find_map(|s| s.family(metric.name))
            .unwrap_or_else(|| panic!("{} is not exported", metric.name));
        // Labelled series appear with their first use; the HTTP ones
        // have been used by now.
        for sample in &family.samples {
            let mut labels: Vec<&str> = sample.labels.keys().map(String::as_str).collect();
            labels.retain(|l| *l != "le");
            let mut expected = metric.labels.to_vec();
            expected.sort_unstable();
            assert_eq!(labels, expected, "labels of {}", sample.name);
        }
    }
}

/// Runs the batch through `server` (and the worker whose metrics are at
/// `worker_url`, or embedded), then checks every scrape.
async fn run_and_check(server_url: &str, worker_url: Option<String>) {
    let http = reqwest::Client::new();
    let client = Client::new(server_url).expect("client");
    let mut urls = vec![format!("{server_url}/metrics")];
    urls.extend(worker_url);
    let jobs = specs();
    let n = jobs.len() as f64;
    let accepted = client
        .submit_batch(
            &BatchRequest {
                label: Some("metrics".into()),
                priority: None,
                jobs,
                ..BatchRequest::default()
            },
            None,
        )
        .await
        .expect("submit");
    let view = tokio::time::timeout(
        Duration::from_secs(300),
        client.wait_for_batch(accepted.id, Duration::from_millis(100), |_| {}),
    )
    .await
    .expect("the batch finishes")
    .expect("poll");
    assert_eq!(view.counts.succeeded as f64, n, "{view:#?}");

    let scrapes = scrape_until(&http, &urls, "completions counted, queue empty", |s| {
        sum(s, names::TASKS_COMPLETED, &[]) >= n
            && sum(s, &format!("{}_count", names::TASK_END_TO_END), &[]) >= n
            && sum(s, names::QUEUE_TASKS, &[("state", "queued")]) == 0.0
            && sum(s, names::QUEUE_TASKS, &[("state", "running")]) == 0.0
            && sum(s, names::WORKERS, &[("state", "active")]) == 1.0
    })
    .await;
    let get = |name: &str| sum(&scrapes, name, &[]);
    let count = |name: &str| sum(&scrapes, &format!("{name}_count"), &[]);
    assert_eq!(get(names::JOBS_SUBMITTED), n);
    assert_eq!(get(names::TASKS_COMPLETED), n, "one task per job");
    assert_eq!(
        get(names::TASKS_CLAIMED),
        n + get(names::TASKS_HANDED_OFF) + get(names::TASKS_RELEASED),
        "every claim completed or handed back"
    );
    for name in [
        names::TASKS_FAILED,
        names::TASKS_PANICKED,
        names::TASKS_RETRIED,
        names::TASKS_RESCUED,
        names::TASKS_EXPIRED_FAILED,
        names::COMPLETIONS_REFUSED,
        names::QUEUE_READ_FAILURES,
    ] {
        assert_eq!(get(name), 0.0, "{name}");
    }
    assert_eq!(count(names::TASK_COMPUTE), n);
    assert_eq!(count(names::TASK_PICKUP), n, "first attempts only");
    assert_eq!(count(names::TASK_END_TO_END), n);
    assert!(
        sum(&scrapes, &format!("{}_sum", names::TASK_END_TO_END), &[])
            >= sum(&scrapes, &format!("{}_sum", names::TASK_COMPUTE), &[]),
        "a task's end-to-end time includes its compute time"
    );
    let submitted = [
        ("method", "POST"),
        ("route", "/v1/batches"),
        ("status", "202"),
    ];
    assert_eq!(sum(&scrapes, names::HTTP_REQUESTS, &submitted), 1.0);
    assert_eq!(
        sum(
            &scrapes,
            &format!("{}_count", names::HTTP_DURATION),
            &[("method", "POST"), ("route", "/v1/batches")]
        ),
        1.0
    );
    // Counted before the answer leaves the server, so the polls show.
    assert!(
        sum(
            &scrapes,
            names::HTTP_REQUESTS,
            &[("route", "/v1/batches/{id}"), ("status", "200")]
        ) >= 1.0
    );
    assert_eq!(
        sum(&scrapes, names::BUILD_INFO, &[]),
        scrapes.len() as f64,
        "one build_info per process"
    );
    check_catalogue(&scrapes, &[Source::Server, Source::Worker, Source::Every]);
    check_dashboard(&scrapes);
}

/// The server refreshes the queue gauges every second here, so that the
/// empty queue shows within the test's patience.
const SERVE: &[&str] = &["--metrics-refresh-secs", "1"];

fn worker(url: &str, dir: &TempDir) -> (McqProcess, String) {
    let worker = McqProcess::worker(
        "worker",
        url,
        &[
            "--concurrency",
            "1",
            "--threads",
            "1",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        dir.path(),
    )
    .expect("start the worker");
    let url = metrics_url(&worker);
    (worker, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_server_and_worker_process() {
    let dir = TempDir::new("mcq-metrics").expect("temp dir");
    let url = mcq_testdb::sqlite_url(dir.path());
    let mut args = vec!["--embedded-workers", "0"];
    args.extend_from_slice(SERVE);
    let (_server, base) = McqProcess::server("server", &url, &args, dir.path()).expect("serve");
    let (_worker, worker_url) = worker(&url, &dir);
    run_and_check(&base, Some(worker_url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_server_with_an_embedded_worker() {
    let dir = TempDir::new("mcq-metrics").expect("temp dir");
    let url = mcq_testdb::sqlite_url(dir.path());
    let mut args = vec!["--embedded-workers", "1"];
    args.extend_from_slice(SERVE);
    let (_server, base) = McqProcess::server("server", &url, &args, dir.path()).expect("serve");
    run_and_check(&base, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_server_and_worker_process() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    let dir = TempDir::new("mcq-metrics").expect("temp dir");
    let mut args = vec!["--embedded-workers", "0"];
    args.extend_from_slice(SERVE);
    let (_server, base) = McqProcess::server("server", &db.url, &args, dir.path()).expect("serve");
    let (_worker, worker_url) = worker(&db.url, &dir);
    run_and_check(&base, Some(worker_url)).await;
}
