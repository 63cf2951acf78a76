//! Long polls (`?wait=`) against a real server on a real store: a wait
//! answered when the work finishes (a job, a batch, a page of a batch's
//! jobs), a wait that runs out, a wait cut short
//! by shutdown, and bad values refused. The tests play the worker through
//! the store, so they decide exactly when work completes.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use mcq_api::{ApiConfig, AppState};
use mcq_client::{BatchRequest, Client, JobState};
use mcq_kernel::Spec;
use mcq_queue::{QueueConfig, Store, TaskDone, TaskOutput, WorkerInfo};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::harness::TestApp;
use crate::on_both;

/// `mcq_api::serve` on port 0 over the test app's database.
struct Served {
    store: Store,
    client: Client,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
}

impl Served {
    async fn start(t: &TestApp) -> Served {
        let store = Store::connect(&t.url, QueueConfig::default())
            .await
            .expect("connect");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let state = AppState {
            store: store.clone(),
            config: ApiConfig::default(),
        };
        let server = tokio::spawn(mcq_api::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        let client = Client::new(&format!("http://{addr}")).expect("client");
        Served {
            store,
            client,
            stop: Some(stop),
            server,
        }
    }

    /// Claims and completes every runnable task, as a worker would.
    async fn work_everything(&self) {
        let info = WorkerInfo {
            hostname: "long-poll-test".into(),
            pid: std::process::id(),
            concurrency: 1,
        };
        let worker = self.store.register_worker(info).await.expect("register");
        loop {
            let claimed = self.store.claim(worker, 100).await.expect("claim");
            if claimed.is_empty() {
                return;
            }
            let never = AtomicBool::new(false);
            let done = claimed
                .iter()
                .map(|task| {
                    let valid = task.spec.validate().expect("valid spec");
                    let output = match &task.chunks {
                        Some(chunks) => TaskOutput::Partial(
                            valid.run_chunks(chunks.clone(), &never).expect("ran"),
                        ),
                        None => TaskOutput::Result(valid.price(&never).expect("ran")),
                    };
                    TaskDone {
                        task_id: task.task_id,
                        lease_token: task.lease_token,
                        output,
                        compute_ms: 0.1,
                        compute_span: None,
                    }
                })
                .collect();
            let refused = self.store.complete(worker, done).await.expect("complete");
            assert!(refused.is_empty(), "completions refused: {refused:?}");
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.server.await.expect("server task").expect("served");
    }
}

fn small_batch(n: usize) -> BatchRequest {
    let spec = Spec {
        runs: Some(2_000),
        ..Spec::default()
    };
    BatchRequest {
        label: Some("long poll".into()),
        priority: None,
        jobs: vec![spec; n],
        ..BatchRequest::default()
    }
}

/// Lets a spawned poll reach the server and start waiting, then checks
/// that the server holds it.
async fn assert_held<T>(waiting: &JoinHandle<T>, what: &str) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the server must hold {what}");
}

/// Starts `poll`, checks that the server holds it, works every job, and
/// returns what the poll answered.
async fn answered_after_the_work<T: Send + 'static>(
    s: &Served,
    what: &str,
    poll: impl Future<Output = T> + Send + 'static,
) -> T {
    let waiting = tokio::spawn(poll);
    assert_held(&waiting, what).await;
    s.work_everything().await;
    waiting.await.expect("poll task")
}

async fn a_batch_wait_returns_when_the_batch_is_done(t: &TestApp) {
    let s = Served::start(t).await;
    let accepted = s
        .client
        .submit_batch(&small_batch(5), None)
        .await
        .expect("submit");
    let client = s.client.clone();
    let view = answered_after_the_work(&s, "a long poll while the batch is not done", async move {
        client
            .batch_wait(accepted.id, Duration::from_secs(20))
            .await
    })
    .await
    .expect("long poll");
    assert!(
        view.done,
        "answered on completion, not on timeout: {view:?}"
    );
    assert_eq!(view.counts.succeeded, 5);
    assert_eq!(view.stats.expect("stats").count, 5);
    // A done batch answers a long poll at once, like a plain read.
    let again = s
        .client
        .batch_wait(accepted.id, Duration::from_secs(20))
        .await
        .expect("poll");
    assert!(again.done);
    s.stop().await;
}
on_both!(
    batch_wait_returns_on_completion,
    a_batch_wait_returns_when_the_batch_is_done
);

async fn a_job_wait_returns_when_the_job_has_finished(t: &TestApp) {
    let s = Served::start(t).await;
    let spec = Spec {
        runs: Some(2_000),
        ..Spec::default()
    };
    let job = s.client.submit_job(&spec, None).await.expect("submit");
    let client = s.client.clone();
    let view = answered_after_the_work(&s, "a long poll while the job runs", async move {
        client.job_wait(job.id, Duration::from_secs(20)).await
    })
    .await
    .expect("long poll");
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert!(view.result.is_some());
    s.stop().await;
}
on_both!(
    job_wait_returns_on_completion,
    a_job_wait_returns_when_the_job_has_finished
);

async fn a_page_wait_returns_when_its_jobs_have_finished(t: &TestApp) {
    let s = Served::start(t).await;
    let accepted = s
        .client
        .submit_batch(&small_batch(5), None)
        .await
        .expect("submit");
    let client = s.client.clone();
    let id = accepted.id;
    let page = answered_after_the_work(&s, "a page while its jobs run", async move {
        client
            .batch_jobs_wait(id, None, 3, Duration::from_secs(20))
            .await
    })
    .await
    .expect("long poll");
    let ids: Vec<_> = page.jobs.iter().map(|job| job.id).collect();
    assert_eq!(ids, accepted.job_ids[..3], "the first page, in order");
    for job in &page.jobs {
        assert_eq!(job.state, JobState::Succeeded, "{job:?}");
        assert!(job.result.is_some());
    }
    assert_eq!(page.next, Some(accepted.job_ids[2]));
    // The last page, already finished, answers at once.
    let rest = s
        .client
        .batch_jobs_wait(id, page.next, 3, Duration::from_secs(20))
        .await
        .expect("poll");
    assert_eq!(rest.jobs.len(), 2);
    assert_eq!(rest.next, None);
    s.stop().await;
}
on_both!(
    page_wait_returns_on_completion,
    a_page_wait_returns_when_its_jobs_have_finished
);

async fn a_wait_runs_out_with_the_batch_still_running(t: &TestApp) {
    let s = Served::start(t).await;
    let accepted = s
        .client
        .submit_batch(&small_batch(3), None)
        .await
        .expect("submit");
    let asked = Instant::now();
    let view = s
        .client
        .batch_wait(accepted.id, Duration::from_millis(300))
        .await
        .expect("long poll");
    // Nobody works on the batch: the answer comes when the wait is over.
    assert!(!view.done);
    assert_eq!(view.counts.queued, 3);
    assert!(
        asked.elapsed() >= Duration::from_millis(300),
        "answered after {:?}, before the wait was over",
        asked.elapsed()
    );
    let job = accepted.job_ids[0];
    let view = s
        .client
        .job_wait(job, Duration::from_millis(100))
        .await
        .expect("long poll");
    assert_eq!(view.state, JobState::Queued);
    let asked = Instant::now();
    let page = s
        .client
        .batch_jobs_wait(accepted.id, None, 2, Duration::from_millis(200))
        .await
        .expect("long poll");
    assert!(asked.elapsed() >= Duration::from_millis(200));
    assert_eq!(page.jobs.len(), 2);
    assert!(page.jobs.iter().all(|job| job.state == JobState::Queued));
    assert_eq!(page.next, Some(accepted.job_ids[1]));
    s.stop().await;
}
on_both!(wait_times_out, a_wait_runs_out_with_the_batch_still_running);

async fn shutdown_ends_long_polls_at_once(t: &TestApp) {
    let s = Served::start(t).await;
    let accepted = s
        .client
        .submit_batch(&small_batch(2), None)
        .await
        .expect("submit");
    let client = s.client.clone();
    let waiting = tokio::spawn(async move {
        client
            .batch_wait(accepted.id, Duration::from_secs(20))
            .await
    });
    assert_held(&waiting, "a long poll until shutdown").await;
    // The server stops only once the long poll has answered; if it held the
    // poll for its 20 s the test would hang past the wait and fail below.
    s.stop().await;
    let view = waiting
        .await
        .expect("poll task")
        .expect("answered, not dropped");
    assert!(!view.done, "nothing worked on the batch");
}
on_both!(shutdown_ends_long_polls, shutdown_ends_long_polls_at_once);

async fn bad_waits_are_refused_with_a_problem(t: &TestApp) {
    let accepted = t
        .post_json("/v1/batches", &json!({"jobs": [{"runs": 100}]}))
        .await;
    let batch = accepted.body["id"].as_str().expect("batch id").to_owned();
    let job = accepted.body["job_ids"][0]
        .as_str()
        .expect("job id")
        .to_owned();
    for bad in [
        "abc", "-1", "61", "61s", "60001ms", "1e3", "NaN", "inf", "1m", "%20s", "1.2.3", "%2B1",
        "", "%203s",
    ] {
        for path in [
            format!("/v1/batches/{batch}?"),
            format!("/v1/jobs/{job}?"),
            format!("/v1/batches/{batch}/jobs?limit=5&"),
        ] {
            let answer = t.get(&format!("{path}wait={bad}")).await;
            answer.assert_problem(400, "/problems/bad-parameter");
            let detail = answer.body["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("wait"), "{bad}: {detail}");
        }
    }
    // Zero: an ordinary read.
    for none in ["0", "0ms"] {
        let answer = t.get(&format!("/v1/batches/{batch}?wait={none}")).await;
        assert_eq!(answer.status, 200, "{none}: {:#?}", answer.body);
        assert_eq!(answer.body["done"], false);
    }
    // Unknown ids are still 404, whatever the wait.
    let unknown = "00000000-0000-0000-0000-000000000000";
    t.get(&format!("/v1/batches/{unknown}?wait=5s"))
        .await
        .assert_problem(404, "/problems/not-found");
    t.get(&format!("/v1/jobs/{unknown}?wait=5s"))
        .await
        .assert_problem(404, "/problems/not-found");
    t.get(&format!("/v1/batches/{unknown}/jobs?wait=5s"))
        .await
        .assert_problem(404, "/problems/not-found");
}
on_both!(bad_waits_are_refused, bad_waits_are_refused_with_a_problem);
