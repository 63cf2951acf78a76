//! Completion: one call records finished tasks, fenced, in one statement
//! and one transaction, so no transaction of a worker holds a lock across
//! a round trip. Tasks that bring their job's result, a few at a time (the
//! common case), go to `mcq_record` (functions/mcq_record.sql), one SQL
//! statement that leaves the worker's row to its heartbeat (`tally.rs`);
//! calls with partials, and large ones, go to `mcq_complete`
//! (functions/mcq_complete.sql). A call whose partials finish a split job
//! gets the job's partials back with one of its tasks still held; the
//! kernel's merge runs here, and a second call completes that task with
//! the job's result. A job of its own recorded by `mcq_record` is
//! announced by the recording statement, at its commit; the other jobs a
//! call finishes are announced after it commits (`herald.rs`): by the
//! store's herald, on the call's connection, when they rode a claim, at
//! once when they were sent on their own.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::Row as _;
use sqlx::postgres::{PgArguments, PgRow, Postgres};
use sqlx::query::Query;
use uuid::Uuid;

use super::checkout::Conn;
use super::tally::Counts;
use super::tasks::{claimed_tasks, contended, refills};
use super::{FINISHED_CHANNEL, PgQueue};
use crate::plan;
use crate::store::StoreError;
use crate::types::{CompletedAndClaimed, TaskDone, TaskOutput};

/// Records finished tasks: accepted ids come back as `accepted` rows, held
/// tasks of split jobs that this call finishes as rows with `held` set.
const COMPLETE: &str = "SELECT accepted, job_id, held, spec, compute_ms, partials \
                        FROM mcq_complete($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Completion of tasks that bring their job's result, then a claim, in one
/// transaction (functions/mcq_complete_and_claim.sql). Accepted completions
/// come back as rows with `accepted` set, followed by the claim's rows.
const COMPLETE_AND_CLAIM: &str = "SELECT accepted, id, job_id, lease_token, attempt, \
                                  chunk_start, chunk_end, spec \
                                  FROM mcq_complete_and_claim($1, $2, $3, $4, $5, $6, $7, $8, \
                                  $9, mcq_claim_ahead($10, $12), $11)";

/// Records tasks that bring their job's result in one statement
/// (functions/mcq_record.sql): a row per accepted task, with the
/// announcement key of the job it finished, and whether the statement
/// announced it (a job of its own) on the channel `$9`.
const RECORD: &str =
    "SELECT accepted, job_id, announced FROM mcq_record($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// [`RECORD`], then a claim, in one transaction
/// (functions/mcq_record_and_claim.sql); rows as [`COMPLETE_AND_CLAIM`],
/// and a row with only `attempt` set for each tenant whose staged jobs the
/// store writes out after the commit (`tasks::refills`).
const RECORD_AND_CLAIM: &str = "SELECT accepted, id, job_id, lease_token, attempt, \
                                chunk_start, chunk_end, spec \
                                FROM mcq_record_and_claim($1, $2, $3, $4, $5, $6, $7, $8, \
                                mcq_claim_ahead($9, $11), $10, true)";

/// The most tasks one call of `mcq_record` takes. It meets the accepted
/// rows with their inputs and jobs in joins that may be nested loops,
/// quadratic in the call's size; past this, `mcq_complete`'s loop over
/// sorted arrays is cheaper. One-slot workers complete one task a call,
/// and a worker of a few slots a few.
const RECORD_MAX: usize = 64;

impl PgQueue {
    /// Fenced completion of any mix of whole-job and split tasks; a job's
    /// result is written in the transaction that accepts its last task.
    /// Returns the refused task ids.
    pub(crate) async fn complete(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
    ) -> Result<Vec<i64>, StoreError> {
        let ids: Vec<i64> = done.iter().map(|d| d.task_id).collect();
        let mut accepted = HashSet::with_capacity(ids.len());
        let mut finished = BTreeMap::new();
        let mut conn = self.conn().await?;
        let finishing = self
            .record(&mut conn, worker, &done, &mut accepted, &mut finished)
            .await?;
        let recorded = if finishing.is_empty() {
            Ok(())
        } else {
            self.record(&mut conn, worker, &finishing, &mut accepted, &mut finished)
                .await
                .map(|no_more| debug_assert!(no_more.is_empty(), "results finish no split job"))
        };
        // What the first call committed is announced even if the second
        // failed (then on another connection); at once, on the calls'
        // connection, before the caller's next call.
        let conn = match recorded {
            Ok(()) => Ok(conn),
            Err(_) => {
                drop(conn);
                self.conn().await
            }
        };
        self.let_go_into(ids.iter().copied(), &mut finished);
        self.announce_now(finished, conn).await;
        recorded?;
        Ok(refused(ids, &accepted))
    }

    /// Records `done` as [`PgQueue::complete`] does, then claims up to
    /// `max` tasks, `ahead` of them beyond the worker's free slots: the
    /// results go with the claim in one call
    /// (`mcq_record_and_claim`, or `mcq_complete_and_claim` past
    /// [`RECORD_MAX`] of them); partials are recorded first by a call of
    /// their own, and the results of the split jobs they finish go with
    /// the claim.
    pub(crate) async fn complete_and_claim(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
        max: u32,
        ahead: u32,
    ) -> Result<CompletedAndClaimed, StoreError> {
        let ids: Vec<i64> = done.iter().map(|d| d.task_id).collect();
        let mut accepted = HashSet::with_capacity(ids.len());
        let mut finished = BTreeMap::new();
        let (partials, mut results): (Vec<TaskDone>, Vec<TaskDone>) = done
            .into_iter()
            .partition(|d| matches!(d.output, TaskOutput::Partial(_)));
        let mut conn = self.conn().await?;
        if !partials.is_empty() {
            // Partials finish no job here: their results go with the claim.
            results.extend(
                self.record(&mut conn, worker, &partials, &mut accepted, &mut finished)
                    .await?,
            );
        }
        let input = Input::of(&results)?;
        // No channel for `mcq_complete_and_claim`: the finished jobs are
        // announced after the commit.
        let recorded = input.ids.len() <= RECORD_MAX;
        let query = input.bind(
            sqlx::query(if recorded {
                RECORD_AND_CLAIM
            } else {
                COMPLETE_AND_CLAIM
            }),
            worker,
        );
        let query = if recorded {
            query
        } else {
            query.bind(None::<&str>)
        };
        let rows = query
            .bind(i64::from(max))
            .bind(self.lease_secs())
            .bind(i64::from(ahead))
            .fetch_all(&mut *conn)
            .await?;
        let mut counts = Counts::default();
        let mut claim_rows = Vec::with_capacity(rows.len());
        for row in &rows {
            if !note_accepted(row, &mut accepted, Some(&mut finished), &mut counts)? {
                claim_rows.push(row);
            }
        }
        if recorded {
            self.tally.add(worker, counts);
        }
        let refills = refills(claim_rows.iter().copied())?;
        let claimed = claimed_tasks(&rows)?;
        // Held first, then let go: a batch whose next task this call
        // claimed stays held, and its finished jobs wait.
        self.hold(&claimed);
        self.let_go_into(ids.iter().copied(), &mut finished);
        self.announce_finished_on(finished, conn);
        self.refill_later(worker, refills);
        Ok(CompletedAndClaimed {
            refused: refused(ids, &accepted),
            claimed: Ok(claimed),
            contended: contended(claim_rows)?,
        })
    }

    /// One call of `mcq_record` (a few results) or `mcq_complete`: adds
    /// the accepted task ids to `accepted`, counts the jobs it finished per
    /// announcement key in `finished`, and returns, for each split job
    /// whose partials it completed, its held task bringing the job's
    /// result, to be recorded by another call.
    async fn record(
        &self,
        conn: &mut Conn,
        worker: Uuid,
        done: &[TaskDone],
        accepted: &mut HashSet<i64>,
        finished: &mut BTreeMap<Uuid, i64>,
    ) -> Result<Vec<TaskDone>, StoreError> {
        let input = Input::of(done)?;
        if input.partials.is_none() && input.ids.len() <= RECORD_MAX {
            let rows = input
                .bind(sqlx::query(RECORD), worker)
                .bind(FINISHED_CHANNEL)
                .fetch_all(&mut **conn)
                .await?;
            let mut counts = Counts::default();
            for row in &rows {
                // A job the statement announced is not announced again.
                let announced: bool = row.try_get("announced")?;
                note_accepted(
                    row,
                    accepted,
                    (!announced).then_some(&mut *finished),
                    &mut counts,
                )?;
            }
            self.tally.add(worker, counts);
            return Ok(Vec::new());
        }
        let rows = input
            .bind(sqlx::query(COMPLETE), worker)
            .bind(&input.partials)
            // No channel: the finished jobs are announced after the commit.
            .bind(None::<&str>)
            .fetch_all(&mut **conn)
            .await?;
        let mut finishing = Vec::new();
        // `mcq_complete` counts on the worker's row itself.
        let mut counted = Counts::default();
        for row in &rows {
            if !note_accepted(row, accepted, Some(&mut *finished), &mut counted)? {
                finishing.push(finished_task(row, done)?);
            }
        }
        Ok(finishing)
    }
}

/// Notes a row of an accepted task (`accepted` set): its id, and the job
/// it finished, if any, under the job's announcement key (`job_id`) in
/// `finished`, the jobs still to announce (`None` when the statement
/// announced them itself). False for a row of another kind (a claimed or
/// held task).
fn note_accepted(
    row: &PgRow,
    accepted: &mut HashSet<i64>,
    finished: Option<&mut BTreeMap<Uuid, i64>>,
    counts: &mut Counts,
) -> Result<bool, StoreError> {
    let Some(id) = row.try_get::<Option<i64>, _>("accepted")? else {
        return Ok(false);
    };
    accepted.insert(id);
    counts.tasks += 1;
    if let Some(key) = row.try_get::<Option<Uuid>, _>("job_id")? {
        if let Some(finished) = finished {
            *finished.entry(key).or_insert(0) += 1;
        }
        counts.jobs += 1;
    }
    Ok(true)
}

/// The held task of a split job whose other tasks all succeeded, bringing
/// the job's result merged from every partial (its own included).
fn finished_task(row: &PgRow, done: &[TaskDone]) -> Result<TaskDone, StoreError> {
    let held: i64 = row.try_get("held")?;
    let task = done
        .iter()
        .find(|d| d.task_id == held)
        .ok_or_else(|| StoreError::Corrupt(format!("held task {held} was not presented")))?;
    let spec: String = row.try_get("spec")?;
    let partials: Vec<Option<String>> = row.try_get("partials")?;
    let partials: Vec<String> = partials
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| StoreError::Corrupt("a task of a split job has no partial".into()))?;
    let result = plan::finish_from_partials(
        &spec,
        partials.iter().map(String::as_str),
        row.try_get("compute_ms")?,
    )?;
    Ok(TaskDone {
        task_id: held,
        lease_token: task.lease_token,
        output: TaskOutput::Result(result),
        compute_ms: task.compute_ms,
        compute_span: task.compute_span,
    })
}

/// The presented ids that were not accepted.
fn refused(ids: Vec<i64>, accepted: &HashSet<i64>) -> Vec<i64> {
    ids.into_iter()
        .filter(|id| !accepted.contains(id))
        .collect()
}

/// Finished tasks as the aligned arrays `mcq_complete` takes, in ascending
/// task id order; `partials` is NULL (`None`) when no task brings one,
/// which keeps the function on its path for results only.
struct Input {
    ids: Vec<i64>,
    tokens: Vec<Uuid>,
    ms: Vec<f64>,
    started: Vec<Option<DateTime<Utc>>>,
    finished: Vec<Option<DateTime<Utc>>>,
    results: Vec<Option<String>>,
    prices: Vec<Option<f64>>,
    partials: Option<Vec<Option<String>>>,
}

impl Input {
    /// Binds `worker` and the arrays every completion function takes
    /// first, up to the prices.
    fn bind<'q>(
        &'q self,
        query: Query<'q, Postgres, PgArguments>,
        worker: Uuid,
    ) -> Query<'q, Postgres, PgArguments> {
        query
            .bind(worker)
            .bind(&self.ids)
            .bind(&self.tokens)
            .bind(&self.ms)
            .bind(&self.started)
            .bind(&self.finished)
            .bind(&self.results)
            .bind(&self.prices)
    }

    fn of(done: &[TaskDone]) -> Result<Input, StoreError> {
        let mut sorted: Vec<&TaskDone> = done.iter().collect();
        sorted.sort_unstable_by_key(|d| d.task_id);
        sorted.dedup_by_key(|d| d.task_id);
        let n = sorted.len();
        let mut input = Input {
            ids: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            ms: Vec::with_capacity(n),
            started: Vec::with_capacity(n),
            finished: Vec::with_capacity(n),
            results: Vec::with_capacity(n),
            prices: Vec::with_capacity(n),
            partials: None,
        };
        let mut partials = Vec::with_capacity(n);
        for d in sorted {
            input.ids.push(d.task_id);
            input.tokens.push(d.lease_token);
            input.ms.push(d.compute_ms);
            input.started.push(d.compute_span.map(|s| s.started_at));
            input.finished.push(d.compute_span.map(|s| s.finished_at));
            match &d.output {
                TaskOutput::Result(result) => {
                    input.results.push(Some(plan::result_json(result)?));
                    input.prices.push(Some(result.price));
                    partials.push(None);
                }
                TaskOutput::Partial(partial) => {
                    input.results.push(None);
                    input.prices.push(None);
                    partials.push(Some(plan::partial_json(partial)?));
                }
            }
        }
        if partials.iter().any(Option::is_some) {
            input.partials = Some(partials);
        }
        Ok(input)
    }
}
