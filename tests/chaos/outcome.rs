//! The outcome every chaos scenario must reach, and the clusters the
//! scenarios that stop PostgreSQL run on.

use std::process::Command;

use anyhow::{Context as _, bail};
use mcq_api_types::JobView;
use mcq_kernel::Spec;
use mcq_queue::Store;
use mcq_tests::McqProcess;
use uuid::Uuid;

use crate::process::batch;

/// Waits for the batch to finish and asserts the suite's invariants:
///
/// - the batch holds exactly `specs.len()` jobs (no partial batch), all
///   succeeded, each with the in-process kernel's result bit for bit;
/// - the database holds exactly one result per job and `jobs_in_db` jobs
///   in all (the scenario's database holds nothing else), and no task is
///   left queued or running;
/// - the first and last jobs equal what `mcq price` prints for the same
///   spec, so the oracle is the command users run, not only the library.
pub(crate) async fn assert_exactly_once(
    url: &str,
    store: &Store,
    batch_id: Uuid,
    specs: &[Spec],
    jobs_in_db: usize,
    processes: &[&McqProcess],
) -> anyhow::Result<()> {
    let jobs = assert_batch(store, batch_id, specs, processes).await?;
    assert_database(url, jobs_in_db).await?;
    for (job, spec) in [jobs.first(), jobs.last()]
        .into_iter()
        .flatten()
        .zip([specs.first(), specs.last()].into_iter().flatten())
    {
        assert_same_as_mcq_price(job, spec)?;
    }
    Ok(())
}

/// [`assert_exactly_once`] for a database holding `batches` and nothing
/// else: each batch is checked job by job, the database as a whole once,
/// and `mcq price` is asked about the very first and very last job, so the
/// check grows with the jobs rather than with jobs times batches.
pub(crate) async fn assert_all_exactly_once(
    url: &str,
    store: &Store,
    batches: &[(Uuid, Vec<Spec>)],
    processes: &[&McqProcess],
) -> anyhow::Result<()> {
    let mut ends = Vec::new();
    for (i, (id, specs)) in batches.iter().enumerate() {
        let jobs = assert_batch(store, *id, specs, processes).await?;
        if i == 0 {
            ends.extend(jobs.first().cloned().zip(specs.first().cloned()));
        }
        if i + 1 == batches.len() {
            ends.extend(jobs.last().cloned().zip(specs.last().cloned()));
        }
    }
    assert_database(url, batches.iter().map(|(_, specs)| specs.len()).sum()).await?;
    for (job, spec) in &ends {
        assert_same_as_mcq_price(job, spec)?;
    }
    Ok(())
}

/// Waits for one batch to finish whole, each job with the in-process
/// result, and returns its jobs.
async fn assert_batch(
    store: &Store,
    batch_id: Uuid,
    specs: &[Spec],
    processes: &[&McqProcess],
) -> anyhow::Result<Vec<JobView>> {
    let jobs = batch::finish_and_check(store, batch_id, processes, specs).await?;
    let view = batch::view(store, batch_id).await?;
    assert_eq!(
        view.total,
        specs.len() as u64,
        "the batch holds every submitted job"
    );
    Ok(jobs)
}

/// One result per job, `jobs_in_db` jobs in all, all succeeded, and no
/// task left queued or running.
async fn assert_database(url: &str, jobs_in_db: usize) -> anyhow::Result<()> {
    let expected = i64::try_from(jobs_in_db)?;
    for (what, sql) in [
        ("jobs", "SELECT count(*) FROM jobs"),
        ("results", "SELECT count(*) FROM results"),
        (
            "succeeded jobs",
            "SELECT count(*) FROM jobs WHERE state = 'succeeded'",
        ),
    ] {
        let n = mcq_testdb::query_i64(url, sql).await?;
        assert_eq!(n, expected, "{what} in the database");
    }
    let unfinished = mcq_testdb::query_i64(
        url,
        "SELECT count(*) FROM tasks WHERE state IN ('queued', 'running')",
    )
    .await?;
    assert_eq!(unfinished, 0, "tasks left queued or running");
    Ok(())
}

/// A job's price equals, bit for bit, what `mcq price` prints for its spec.
fn assert_same_as_mcq_price(job: &JobView, spec: &Spec) -> anyhow::Result<()> {
    let printed = mcq_price(spec)?;
    let got = job
        .result
        .as_ref()
        .context("a succeeded job has a result")?;
    assert_eq!(
        got.price.to_bits(),
        printed.to_bits(),
        "job {} against `mcq price`: {} vs {printed}",
        job.id,
        got.price
    );
    Ok(())
}

/// The price `mcq price --json` prints for a spec of runs and a seed (the
/// specs of [`batch::spec`]).
fn mcq_price(spec: &Spec) -> anyhow::Result<f64> {
    let (runs, seed) = (
        spec.runs.context("a spec with runs")?,
        spec.seed.context("a spec with a seed")?,
    );
    let out = Command::new(mcq_tests::mcq_bin())
        .args(["price", "--json", "--runs", &runs.to_string()])
        .args(["--seed", &seed.to_string()])
        .output()
        .context("running mcq price")?;
    if !out.status.success() {
        bail!("mcq price failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let printed: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("mcq price --json prints JSON")?;
    printed["price"]
        .as_f64()
        .context("mcq price --json prints a price")
}

/// A private PostgreSQL cluster for a scenario that stops or restarts the
/// server; `None` (after saying so) where none can be started, except
/// under `CI=true`, where that fails the test.
pub(crate) fn private_cluster(test: &str) -> Option<mcq_testdb::PgCluster> {
    match mcq_testdb::PgCluster::private() {
        Ok(cluster) => Some(cluster),
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("PostgreSQL is required under CI: {err:#}")
        }
        Err(err) => {
            eprintln!("SKIPPING {test}: no private PostgreSQL cluster: {err:#}");
            None
        }
    }
}
