//! What clients and dashboards read: jobs, batches (one query each) and
//! the worker list. Jobs of a staged batch are read from
//! their staged rows until a claim materialises them.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::Row as _;
use sqlx::postgres::{PgArguments, PgRow, Postgres};
use sqlx::query::Query;
use uuid::Uuid;

use super::PgQueue;
use crate::access::Scope;
use crate::phases::Phases;
use crate::plan;
use crate::store::StoreError;
use crate::types::{
    BatchGrid, BatchTimings, BatchView, JobState, JobTimings, JobView, PriceStats, StateCounts,
};

/// Columns of a job view, for [`JOB_FROM`]: the job, its result, its
/// batch's sweep (which names its grid point) and the attempt numbers of
/// its task rows.
const JOB_COLUMNS: &str =
    "j.id, j.batch_id, j.state, j.spec::text AS spec, r.result::text AS result, j.error,
    j.attempts, j.tasks_done, j.compute_ms, j.submitted_at, j.started_at, j.finished_at,
    j.position, j.task_count, (SELECT b.sweep FROM batches b WHERE b.id = j.batch_id) AS sweep,
    ta.max_attempt, ta.sum_attempts, j.claimed_at, j.compute_started_at, j.compute_finished_at,
    j.worker_id";

/// The tables behind [`JOB_COLUMNS`].
const JOB_FROM: &str = "jobs j LEFT JOIN results r ON r.job_id = j.id
    CROSS JOIN LATERAL (SELECT coalesce(max(t.attempt), 0)::int8 AS max_attempt,
                               coalesce(sum(t.attempt), 0)::int8 AS sum_attempts
                        FROM tasks t WHERE t.job_id = j.id) ta";

/// The same columns for jobs still staged: queued, never
/// started, from `staged st` and `unnest(st.ids, st.specs) … u(id, spec, o)`.
/// Reads that may meet staged jobs take both kinds in one statement, so a
/// claim materialising a job between two reads cannot hide it.
const STAGED_COLUMNS: &str = "u.id, st.batch_id, 'queued'::text, u.spec, NULL::text, NULL::text,
    0, 0, 0::float8, st.submitted_at, NULL::timestamptz, NULL::timestamptz,
    st.first + u.o::integer - 1, 1, (SELECT b.sweep FROM batches b WHERE b.id = st.batch_id),
    0::int8, 0::int8, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::uuid";

/// Staged jobs with their position, for `WHERE` clauses to narrow.
const STAGED_FROM: &str = "staged st, unnest(st.ids, st.specs) WITH ORDINALITY AS u(id, spec, o)";

/// A batch's counts, price statistics and timings in one pass over its
/// jobs, for `WHERE` clauses on `b` to narrow. `stddev_samp` is
/// PostgreSQL's numerically stable (Youngs–Cramer) one.
pub(super) const BATCH_SELECT: &str = "
SELECT b.id, b.label, b.total, b.submitted_at, b.sweep, s.*
FROM batches b, LATERAL (
    SELECT count(*) FILTER (WHERE state = 'queued')
             + (SELECT coalesce(sum(cardinality(st.ids) - st.next), 0)
                FROM staged st WHERE st.batch_id = b.id) AS queued,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'failed') AS failed,
           count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
           count(price) AS priced, avg(price) AS mean, min(price) AS min_price,
           max(price) AS max_price, stddev_samp(price) AS stddev,
           min(started_at) AS first_started_at, max(finished_at) AS last_finished_at,
           coalesce(sum(compute_ms), 0) AS compute_ms_total
    FROM jobs WHERE batch_id = b.id
) s";

/// One job by id within a tenant ($2, NULL for all), materialised or staged.
fn job_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {JOB_COLUMNS} FROM {JOB_FROM}
             WHERE j.id = $1 AND ($2::int IS NULL OR j.tenant_id = $2)
             UNION ALL
             SELECT {STAGED_COLUMNS} FROM {STAGED_FROM}
             WHERE st.min_id <= $1 AND st.max_id >= $1 AND u.id = $1 AND u.o > st.next
               AND ($2::int IS NULL OR st.tenant_id = $2)
             LIMIT 1"
        )
    });
    &SQL
}

/// One batch by id within a tenant ($2, NULL for all).
fn batch_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("{BATCH_SELECT} WHERE b.id = $1 AND ($2::int IS NULL OR b.tenant_id = $2)")
    });
    &SQL
}

/// A read by id of a job or a batch, as sent on every connection: the
/// statement cache of a connection is keyed by the text, which is built
/// once per process.
fn by_id(sql: &'static str, id: Uuid, scope: Scope) -> Query<'static, Postgres, PgArguments> {
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(scope.tenant())
}

impl PgQueue {
    /// One job and its result.
    pub(crate) async fn job(&self, id: Uuid, scope: Scope) -> Result<Option<JobView>, StoreError> {
        let row = by_id(job_sql(), id, scope)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.as_ref().map(|row| job_view(row, None)).transpose()
    }

    /// Counts, statistics and timings of a batch.
    pub(crate) async fn batch(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<BatchView>, StoreError> {
        let row = by_id(batch_sql(), id, scope)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.as_ref().map(batch_view).transpose()
    }

    /// Sends the reads of a job and of a batch, for an id no row has, on
    /// each connection the pool keeps open (`pool_min`), held together so
    /// that each is a connection of its own. A backend's first statement on
    /// these tables loads their catalog entries and the statement is
    /// prepared: milliseconds, which the first long polls of a server
    /// would otherwise pay, one per connection, on top of their result.
    pub(crate) async fn warm_reads(&self) -> Result<(), StoreError> {
        let mut held = Vec::new();
        let reserve = self.config.pool_min.min(self.config.pool_size);
        super::hold_reserve(&self.pool, reserve, &mut held).await?;
        for conn in &mut held {
            by_id(job_sql(), Uuid::nil(), Scope::All)
                .fetch_optional(&mut **conn)
                .await?;
            by_id(batch_sql(), Uuid::nil(), Scope::All)
                .fetch_optional(&mut **conn)
                .await?;
        }
        Ok(())
    }

    /// A page of a batch's jobs after the job `after`, in submission order.
    pub(crate) async fn batch_jobs(
        &self,
        id: Uuid,
        scope: Scope,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Option<Vec<JobView>>, StoreError> {
        // Every job of a batch has the batch's tenant, so filtering the jobs
        // by tenant hides another tenant's batch whole.
        // Materialised and staged jobs after the cursor's position. A
        // batch's positions are 0, 1, … with no gaps, so the page lies
        // within `limit` positions of the cursor: only the staged rows that
        // start there are expanded.
        let sql = format!(
            "WITH cursor AS (
                 SELECT CASE WHEN $2::uuid IS NULL THEN -1 ELSE coalesce(
                     (SELECT position FROM jobs WHERE id = $2 AND batch_id = $1),
                     (SELECT st.first + u.o::integer - 1
                      FROM staged st, unnest(st.ids) WITH ORDINALITY AS u(id, o)
                      WHERE st.batch_id = $1 AND u.id = $2)) END AS after
             )
             SELECT * FROM (
                 SELECT {JOB_COLUMNS} FROM {JOB_FROM}
                 WHERE j.batch_id = $1 AND j.position > (SELECT after FROM cursor)
                   AND ($4::int IS NULL OR j.tenant_id = $4)
                 UNION ALL
                 SELECT {STAGED_COLUMNS} FROM {STAGED_FROM}
                 WHERE st.batch_id = $1 AND u.o > st.next
                   AND ($4::int IS NULL OR st.tenant_id = $4)
                   AND st.first + cardinality(st.ids) - 1 > (SELECT after FROM cursor)
                   AND st.first <= (SELECT after FROM cursor) + $3
                   AND st.first + u.o::integer - 1 > (SELECT after FROM cursor)
             ) page ORDER BY position LIMIT $3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(after)
            .bind(i64::from(limit))
            .bind(scope.tenant())
            .fetch_all(&mut *self.conn().await?)
            .await?;
        if rows.is_empty() {
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM batches
                                WHERE id = $1 AND ($2::int IS NULL OR tenant_id = $2))",
            )
            .bind(id)
            .bind(scope.tenant())
            .fetch_one(&mut *self.conn().await?)
            .await?;
            if !exists {
                return Ok(None);
            }
        }
        // Every row carries its batch's sweep: parse it once.
        let grid = match rows.first() {
            Some(row) => plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?,
            None => None,
        };
        rows.iter()
            .map(|row| job_view(row, Some(grid.as_ref())))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A batch view from a row of [`BATCH_SELECT`].
pub(super) fn batch_view(row: &PgRow) -> Result<BatchView, StoreError> {
    let count = |name: &str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    let counts = StateCounts {
        queued: count("queued")?,
        running: count("running")?,
        succeeded: count("succeeded")?,
        failed: count("failed")?,
        cancelled: count("cancelled")?,
    };
    let priced = count("priced")?;
    let stats = if priced == 0 {
        None
    } else {
        let stddev: f64 = row.try_get::<Option<f64>, _>("stddev")?.unwrap_or(0.0);
        Some(PriceStats {
            count: priced,
            mean: row.try_get::<Option<f64>, _>("mean")?.unwrap_or(0.0),
            min: row.try_get::<Option<f64>, _>("min_price")?.unwrap_or(0.0),
            max: row.try_get::<Option<f64>, _>("max_price")?.unwrap_or(0.0),
            stddev,
            std_error: stddev / (priced as f64).sqrt(),
        })
    };
    let done = counts.queued == 0 && counts.running == 0;
    let grid = plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?;
    let submitted_at: DateTime<Utc> = row.try_get("submitted_at")?;
    let last_finished_at: Option<DateTime<Utc>> = row.try_get("last_finished_at")?;
    Ok(BatchView {
        id: row.try_get("id")?,
        label: row.try_get("label")?,
        total: u64::try_from(row.try_get::<i64, _>("total")?).unwrap_or(0),
        counts,
        done,
        stats,
        timings: BatchTimings {
            submitted_at,
            first_started_at: row.try_get("first_started_at")?,
            last_finished_at,
            makespan_ms: last_finished_at
                .filter(|_| done)
                .map(|t| ms_between(submitted_at, t)),
            compute_ms_total: row.try_get("compute_ms_total")?,
        },
        repeat: grid.as_ref().map(|g| g.repeat),
        sweep: grid.map(|g| g.sweep),
    })
}

/// A job view from a row of [`JOB_COLUMNS`]; `grid` is its batch's sweep
/// when the caller parsed it already.
fn job_view(row: &PgRow, grid: Option<Option<&BatchGrid>>) -> Result<JobView, StoreError> {
    let parsed;
    let grid = match grid {
        Some(grid) => grid,
        None => {
            parsed = plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?;
            parsed.as_ref()
        }
    };
    let position = u64::try_from(row.try_get::<i32, _>("position")?).unwrap_or(0);
    let (attempts, tasks) = plan::task_counts(
        i64::from(row.try_get::<i32, _>("task_count")?),
        i64::from(row.try_get::<i32, _>("tasks_done")?),
        i64::from(row.try_get::<i32, _>("attempts")?),
        row.try_get("max_attempt")?,
        row.try_get("sum_attempts")?,
    );
    let submitted_at: DateTime<Utc> = row.try_get("submitted_at")?;
    let started_at: Option<DateTime<Utc>> = row.try_get("started_at")?;
    let tasks_done: i32 = row.try_get("tasks_done")?;
    let result: Option<String> = row.try_get("result")?;
    let state = plan::parse_state(row.try_get("state")?)?;
    let finished_at: Option<DateTime<Utc>> = row.try_get("finished_at")?;
    let phases = Phases {
        claimed_at: row.try_get("claimed_at")?,
        compute_started_at: row.try_get("compute_started_at")?,
        compute_finished_at: row.try_get("compute_finished_at")?,
        worker_id: row.try_get("worker_id")?,
    }
    .of_state(state);
    Ok(JobView {
        id: row.try_get("id")?,
        batch_id: row.try_get("batch_id")?,
        state,
        spec: plan::parse_spec(row.try_get("spec")?)?,
        result: result.as_deref().map(plan::parse_result).transpose()?,
        error: row.try_get("error")?,
        point: grid.map(|g| g.point_at(position)),
        attempts,
        tasks,
        worker_id: phases.worker_id,
        timings: JobTimings {
            submitted_at,
            started_at,
            finished_at,
            queue_wait_ms: started_at.map(|s| ms_between(submitted_at, s)),
            compute_ms: (tasks_done > 0)
                .then(|| row.try_get("compute_ms"))
                .transpose()?,
            queued_at: submitted_at,
            claimed_at: phases.claimed_at,
            compute_started_at: phases.compute_started_at,
            compute_finished_at: phases.compute_finished_at,
            recorded_at: finished_at.filter(|_| state == JobState::Succeeded),
        },
    })
}

/// Milliseconds from `a` to `b`, with the microseconds PostgreSQL keeps.
pub(super) fn ms_between(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a)
        .num_microseconds()
        .map_or(f64::NAN, |us| us as f64 / 1e3)
}

/// PostgreSQL only: the reads a server prepares before its first request.
#[cfg(test)]
mod on_postgres {
    use super::{batch_sql, job_sql};
    use crate::postgres::migrated;
    use crate::store::QueueConfig;

    /// Whether each read's statement is prepared on `conn`.
    async fn prepared(conn: &mut sqlx::PgConnection) -> (bool, bool) {
        let has = |sql: &'static str| {
            sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE statement = $1)",
            )
            .bind(sql)
        };
        let job = has(job_sql()).fetch_one(&mut *conn).await.expect("job");
        let batch = has(batch_sql()).fetch_one(&mut *conn).await.expect("batch");
        (job, batch)
    }

    /// Every connection the store keeps open, each a backend of its own,
    /// has both reads prepared after `warm_reads`, and none before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn warm_reads_prepare_both_reads_on_every_kept_connection() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let config = QueueConfig {
            pool_size: 3,
            pool_min: 3,
            ..QueueConfig::default()
        };
        let q = migrated(&db.url, config).await;
        for warmed in [false, true] {
            if warmed {
                q.warm_reads().await.expect("warm the reads");
            }
            let mut held = Vec::new();
            for _ in 0..3 {
                held.push(q.pool.acquire().await.expect("a kept connection"));
            }
            let mut backends = std::collections::BTreeSet::new();
            for conn in &mut held {
                let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                    .fetch_one(&mut **conn)
                    .await
                    .expect("pid");
                backends.insert(pid);
                assert_eq!(
                    prepared(conn).await,
                    (warmed, warmed),
                    "backend {pid}, warmed: {warmed}"
                );
            }
            assert_eq!(backends.len(), 3, "three backends of their own");
        }
        q.close().await;
    }
}
