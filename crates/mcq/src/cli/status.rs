//! `mcq status ID`: a job or a batch, and the tables `submit` and `demo`
//! print too.

use std::time::Duration;

use anyhow::Context as _;
use mcq_client::{BatchView, Client, ClientError, JobView};
use uuid::Uuid;

use super::exit::{Outcome, bad_input};
use super::submit::{batch_outcome, follow_batch, job_outcome};

/// How often a followed job or batch is re-read at least (progress); the
/// server's long poll answers as soon as it has finished, whatever this is.
pub(crate) const FOLLOW_REFRESH: Duration = Duration::from_millis(500);

/// Flags of `mcq status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Job or batch id.
    id: String,
    /// Base URL of the mcq server.
    #[arg(long, env = "MCQ_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// API key (from `mcq keys create`), sent as `Authorization: Bearer`;
    /// a server without keys needs none.
    #[arg(long, env = "MCQ_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Print the server's JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Wait until the job has finished (the batch is done), following it
    /// with long polls, then print it. Exits 1 if a job failed or was
    /// cancelled, as `mcq submit --wait` does.
    #[arg(long)]
    wait: bool,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let id = Uuid::parse_str(args.id.trim())
        .map_err(|_| bad_input(format!("{:?} is not a job or batch id (a UUID)", args.id)))?;
    let client = Client::new(&args.server)?.with_api_key(args.api_key.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Ids are UUIDs for both, so ask for a job first, then a batch.
        match client.job(id).await {
            Ok(job) => {
                let job = if args.wait {
                    client
                        .wait_for_job(id, FOLLOW_REFRESH)
                        .await
                        .context("waiting for the job")?
                } else {
                    job
                };
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&job)?);
                } else {
                    print_job(&job);
                }
                return Ok(if args.wait {
                    job_outcome(&job)
                } else {
                    Outcome::Done
                });
            }
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(err).context("reading the job"),
        }
        match client.batch(id).await {
            Ok(batch) => {
                let batch = if args.wait && !batch.done {
                    let total = usize::try_from(batch.total).unwrap_or(usize::MAX);
                    follow_batch(&client, id, total, !args.json, FOLLOW_REFRESH).await?
                } else {
                    batch
                };
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&batch)?);
                } else {
                    print_batch(&batch);
                }
                Ok(if args.wait {
                    batch_outcome(&batch)
                } else {
                    Outcome::Done
                })
            }
            Err(err) if is_not_found(&err) => Err(bad_input(format!(
                "no job or batch with id {id} on {}",
                args.server
            ))),
            Err(err) => Err(err).context("reading the batch"),
        }
    })
}

fn is_not_found(err: &ClientError) -> bool {
    err.status().is_some_and(|s| s.as_u16() == 404)
}

/// A job as a few aligned lines.
pub(crate) fn print_job(job: &JobView) {
    let state = serde_json::to_value(job.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    println!("job        {}", job.id);
    if let Some(batch) = job.batch_id {
        println!("batch      {batch}");
    }
    println!("state      {state}");
    if let Some(point) = &job.point {
        println!("point      {point}");
    }
    println!("attempts   {}", job.attempts);
    println!(
        "tasks      {} of {} done, {} claim{}",
        job.tasks.done,
        job.tasks.total,
        job.tasks.claims,
        if job.tasks.claims == 1 { "" } else { "s" }
    );
    if let Some(result) = &job.result {
        println!("price      {:.6}", result.price);
        println!("std error  {:.6}", result.std_error);
        println!("95% CI     [{:.6}, {:.6}]", result.ci95[0], result.ci95[1]);
        if let (Some(delta), Some(error)) = (result.delta, result.delta_std_error) {
            println!("delta      {delta:.6} ± {error:.6}");
        }
        println!("paths      {}", result.paths);
        if let Some(seed) = result.seed {
            println!("seed       {seed}");
        }
    }
    if let Some(error) = &job.error {
        println!("error      {error}");
    }
    if let Some(wait) = job.timings.queue_wait_ms {
        println!("queue wait {}", seconds(wait));
    }
    if let Some(compute) = job.timings.compute_ms {
        println!("compute    {}", seconds(compute));
    }
    if let Some(phases) = phases(job) {
        println!("phases     {phases}");
    }
    if let Some(worker) = job.worker_id {
        println!("worker     {worker}");
    }
}

/// Where the time of a succeeded job's work went, when the server
/// recorded every phase: queue wait, claim, compute, record.
fn phases(job: &JobView) -> Option<String> {
    let t = &job.timings;
    let (claimed, started, finished, recorded) = (
        t.claimed_at?,
        t.compute_started_at?,
        t.compute_finished_at?,
        t.recorded_at?,
    );
    let [wait, claim, compute, record] = [
        (t.queued_at, claimed),
        (claimed, started),
        (started, finished),
        (finished, recorded),
    ]
    .map(|(from, to)| {
        (to - from)
            .num_microseconds()
            .map_or(f64::NAN, |us| us as f64 / 1e3)
    });
    // In milliseconds: a claim or a record takes well under one.
    Some(format!(
        "queue wait {wait:.3} ms · claim {claim:.3} ms · compute {compute:.3} ms · record {record:.3} ms"
    ))
}

/// A batch: counts, then the summary table of the original spreadsheet.
pub(crate) fn print_batch(batch: &BatchView) {
    let c = &batch.counts;
    println!(
        "batch {}{}",
        batch.id,
        batch
            .label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    );
    println!(
        "{} jobs: {} succeeded, {} failed, {} cancelled, {} running, {} queued{}",
        batch.total,
        c.succeeded,
        c.failed,
        c.cancelled,
        c.running,
        c.queued,
        if batch.done { " — done" } else { "" }
    );
    println!();
    let rows: Vec<(&str, String)> = match &batch.stats {
        Some(s) => vec![
            ("count", s.count.to_string()),
            ("mean", format!("{:.6}", s.mean)),
            ("min", format!("{:.6}", s.min)),
            ("max", format!("{:.6}", s.max)),
            ("stddev", format!("{:.6}", s.stddev)),
            ("std error", format!("{:.6}", s.std_error)),
        ],
        None => vec![("count", "0".into())],
    };
    let t = &batch.timings;
    let timing = [
        (
            "makespan",
            t.makespan_ms.map_or_else(|| "-".into(), seconds),
        ),
        ("compute total", seconds(t.compute_ms_total)),
    ];
    for (name, value) in rows.iter().map(|(n, v)| (*n, v.clone())).chain(timing) {
        println!("  {name:<14}{value:>16}");
    }
}

/// Milliseconds in seconds, the one unit of every duration mcq prints in
/// a table, so that a column never mixes `ms` and `s`.
pub(crate) fn seconds(ms: f64) -> String {
    format!("{:.3} s", ms / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn durations_share_one_unit() {
        assert_eq!(seconds(9868.1), "9.868 s");
        assert_eq!(seconds(18_630.0), "18.630 s");
        assert_eq!(seconds(2.0), "0.002 s");
    }
}
