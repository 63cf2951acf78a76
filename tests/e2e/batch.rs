//! A batch through real processes: submit over HTTP, poll to completion,
//! then check every result against the local kernel bit for bit and the
//! batch aggregates against a recomputation.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use mcq_client::{BatchRequest, BatchView, Client, JobState, JobView};
use mcq_kernel::{Greek, Method, OptionKind, Spec, VarianceReduction};

use super::server::{Server, TempDir, workers};

/// A mix that exercises splitting into tasks, every estimator and drawn seeds.
fn specs() -> Vec<Spec> {
    let base = Spec {
        runs: Some(300_000),
        ..Spec::default()
    };
    vec![
        Spec {
            seed: Some(1),
            ..base.clone()
        },
        Spec {
            seed: Some(2),
            runs: Some(1_000_000),
            ..base.clone()
        },
        base.clone(),
        Spec {
            option: OptionKind::Put,
            ..base.clone()
        },
        Spec {
            variance_reduction: VarianceReduction::None,
            ..base.clone()
        },
        Spec {
            variance_reduction: VarianceReduction::Antithetic,
            ..base.clone()
        },
        Spec {
            variance_reduction: VarianceReduction::Geometric,
            up: 1.1,
            down: 0.95,
            interest: 1.01,
            ..base.clone()
        },
        Spec {
            method: Method::Exact,
            runs: None,
            periods: 16,
            ..base.clone()
        },
        Spec {
            greeks: vec![Greek::Delta],
            seed: Some(3),
            ..base.clone()
        },
        Spec {
            method: Method::Exact,
            runs: None,
            periods: 12,
            greeks: vec![Greek::Delta],
            ..base.clone()
        },
        Spec {
            runs: None,
            target_std_error: Some(0.01),
            seed: Some(5),
            ..base
        },
    ]
}

async fn run_batch(client: &Client) -> (BatchView, Vec<JobView>) {
    let request = BatchRequest {
        label: Some("e2e".into()),
        priority: None,
        jobs: specs(),
        ..BatchRequest::default()
    };
    let accepted = client
        .submit_batch(&request, Some("e2e-batch"))
        .await
        .expect("submit");
    assert_eq!(accepted.job_ids.len(), request.jobs.len());
    let replay = client
        .submit_batch(&request, Some("e2e-batch"))
        .await
        .expect("replay");
    assert_eq!(
        replay, accepted,
        "an idempotent replay returns the same ids"
    );

    let view = tokio::time::timeout(
        Duration::from_secs(300),
        client.wait_for_batch(accepted.id, Duration::from_millis(50), |_| {}),
    )
    .await
    .expect("the batch finishes within 5 minutes")
    .expect("poll");
    assert_eq!(
        view.total,
        request.jobs.len() as u64,
        "the replay enqueued nothing"
    );
    let mut jobs = Vec::new();
    let mut after = None;
    loop {
        // A small page size so that paging is exercised across processes too.
        let page = client
            .batch_jobs(accepted.id, after, 4)
            .await
            .expect("page");
        jobs.extend(page.jobs);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let ids: Vec<_> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(
        ids, accepted.job_ids,
        "pages list the batch in submission order"
    );
    (view, jobs)
}

fn check_results(view: &BatchView, jobs: &[JobView]) {
    assert!(view.done);
    assert_eq!(view.counts.succeeded, jobs.len() as u64, "{view:#?}");
    for job in jobs {
        assert_eq!(job.state, JobState::Succeeded, "{job:#?}");
        let remote = job.result.as_ref().expect("result");
        let local = job
            .spec
            .validate()
            .expect("stored spec is valid")
            .price(&AtomicBool::new(false))
            .expect("price");
        assert_eq!(
            remote.price.to_bits(),
            local.price.to_bits(),
            "price of {:?}",
            job.spec
        );
        assert_eq!(
            remote.std_error.to_bits(),
            local.std_error.to_bits(),
            "std error of {:?}",
            job.spec
        );
        assert_eq!(
            remote.delta.map(f64::to_bits),
            local.delta.map(f64::to_bits),
            "delta of {:?}",
            job.spec
        );
        assert_eq!(
            remote.delta_std_error.map(f64::to_bits),
            local.delta_std_error.map(f64::to_bits)
        );
        assert_eq!(remote.delta.is_some(), job.spec.wants_delta());
        assert_eq!(remote.paths, local.paths);
        assert_eq!(remote.seed, local.seed);
        assert_eq!(remote.variance_reduction, local.variance_reduction);
        if job.spec.method == Method::Mc {
            assert_eq!(
                remote.seed, job.spec.seed,
                "the stored spec names the seed used"
            );
        }
    }
    let prices: Vec<f64> = jobs
        .iter()
        .map(|j| j.result.as_ref().unwrap().price)
        .collect();
    let n = prices.len() as f64;
    let mean = prices.iter().sum::<f64>() / n;
    let var = prices.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let stats = view.stats.as_ref().expect("stats");
    assert_eq!(stats.count, jobs.len() as u64);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(stats.mean, mean), "{} vs {mean}", stats.mean);
    assert!(
        close(stats.stddev, var.sqrt()),
        "{} vs {}",
        stats.stddev,
        var.sqrt()
    );
    assert!(close(stats.std_error, var.sqrt() / n.sqrt()));
    assert_eq!(
        stats.min,
        prices.iter().copied().fold(f64::INFINITY, f64::min)
    );
    assert_eq!(
        stats.max,
        prices.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    );
    let compute: f64 = jobs
        .iter()
        .map(|j| j.timings.compute_ms.unwrap_or(0.0))
        .sum();
    assert!(
        close(view.timings.compute_ms_total, compute),
        "{} vs {compute}",
        view.timings.compute_ms_total
    );
    assert!(view.timings.makespan_ms.is_some_and(|m| m >= 0.0));
}

/// Cancelling a batch of long jobs over HTTP leaves it done, all cancelled
/// or finished, and a cancelled job never reports a result.
async fn check_cancel(client: &Client) {
    let long = Spec {
        runs: Some(2_000_000_000),
        ..Spec::default()
    };
    let request = BatchRequest {
        label: None,
        priority: None,
        jobs: vec![long; 3],
        ..BatchRequest::default()
    };
    let accepted = client.submit_batch(&request, None).await.expect("submit");
    let cancelled = client.cancel_batch(accepted.id).await.expect("cancel");
    assert!(cancelled.cancelled >= 1, "{cancelled:?}");
    let view = tokio::time::timeout(
        Duration::from_secs(120),
        client.wait_for_batch(accepted.id, Duration::from_millis(50), |_| {}),
    )
    .await
    .expect("a cancelled batch ends quickly")
    .expect("poll");
    assert_eq!(view.counts.cancelled, 3, "{view:#?}");
    for id in accepted.job_ids {
        let job = client.job(id).await.expect("job");
        assert_eq!(job.state, JobState::Cancelled);
        assert!(job.result.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_default_with_embedded_workers() {
    let dir = TempDir::new();
    let server = Server::start(&dir.sqlite_url(), &["--embedded-workers", "2"]);
    let client = Client::new(&server.base_url).expect("client");
    let (view, jobs) = run_batch(&client).await;
    check_results(&view, &jobs);
    check_cancel(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_with_separate_worker_processes() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    let server = Server::start(&db.url, &["--embedded-workers", "0"]);
    let _workers = workers(&db.url, 2);
    let client = Client::new(&server.base_url).expect("client");
    let (view, jobs) = run_batch(&client).await;
    check_results(&view, &jobs);
    // The counters catch up with the completions at each worker's idle
    // mark or heartbeat.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let live = client.workers().await.expect("workers");
        assert_eq!(live.len(), 2, "{live:#?}");
        if live.iter().map(|w| w.tasks_done).sum::<u64>() >= jobs.len() as u64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the workers' counters stay below the jobs: {live:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    check_cancel(&client).await;
}
