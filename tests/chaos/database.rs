//! PostgreSQL restarted under the API and two workers while batches run:
//! `pg_ctl restart -m fast`, `-m immediate`, then stopped for 15 s and
//! started again. While it is down the API answers 503 problem+json
//! within a second or two, not a hang; afterwards everything recovers by itself, and each batch ends
//! exactly once with the local results.

use std::time::{Duration, Instant};

use mcq_testdb::Shutdown;
use mcq_tests::{McqProcess, TempDir};

use super::{api, outcome};
use crate::process::batch;

/// How long the server stays stopped in the last fault.
const DOWN: Duration = Duration::from_secs(15);
/// Generous bounds: the API answering again, and a batch finishing, after
/// the server is back.
const API_BOUND: Duration = Duration::from_secs(30);
/// An answer while the server is down must come within this: the store
/// gives up on a server it cannot reach after `unreachable_after` (0.9 s),
/// and a loaded machine adds to that; the times seen are printed. The
/// bound itself is checked without a clock by mcq-api's outage tests.
const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// The faults, in order.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Restart(Shutdown),
    StopFor(Duration),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_rides_out_database_restarts_and_an_outage() -> anyhow::Result<()> {
    let Some(cluster) = outcome::private_cluster("the_service_rides_out_database_restarts") else {
        return Ok(());
    };
    let url = cluster.create_database("mcq_chaos")?;
    let logs = TempDir::new("mcq-chaos-database")?;
    let store = batch::store(&url, 8).await?;
    let (server, base) =
        McqProcess::server("server", &url, &["--embedded-workers", "0"], logs.path())?;
    let args = ["--concurrency", "1", "--lease", "5", "--heartbeat", "0.5"];
    let workers = McqProcess::workers(2, &url, &args, logs.path())?;
    let client = reqwest::Client::new();

    let faults = [
        Fault::Restart(Shutdown::Fast),
        Fault::Restart(Shutdown::Immediate),
        Fault::StopFor(DOWN),
    ];
    let mut in_db = 0;
    for (round, fault) in faults.into_iter().enumerate() {
        let seed = 20_000 + 100 * u64::try_from(round)?;
        let specs: Vec<_> = (0..40).map(|i| batch::spec(16, seed + i)).collect();
        in_db += specs.len();
        let batch_id = batch::submit(&store, specs.clone()).await?;
        let batch_url = format!("{base}/v1/batches/{batch_id}");
        let mut everyone: Vec<&McqProcess> = workers.iter().collect();
        everyone.push(&server);
        batch::wait_until(
            &store,
            batch_id,
            Duration::from_secs(60),
            &everyone,
            "a few jobs to finish before the fault",
            |v| v.counts.succeeded >= 3,
        )
        .await?;

        let faulted = Instant::now();
        let mut answers_down = Vec::new();
        match fault {
            Fault::Restart(mode) => cluster.restart(mode)?,
            Fault::StopFor(down) => {
                cluster.stop_with(Shutdown::Fast)?;
                while faulted.elapsed() < down {
                    let answer = api::get(&client, &batch_url).await;
                    api::assert_unavailable(&answer, &server);
                    assert!(
                        answer.took < ANSWER_BOUND,
                        "an answer while the database is down took {:?}",
                        answer.took
                    );
                    answers_down.push(answer.took);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                cluster.start()?;
            }
        }
        let back = Instant::now();
        let api_back = api::until_ok(&client, &batch_url, API_BOUND, &server).await?;
        outcome::assert_exactly_once(&url, &store, batch_id, &specs, in_db, &everyone).await?;
        let slowest = answers_down.iter().max().copied().unwrap_or_default();
        eprintln!(
            "chaos database {fault:?}: fault took {:.2} s, API answered 200 {:.2} s after, \
             batch done {:.1} s after; while down {} answers, all 503, slowest {:.3} s",
            (back - faulted).as_secs_f64(),
            api_back.as_secs_f64(),
            back.elapsed().as_secs_f64(),
            answers_down.len(),
            slowest.as_secs_f64(),
        );
    }
    for worker in &workers {
        assert!(
            worker.log_text().contains("database reachable again")
                || worker.log_text().contains("heartbeat succeeded again"),
            "the worker saw the outage and came back\n{}",
            worker.logs()
        );
    }
    Ok(())
}
