//! Completion on SQLite: the transitions of `postgres::complete` in one
//! `BEGIN IMMEDIATE` transaction of a few multi-row statements. The
//! process holds the only writer, so the merge of a finished split job's
//! partials runs inside the transaction with no lock held across a round
//! trip to another process.

use std::collections::{BTreeMap, HashMap};

use sqlx::{Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::tasks::{ROWS_PER_STATEMENT, placeholders, values_table};
use super::{SqliteQueue, now_us, time};
use crate::phases;
use crate::plan;
use crate::store::StoreError;
use crate::types::{TaskDone, TaskOutput};

/// Per job of the accepted tasks.
type PerJob<'a> = BTreeMap<Uuid, Accepted<'a>>;

/// What the accepted tasks of one job bring to it.
#[derive(Debug, Default)]
struct Accepted<'a> {
    /// How many.
    tasks: i64,
    /// Their kernel time.
    compute_ms: f64,
    /// The output of one of them (the job's only task, when it has one).
    output: Option<&'a TaskOutput>,
    /// Their earliest claim, compute start and latest compute finish, in
    /// microseconds (see `crate::phases`).
    claimed_at: Option<i64>,
    compute_started_at: Option<i64>,
    compute_finished_at: Option<i64>,
}

impl<'a> Accepted<'a> {
    /// Counts task `task`, claimed at `claimed_at`, recorded `now`.
    fn add(
        &mut self,
        task: &'a TaskDone,
        claimed_at: Option<i64>,
        now: i64,
    ) -> Result<(), StoreError> {
        self.tasks += 1;
        self.compute_ms += task.compute_ms;
        self.output = Some(&task.output);
        self.claimed_at = earliest(self.claimed_at, claimed_at);
        if let Some(span) = task.compute_span {
            let span = phases::clamp(span, claimed_at.map(time).transpose()?, time(now)?);
            self.compute_started_at = earliest(
                self.compute_started_at,
                Some(span.started_at.timestamp_micros()),
            );
            self.compute_finished_at = self
                .compute_finished_at
                .max(Some(span.finished_at.timestamp_micros()));
        }
        Ok(())
    }
}

/// The earlier of two times, either of which may be unknown.
fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A job whose last task was just accepted: id, task count, kernel time,
/// stored spec, and the output of the task that finished it.
struct Finished<'a> {
    id: Uuid,
    task_count: i64,
    compute_ms: f64,
    spec: String,
    output: Option<&'a TaskOutput>,
}

impl SqliteQueue {
    /// Fenced completion; a job's result is written with its last task.
    /// Returns the refused task ids.
    pub(crate) async fn complete(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
    ) -> Result<Vec<i64>, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let accepted = accept_tasks(&mut tx, &done, now).await?;
        let mut per_job: PerJob = BTreeMap::new();
        for task in &done {
            if let Some(&(job_id, claimed_at)) = accepted.get(&task.task_id) {
                per_job
                    .entry(job_id)
                    .or_default()
                    .add(task, claimed_at, now)?;
            }
        }
        let finished = bump_jobs(&mut tx, worker, &per_job).await?;
        let mut results = Vec::with_capacity(finished.len());
        for job in &finished {
            let result = job_result(&mut tx, job).await?;
            results.push((job.id, plan::result_json(&result)?, result.price));
        }
        record_results(&mut tx, &results, now).await?;
        let jobs_done = results.len() as i64;
        sqlx::query(
            "UPDATE workers SET tasks_done = tasks_done + ?2, jobs_done = jobs_done + ?3
             WHERE id = ?1",
        )
        .bind(worker)
        .bind(accepted.len() as i64)
        .bind(jobs_done)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        if jobs_done > 0 {
            // Batch ids are not at hand here; the nil key counts for all.
            self.announcer.announce(Uuid::nil(), jobs_done as u64);
        }
        Ok(done
            .iter()
            .map(|t| t.task_id)
            .filter(|id| !accepted.contains_key(id))
            .collect())
    }
}

/// The fenced task transitions: each presented task still `running` under
/// its token succeeds, keeping its partial. Returns the accepted tasks'
/// jobs and claim times by task id.
async fn accept_tasks(
    tx: &mut Transaction<'static, Sqlite>,
    done: &[TaskDone],
    now: i64,
) -> Result<HashMap<i64, (Uuid, Option<i64>)>, StoreError> {
    let mut accepted = HashMap::with_capacity(done.len());
    for chunk in done.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "UPDATE tasks SET state = 'succeeded', partial = i.partial, compute_ms = i.ms,
                 finished_at = ?1, lease_token = NULL, lease_expires_at = NULL
             FROM {}
             WHERE tasks.id = i.id AND tasks.lease_token = i.token AND tasks.state = 'running'
             RETURNING tasks.id, tasks.job_id, tasks.claimed_at",
            values_table(2, chunk.len(), &["id", "token", "partial", "ms"])
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now);
        for task in chunk {
            let partial = match &task.output {
                TaskOutput::Partial(p) => Some(plan::partial_json(p)?),
                TaskOutput::Result(_) => None,
            };
            query = query
                .bind(task.task_id)
                .bind(task.lease_token)
                .bind(partial)
                .bind(task.compute_ms);
        }
        for row in query.fetch_all(&mut **tx).await? {
            accepted.insert(
                row.try_get("id")?,
                (row.try_get("job_id")?, row.try_get("claimed_at")?),
            );
        }
    }
    Ok(accepted)
}

/// Bumps each job's task counter and kernel time and widens its phases
/// (the earliest claim and compute start, the latest compute finish, the
/// worker of the latest completion); returns the jobs whose last task this
/// was.
async fn bump_jobs<'a>(
    tx: &mut Transaction<'static, Sqlite>,
    worker: Uuid,
    per_job: &PerJob<'a>,
) -> Result<Vec<Finished<'a>>, StoreError> {
    let per_job: Vec<_> = per_job.iter().collect();
    let mut finished = Vec::new();
    for chunk in per_job.chunks(ROWS_PER_STATEMENT) {
        // SQLite's min() and max() of several arguments are NULL when any
        // is: the coalesces make an unknown side give way to the other.
        let sql = format!(
            "UPDATE jobs SET tasks_done = tasks_done + i.n, compute_ms = compute_ms + i.ms,
                 claimed_at = min(coalesce(claimed_at, i.claimed), coalesce(i.claimed, claimed_at)),
                 compute_started_at = min(coalesce(compute_started_at, i.started),
                                          coalesce(i.started, compute_started_at)),
                 compute_finished_at = max(coalesce(compute_finished_at, i.finished),
                                           coalesce(i.finished, compute_finished_at)),
                 worker_id = ?1
             FROM {}
             WHERE jobs.id = i.id
             RETURNING jobs.id, jobs.task_count, jobs.compute_ms,
                 CASE WHEN jobs.tasks_done >= jobs.task_count THEN jobs.spec END AS spec",
            values_table(
                2,
                chunk.len(),
                &["id", "n", "ms", "claimed", "started", "finished"]
            )
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(worker);
        for (job_id, a) in chunk {
            query = query
                .bind(job_id)
                .bind(a.tasks)
                .bind(a.compute_ms)
                .bind(a.claimed_at)
                .bind(a.compute_started_at)
                .bind(a.compute_finished_at);
        }
        let outputs: HashMap<Uuid, Option<&TaskOutput>> =
            chunk.iter().map(|(id, a)| (**id, a.output)).collect();
        for row in query.fetch_all(&mut **tx).await? {
            let Some(spec) = row.try_get::<Option<String>, _>("spec")? else {
                continue;
            };
            let id: Uuid = row.try_get("id")?;
            finished.push(Finished {
                id,
                task_count: row.try_get("task_count")?,
                compute_ms: row.try_get("compute_ms")?,
                spec,
                output: outputs.get(&id).copied().flatten(),
            });
        }
    }
    Ok(finished)
}

/// A finished job's result: the one its only task brought, that task's
/// partial finished, or the partials of all its tasks merged.
async fn job_result(
    tx: &mut Transaction<'static, Sqlite>,
    job: &Finished<'_>,
) -> Result<mcq_kernel::PriceResult, StoreError> {
    match (job.task_count, job.output) {
        (1, Some(TaskOutput::Result(result))) => Ok(result.clone()),
        (1, Some(TaskOutput::Partial(p))) => {
            Ok(plan::valid_spec(&job.spec)?.finish(p, job.compute_ms))
        }
        _ => {
            let partials: Vec<Option<String>> = sqlx::query_scalar(
                "SELECT partial FROM tasks WHERE job_id = ?1 AND state = 'succeeded'
                 ORDER BY chunk_start",
            )
            .bind(job.id)
            .fetch_all(&mut **tx)
            .await?;
            let partials = partials
                .into_iter()
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| {
                    StoreError::Corrupt("a task of a split job has no partial".into())
                })?;
            plan::finish_from_partials(
                &job.spec,
                partials.iter().map(String::as_str),
                job.compute_ms,
            )
        }
    }
}

/// Inserts the results and sets their jobs `succeeded` (a job that ended
/// already keeps its state).
async fn record_results(
    tx: &mut Transaction<'static, Sqlite>,
    results: &[(Uuid, String, f64)],
    now: i64,
) -> Result<(), StoreError> {
    for chunk in results.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO results (job_id, result, created_at) VALUES {}",
            placeholders(1, chunk.len(), 3)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (job_id, result, _) in chunk {
            query = query.bind(job_id).bind(result).bind(now);
        }
        query.execute(&mut **tx).await?;
        let sql = format!(
            "UPDATE jobs SET state = 'succeeded', finished_at = ?1, price = i.price
             FROM {}
             WHERE jobs.id = i.id AND jobs.state IN ('queued', 'running')",
            values_table(2, chunk.len(), &["id", "price"])
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now);
        for (job_id, _, price) in chunk {
            query = query.bind(job_id).bind(price);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}
