//! Several worker processes share one batch: every job succeeds once, with
//! the in-process result to the bit, however its tasks were spread.

use mcq_api_types::JobState;
use mcq_tests::{McqProcess, TempDir};

use super::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_workers_compute_a_batch_exactly_like_one_process() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-fleet")?;
    // Two chunks per task: the larger jobs split into several tasks, which
    // different workers compute and the store merges.
    let store = batch::store(&db.url, 2).await?;
    let mut specs: Vec<_> = (0..24).map(|i| batch::spec(1, 1000 + i)).collect();
    specs.extend((0..4).map(|i| batch::spec(9, 2000 + i)));
    // Split jobs asking for delta: its sums merge across workers too.
    specs.extend((0..2).map(|i| mcq_kernel::Spec {
        greeks: vec![mcq_kernel::Greek::Delta],
        ..batch::spec(5, 3000 + i)
    }));
    // A tiny job below one chunk, and an exact one (a whole-job task).
    specs.push(mcq_kernel::Spec {
        runs: Some(1000),
        seed: Some(7),
        ..mcq_kernel::Spec::default()
    });
    specs.push(mcq_kernel::Spec {
        method: mcq_kernel::Method::Exact,
        runs: None,
        ..mcq_kernel::Spec::default()
    });
    let batch_id = batch::submit(&store, specs.clone()).await?;

    let workers: Vec<McqProcess> = (0..3)
        .map(|i| {
            McqProcess::worker(
                &format!("worker{i}"),
                &db.url,
                &["--concurrency", "2"],
                logs.path(),
            )
        })
        .collect::<anyhow::Result<_>>()?;
    let refs: Vec<&McqProcess> = workers.iter().collect();
    let jobs = batch::finish_and_check(&store, batch_id, &refs, &specs).await?;
    // A job's tasks were each claimed once: more claims than tasks would
    // mean a task ran twice although no worker died.
    for job in &jobs {
        assert_eq!(job.state, JobState::Succeeded);
        let chunks = job
            .spec
            .runs
            .map_or(1, |r| r.div_ceil(mcq_kernel::CHUNK_PATHS));
        let tasks = if job.spec.method == mcq_kernel::Method::Exact {
            1
        } else {
            chunks.div_ceil(2)
        };
        assert_eq!(
            (u64::from(job.tasks.total), u64::from(job.tasks.claims)),
            (tasks, tasks),
            "job {} was claimed {} times for {tasks} tasks",
            job.id,
            job.tasks.claims
        );
        assert_eq!(job.attempts, 1, "job {} was retried", job.id);
    }
    // Every worker is still up and listed, and once each has marked itself
    // idle (or sent a heartbeat) its counters hold every task it completed.
    let expected_tasks: u64 = jobs.iter().map(|j| u64::from(j.tasks.claims)).sum();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let listed = store.workers().await?;
        assert_eq!(
            listed.len(),
            workers.len(),
            "all workers registered: {listed:?}"
        );
        let done: u64 = listed.iter().map(|w| w.tasks_done).sum();
        assert!(
            done <= expected_tasks,
            "the workers counted {done} tasks of {expected_tasks}: {listed:?}"
        );
        if done == expected_tasks {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the workers' task counters add up to {done}, not {expected_tasks}: {listed:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A fault-free batch loses no lease, so no worker may say it did. The
/// heartbeat here runs every 10 ms, far more often than the default, so
/// that many of them read a task between the commit of its completion and
/// the moment the worker reads that call's answer: a heartbeat there finds
/// the lease gone, and must not take it for a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_free_batch_reports_no_lost_lease() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-true-warnings")?;
    // Split jobs of four one-chunk tasks, and single-task jobs: both kinds
    // of completion, each finishing in a millisecond or two.
    let store = batch::store(&db.url, 1).await?;
    let mut specs: Vec<_> = (0..40).map(|i| batch::spec(4, 6000 + i)).collect();
    specs.extend((0..40).map(|i| batch::spec(1, 7000 + i)));
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let args = [
        "--concurrency",
        "2",
        "--heartbeat",
        "0.01",
        "--complete-wait-ms",
        "0",
    ];
    let mut workers: Vec<McqProcess> = (0..2)
        .map(|i| McqProcess::worker(&format!("worker{i}"), &db.url, &args, logs.path()))
        .collect::<anyhow::Result<_>>()?;
    let refs: Vec<&McqProcess> = workers.iter().collect();
    batch::finish_and_check(&store, batch_id, &refs, &specs).await?;
    for worker in &mut workers {
        worker.terminate()?;
        let status = worker.wait_timeout(std::time::Duration::from_secs(60))?;
        assert!(status.success(), "{status:?}\n{}", worker.logs());
        let log = worker.log_text();
        for false_alarm in ["lease lost", "completion refused"] {
            assert!(
                !log.contains(false_alarm),
                "a worker reported {false_alarm:?} in a fault-free run\n{}",
                worker.logs()
            );
        }
        assert!(
            log.contains(" refused=0 "),
            "the exit report counts no refusal\n{}",
            worker.logs()
        );
    }
    Ok(())
}
