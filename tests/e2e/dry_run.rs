//! Dry runs (`?dry_run=true`, `mcq submit --dry-run`) against real
//! servers: they queue nothing, refuse what a submission refuses, count
//! exactly, and predict the original batch's compute time within a factor
//! of 2.5 of a real run on the same machine moments later, with the other
//! tests running beside it (`tests/prediction/run.sh` measures how close
//! the prediction comes on a quiet machine).

use std::time::Duration;

use mcq_client::{BatchRequest, Client, CostModel, DryRun, FleetBasis};
use mcq_kernel::Spec;
use serde_json::{Value, json};

use super::server::{Server, TempDir, mcq, workers};

/// Rows of the tables a submission writes: jobs, batches, tasks.
async fn stored(url: &str) -> (i64, i64, i64) {
    const COUNTS: &str = "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM batches),
                                 (SELECT count(*) FROM tasks)";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("open sqlite");
        sqlx::query_as(COUNTS)
            .fetch_one(&pool)
            .await
            .expect("count")
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("connect");
        sqlx::query_as(COUNTS)
            .fetch_one(&pool)
            .await
            .expect("count")
    }
}

/// POSTs `body` to `path` and returns the status and the decoded answer.
async fn post(base: &str, path: &str, body: &Value, key: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn counts_and_refusals(url: &str, server: &Server) {
    let base = server.base_url.as_str();
    let before = stored(url).await;
    // One job: 1M paths are 16 chunks, one task.
    let (status, one) = post(base, "/v1/jobs?dry_run=true", &json!({}), None).await;
    assert_eq!(status, 200, "{one}");
    let one: DryRun = serde_json::from_value(one).expect("a dry run's answer");
    assert_eq!((one.jobs, one.tasks, one.paths), (1, 1, 1_000_000));
    assert!(one.local.compute_s > 0.0 && one.local.ns_per_path_step.is_some());
    // Listed jobs: 20M paths are 306 chunks in 20 tasks; exact and
    // target-error jobs are one task each, and have no fixed paths.
    let listed = json!({"jobs": [{"runs": 20_000_000}, {}, {"method": "exact", "periods": 16},
                                 {"target_std_error": 0.01}]});
    let (status, batch) = post(base, "/v1/batches?dry_run=true", &listed, Some("k-1")).await;
    assert_eq!(status, 200, "{batch}");
    let batch: DryRun = serde_json::from_value(batch).unwrap();
    assert_eq!((batch.jobs, batch.tasks, batch.paths), (4, 23, 21_000_000));
    assert_eq!((batch.exact_jobs, batch.unpredicted_jobs), (1, 1));
    // A sweep: 3 × 2 points, each twice.
    let sweep = json!({"spec": {"runs": 100_000}, "repeat": 2,
                       "sweep": {"exercise": [25, 30, 35], "periods": [10, 20]}});
    let (status, grid) = post(base, "/v1/batches?dry_run=true", &sweep, None).await;
    assert_eq!(status, 200, "{grid}");
    let grid: DryRun = serde_json::from_value(grid).unwrap();
    assert_eq!((grid.jobs, grid.tasks, grid.paths), (12, 12, 1_200_000));

    // Refused exactly as a submission is.
    let bad = [
        ("/v1/jobs", json!({"down": 2, "periods": 0})),
        ("/v1/batches", json!({"jobs": [{}, {"up": 0.5}]})),
        ("/v1/batches", json!({"jobs": []})),
        ("/v1/batches", json!({"sweep": {"strike": [1]}})),
        // The server's job limit is 50 (below): 60 grid points.
        (
            "/v1/batches",
            json!({"sweep": {"exercise": (0..60).collect::<Vec<_>>()}}),
        ),
        ("/v1/jobs", json!({"runs": "many"})),
    ];
    for (path, body) in &bad {
        let real = post(base, path, body, None).await;
        let dry = post(base, &format!("{path}?dry_run=true"), body, None).await;
        assert!(matches!(real.0, 400 | 413 | 422), "{path} {body}: {real:?}");
        assert_eq!(dry, real, "{path} {body}");
    }
    for (query, needle) in [
        ("dry_run=yes", "dry_run must be true or false"),
        ("cost_local=0.04&cost_cloud=0.05", "add dry_run=true"),
        (
            "dry_run=true&cost_local=0.04",
            "cost_local needs cost_cloud",
        ),
        ("dry_run=true&cost_local=-1&cost_cloud=0.05", "zero or more"),
        (
            "dry_run=true&cost_local=1&cost_cloud=0.05,granularity=2h",
            "1s, 1min or 1h",
        ),
    ] {
        let (status, problem) = post(base, &format!("/v1/jobs?{query}"), &json!({}), None).await;
        assert_eq!(status, 400, "{query}: {problem}");
        assert_eq!(problem["type"], "/problems/bad-parameter", "{query}");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(needle), "{query}: {detail}");
    }
    assert_eq!(stored(url).await, before, "a dry run stores nothing");

    // Nor does it keep its idempotency key: a real submission with the
    // same key and another body is accepted, not a 409.
    let (status, accepted) = post(
        base,
        "/v1/batches",
        &json!({"jobs": [{"runs": 1000}]}),
        Some("k-1"),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let after = stored(url).await;
    assert_eq!((after.0, after.1), (before.0 + 1, before.1 + 1));

    // Prices: the server's cores for its wall time, billed exactly; the
    // same costs through the client.
    let client = Client::new(base).expect("client");
    let model = CostModel::new(0.036, (0.072, 3600.0));
    let priced = client
        .dry_run_batch(
            &BatchRequest {
                jobs: vec![Spec::default(); 10],
                ..BatchRequest::default()
            },
            Some(&model),
        )
        .await
        .expect("a priced dry run");
    let cost = priced.cost.expect("a cost");
    assert_eq!(
        (
            cost.local_per_core_hour,
            cost.cloud_per_core_hour,
            cost.cloud_granularity_s
        ),
        (0.036, 0.072, 3600.0)
    );
    let local = model.local_cost(priced.local.cores, priced.local.wall_s * 1e3);
    assert!((cost.local - local).abs() <= 1e-12 * local, "{cost:?}");
    match priced.fleet.wall_s {
        // Billed per hour: every slot for one whole hour.
        Some(_) => assert_eq!(cost.fleet, Some(f64::from(priced.fleet.slots) * 0.072)),
        None => assert_eq!(cost.fleet, None),
    }
    assert_eq!(stored(url).await, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_dry_runs_store_nothing_and_refuse_like_submissions() {
    let dir = TempDir::new();
    let url = dir.sqlite_url();
    let server = Server::start(&url, &["--embedded-workers", "1", "--max-batch-jobs", "50"]);
    counts_and_refusals(&url, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_dry_runs_store_nothing_and_refuse_like_submissions() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    let server = Server::start(
        &db.url,
        &["--embedded-workers", "0", "--max-batch-jobs", "50"],
    );
    counts_and_refusals(&db.url, &server).await;
    // No worker is live: the fleet has no wall time, and says so.
    let client = Client::new(&server.base_url).expect("client");
    let idle = client
        .dry_run_job(&Spec::default(), None)
        .await
        .expect("dry run");
    assert_eq!(
        (idle.fleet.workers, idle.fleet.slots, idle.fleet.wall_s),
        (0, 0, None)
    );
}

/// The original batch: 100 calls of the original sample (1M paths each).
fn original_batch() -> BatchRequest {
    BatchRequest {
        label: Some("original".into()),
        jobs: vec![Spec::default(); 100],
        ..BatchRequest::default()
    }
}

/// Predicts the original batch on a fresh server (no history: the
/// prediction rests on the server's calibration alone), runs it, and
/// returns measured over predicted compute. Then checks that the fleet's
/// speed is taken from those jobs: a second dry run predicts exactly the
/// kernel time the run measured.
async fn predict_and_run(client: &Client) -> f64 {
    let predicted = client
        .dry_run_batch(&original_batch(), None)
        .await
        .expect("dry run");
    assert_eq!(
        (predicted.jobs, predicted.tasks, predicted.paths),
        (100, 100, 100_000_000)
    );
    assert_eq!(
        predicted.fleet.basis,
        FleetBasis::Calibration,
        "{predicted:#?}"
    );
    assert_eq!(predicted.fleet.compute_s, predicted.local.compute_s);
    let accepted = client
        .submit_batch(&original_batch(), None)
        .await
        .expect("submit");
    let view = tokio::time::timeout(
        Duration::from_secs(600),
        client.wait_for_batch(accepted.id, Duration::from_millis(100), |_| {}),
    )
    .await
    .expect("the batch finishes within 10 minutes")
    .expect("poll");
    assert_eq!(view.counts.succeeded, 100, "{view:#?}");
    let measured = view.timings.compute_ms_total / 1e3;
    let ratio = measured / predicted.fleet.compute_s;
    let wall = view.timings.makespan_ms.unwrap_or(f64::NAN) / 1e3;
    let predicted_wall = predicted.fleet.wall_s.expect("live workers");
    eprintln!(
        "original batch on {} slots: predicted {:.3} s of compute, {predicted_wall:.3} s wall; \
         measured {measured:.3} s ({ratio:.3}×), {wall:.3} s wall ({:.3}×)",
        predicted.fleet.slots,
        predicted.fleet.compute_s,
        wall / predicted_wall,
    );
    let after = client
        .dry_run_batch(&original_batch(), None)
        .await
        .expect("dry run");
    assert_eq!(after.fleet.basis, FleetBasis::History, "{after:#?}");
    assert_eq!(after.fleet.history_jobs, 100, "{after:#?}");
    // The same calibration (cached) on the same specs, scaled by measured
    // over calibrated: the measured time itself.
    assert_eq!(after.local.compute_s, predicted.local.compute_s);
    assert!(
        (after.fleet.compute_s - measured).abs() <= 1e-9 * measured,
        "{} vs {measured}",
        after.fleet.compute_s
    );
    ratio
}

/// How far a calibrated prediction may be from the measured compute.
const FACTOR: f64 = 2.5;

/// The prediction must come within a factor of 2.5 of the measured
/// compute: close enough that a wrong unit, a wrong count of paths,
/// periods or jobs, or a calibration of the wrong shape fails it. A shared
/// two-core machine, with the other tests of this binary running beside
/// it, moves one run or one 70 ms calibration by up to 2× (0.60–1.98 seen
/// in one CI run), so each try starts a fresh server and one of three must
/// hold.
async fn prediction_holds(mut start: impl AsyncFnMut() -> (Server, Vec<super::server::Process>)) {
    let mut ratios = Vec::new();
    for _ in 0..3 {
        let (server, _workers) = start().await;
        let client = Client::new(&server.base_url).expect("client");
        // Workers register with their first heartbeat.
        for _ in 0..200 {
            let live = client
                .dry_run_job(&Spec::default(), None)
                .await
                .expect("dry run");
            if live.fleet.slots == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ratio = predict_and_run(&client).await;
        ratios.push(ratio);
        if (1.0 / FACTOR..=FACTOR).contains(&ratio) {
            return;
        }
    }
    panic!(
        "measured over predicted compute was outside [1/{FACTOR}, {FACTOR}] in every try: {ratios:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_prediction_of_the_original_batch_holds_on_a_real_run() {
    let dir = TempDir::new();
    let mut tries = 0;
    prediction_holds(async || {
        tries += 1;
        let url = format!(
            "sqlite:{}",
            dir.0.join(format!("try-{tries}.sqlite")).display()
        );
        (
            Server::start(&url, &["--embedded-workers", "2"]),
            Vec::new(),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_prediction_of_the_original_batch_holds_on_a_real_run() {
    if mcq_testdb::postgres().await.is_none() {
        return;
    }
    let mut databases = Vec::new();
    prediction_holds(async || {
        let db = mcq_testdb::postgres()
            .await
            .expect("PostgreSQL, as a moment ago");
        let started = (
            Server::start(&db.url, &["--embedded-workers", "0"]),
            workers(&db.url, 2),
        );
        databases.push(db);
        started
    })
    .await;
}

/// `mcq submit --dry-run` prints the summary (and the server's JSON with
/// `--json`), queues nothing, and refuses prices without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_a_dry_run_and_refuses_prices_without_one() {
    let dir = TempDir::new();
    let url = dir.sqlite_url();
    let server = Server::start(&url, &["--embedded-workers", "1"]);
    let before = stored(&url).await;
    let run = |args: &[&str]| {
        let output = mcq()
            .args(["submit", "--server", &server.base_url])
            .args(args)
            .output()
            .expect("run mcq submit");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&[
        "--count",
        "100",
        "--dry-run",
        "--cost-local",
        "0.04",
        "--cost-cloud",
        "0.05,granularity=1min",
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    for part in [
        "nothing was queued",
        "100 jobs in 100 tasks, 100000000 paths",
        "on the server:",
        "on the fleet:",
        "cost: server",
    ] {
        assert!(out.contains(part), "{part:?} missing from\n{out}");
    }
    let (code, out, err) = run(&[
        "--runs",
        "1e5",
        "--sweep",
        "exercise=25:35:5",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let answer: DryRun = serde_json::from_str(&out).expect("the server's JSON");
    assert_eq!((answer.jobs, answer.paths), (3, 300_000));
    // A bad spec is the server's 422, printed with its pointer.
    let (code, _, err) = run(&["--down", "2", "--dry-run"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/down"), "{err}");
    // Prices need the dry run and each other: clap usage errors.
    for args in [
        &["--cost-local", "0.04", "--cost-cloud", "0.05"][..],
        &["--dry-run", "--cost-local", "0.04"],
        &["--dry-run", "--cost-local", "cheap", "--cost-cloud", "0.05"],
        &["--dry-run", "--wait"],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("error:"), "{args:?}: {err}");
    }
    assert_eq!(
        stored(&url).await,
        before,
        "the CLI's dry runs stored nothing"
    );
}
