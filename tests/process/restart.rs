//! A PostgreSQL restart in the middle of a batch: workers log, back off,
//! reconnect, and the batch completes with the right results.

use std::time::Duration;

use mcq_tests::{McqProcess, TempDir};

use crate::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "intermittent (failed in 3 runs in a row on 2026-11-30 after passing 4, both .ci/run runs among them): \
            after the restart a worker keeps renewing the leases of two tasks (attempt 1) that it \
            never completes, so the batch never finishes. Cause not found yet; suspects: commits \
            lost to the test cluster's synchronous_commit=off, and the worker's held-task map \
            being keyed by task id rather than (id, token)"]
async fn workers_survive_a_database_restart() -> anyhow::Result<()> {
    let cluster = match mcq_testdb::PgCluster::private() {
        Ok(cluster) => cluster,
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("PostgreSQL is required under CI: {err:#}")
        }
        Err(err) => {
            eprintln!(
                "SKIPPING workers_survive_a_database_restart: no private PostgreSQL cluster: {err:#}"
            );
            return Ok(());
        }
    };
    let url = cluster.create_database("mcq_restart")?;
    let logs = TempDir::new("mcq-process-restart")?;
    let store = batch::store(&url, 16).await?;
    let specs: Vec<_> = (0..40).map(|i| batch::spec(16, 5000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;

    let args = ["--concurrency", "1", "--lease", "5", "--heartbeat", "0.5"];
    let mut workers = vec![
        McqProcess::worker("worker0", &url, &args, logs.path())?,
        McqProcess::worker("worker1", &url, &args, logs.path())?,
    ];
    let refs: Vec<&McqProcess> = workers.iter().collect();
    batch::wait_until(
        &store,
        batch_id,
        Duration::from_secs(60),
        &refs,
        "a few jobs to finish",
        |v| v.counts.succeeded >= 4,
    )
    .await?;

    cluster.stop()?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for worker in &mut workers {
        assert!(
            worker.try_status()?.is_none(),
            "a worker died with the database\n{}",
            worker.logs()
        );
    }
    cluster.start()?;

    let refs: Vec<&McqProcess> = workers.iter().collect();
    batch::finish_and_check(&store, batch_id, &refs, &specs).await?;

    for worker in &mut workers {
        assert!(
            worker.try_status()?.is_none(),
            "workers are still running\n{}",
            worker.logs()
        );
        worker.terminate()?;
        let status = worker.wait_timeout(Duration::from_secs(30))?;
        assert!(
            status.success(),
            "clean exit after the outage: {status:?}\n{}",
            worker.logs()
        );
    }
    Ok(())
}
