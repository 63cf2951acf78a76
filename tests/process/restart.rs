//! A PostgreSQL restart in the middle of a batch: workers log, back off,
//! reconnect, and the batch completes with the right results.
//!
//! The server is stopped as a crash would (`-m immediate`) and the test
//! cluster runs with `synchronous_commit=off`, so the last commits before
//! the crash can be forgotten: claims and completions a worker saw
//! acknowledged come back undone. Fencing tokens make that safe, and this
//! test is where it is exercised.

use std::time::Duration;

use mcq_tests::{McqProcess, TempDir};

use super::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    let mut workers = McqProcess::workers(2, &url, &args, logs.path())?;
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
    if let Err(err) = batch::finish_and_check(&store, batch_id, &refs, &specs).await {
        // The database's side of a hang: which tasks are stuck, in what state.
        return Err(err.context(unfinished_tasks(&url).await));
    }

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

/// The batch's unfinished tasks as the database sees them, for a failure
/// message.
async fn unfinished_tasks(url: &str) -> String {
    let rows = async {
        let pool = sqlx::PgPool::connect(url).await?;
        sqlx::query_as::<_, (i64, String, i32, Option<f64>, Option<String>)>(
            "SELECT id, state, attempt,
                    extract(epoch FROM lease_expires_at - now())::float8,
                    worker_id::text
             FROM tasks WHERE state NOT IN ('succeeded', 'cancelled') ORDER BY id",
        )
        .fetch_all(&pool)
        .await
    }
    .await;
    match rows {
        Ok(rows) => {
            format!("unfinished tasks (id, state, attempt, lease seconds left, worker): {rows:?}")
        }
        Err(err) => format!("could not read the unfinished tasks: {err}"),
    }
}
