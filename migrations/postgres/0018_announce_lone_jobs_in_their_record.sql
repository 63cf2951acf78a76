-- A job without a batch usually has a reader waiting on it alone, and its
-- announcement after the record's commit waited for the worker's process
-- to run again and for a round trip more. `mcq_record` gains a channel:
-- the record of such a job announces it in the same statement. The
-- eight-argument signature of earlier workers announces nothing, as
-- before, and keeps one body by calling the new one;
-- `mcq_record_and_claim`, whose claim comes before its commit, calls the
-- new one without a channel.
-- The completion of tasks that bring their job's result (whole-job tasks,
-- and the held last task of a split job): the common completion, as one
-- statement. `mcq_complete` remains for calls with partials.
--
-- Each presented task counts only while it is `running` under the
-- presented token (tokens are random per claim, so a row whose token is
-- among the presented ones carries the token presented with its id). An
-- accepted task is deleted (its job row records everything it did) and
-- its job counts it; the job succeeds with the result unless it already
-- ended (a cancelled job keeps its state), and its result row is written
-- in the same statement. The phases are copied into the job as
-- `mcq_complete` does: the worker's compute times clamped between the
-- task's claim and now.
--
-- Tasks and jobs are found by index conditions (`= ANY` of an array), one
-- index probe each, never by a join whose plan follows row estimates: the
-- statistics are stale exactly when it matters, and a join planned on an
-- empty `jobs` walked every job for each completion. The accepted rows
-- meet their inputs, and each job its task, in memory, by loops that may
-- be quadratic in the call's size: the store sends small completions here
-- and large ones, where the loop of `mcq_complete` over sorted arrays is
-- cheaper, to `mcq_complete`.
--
-- Unlike `mcq_complete`, it leaves the worker's row alone: rewriting one
-- row per completion cost about a tenth of a task's database time, so the
-- store counts what its completions recorded and the worker's heartbeat
-- (or its idle mark) adds them to its row.
--
-- Lock order, as in every transaction that waits for rows: tasks in id
-- order, then jobs in id order (an index yields the rows of `= ANY` in
-- key order). Every job it locks belonged to its task alone (a held last
-- task's siblings have all succeeded), so no completion waits for
-- another's jobs.
--
-- A job of its own (without a batch) that it finishes is announced on
-- `p_channel`, when given, in the same statement and so at the commit
-- that makes its result visible: such a job usually has a reader waiting
-- on it alone. Its transaction then holds PostgreSQL's one notification
-- lock from its commit until its flush; a batch's jobs, whose reader
-- waits for the batch, are left to the store to announce after the
-- commit, in a transaction that does not wait for the disk.
--
-- Rows: one per accepted task, with, in `job_id`, the announcement key
-- of the job it finished (its batch, or the job itself without one), or
-- NULL when the job had ended before, and `announced` set when this
-- statement announced it. The plan is pinned as for `mcq_claim`: index
-- access only, one generic plan per session, no JIT.
CREATE FUNCTION mcq_record(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[], p_channel text)
RETURNS TABLE (accepted bigint, job_id uuid, announced boolean)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH gone AS (
    DELETE FROM tasks t
    WHERE t.id = ANY(p_ids) AND t.lease_token = ANY(p_tokens) AND t.state = 'running'
    RETURNING t.id, t.job_id, t.claimed_at
), accepted AS (
    SELECT g.id, g.job_id, g.claimed_at, i.ms, i.result, i.price,
           CASE WHEN i.started IS NOT NULL
                THEN least(greatest(i.started, g.claimed_at), now()) END AS started,
           CASE WHEN i.finished IS NOT NULL
                THEN least(greatest(i.finished, i.started, g.claimed_at), now()) END AS finished
    FROM gone g
    JOIN unnest(p_ids, p_ms, p_started, p_finished, p_results, p_prices)
         AS i(id, ms, started, finished, result, price) ON i.id = g.id
), bumped AS (
    -- Each job once, through its primary key; its values from its task.
    UPDATE jobs j
    SET (tasks_done, compute_ms, state, finished_at, price, claimed_at, compute_started_at,
         compute_finished_at, worker_id) = (
        SELECT j.tasks_done + 1, j.compute_ms + a.ms,
               CASE WHEN j.state IN ('queued', 'running') THEN 'succeeded' ELSE j.state END,
               CASE WHEN j.state IN ('queued', 'running') THEN now() ELSE j.finished_at END,
               CASE WHEN j.state IN ('queued', 'running') THEN a.price ELSE j.price END,
               least(j.claimed_at, a.claimed_at), least(j.compute_started_at, a.started),
               greatest(j.compute_finished_at, a.finished), p_worker
        FROM accepted a WHERE a.job_id = j.id)
    WHERE j.id = ANY(ARRAY(SELECT a.job_id FROM accepted a))
    RETURNING j.id, j.state, coalesce(j.batch_id, j.id) AS key, j.batch_id IS NULL AS lone
), finished AS (
    SELECT a.id AS task, a.result, b.id AS job, b.state, b.key,
           b.state = 'succeeded' AND b.lone AND p_channel IS NOT NULL AS told
    FROM bumped b JOIN accepted a ON a.job_id = b.id
), saved AS (
    INSERT INTO results (job_id, result)
    SELECT f.job, f.result::json FROM finished f WHERE f.state = 'succeeded'
)
SELECT f.task, CASE WHEN f.state = 'succeeded' THEN f.key END,
       CASE WHEN f.told THEN pg_notify(p_channel, f.key::text || ':1') IS NOT NULL ELSE false END
FROM finished f;
END
$$;

-- The signature of earlier workers, and of `mcq_record_and_claim`, whose
-- claim runs after the record in the same transaction: nothing announced.
CREATE OR REPLACE FUNCTION mcq_record(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[])
RETURNS TABLE (accepted bigint, job_id uuid)
LANGUAGE sql VOLATILE
AS $$
SELECT r.accepted, r.job_id
FROM mcq_record(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished, p_results, p_prices,
                NULL) r
$$;

-- A completion and the next claim in one round trip: `mcq_record`, then
-- `mcq_claim`, in one transaction, so a worker about to claim sends the
-- results it holds along with the claim at no call of its own. Results
-- only, as `mcq_record` takes: every job it locks was its task's alone, so
-- no transaction holding one of the claim's jobs can be waiting for it.
-- The record announces nothing (no channel): the claim runs before the
-- commit, and the store announces the finished jobs after it. `mcq_claim`
-- lets its transaction commit without waiting for the disk;
-- this one records results, so the caller's commit mode is restored
-- before returning.
--
-- With `p_refill_later`, the claim writes no staged jobs out: the few
-- milliseconds 256 jobs take would hold the results back from their
-- readers. A tenant whose queued tasks run low comes back instead as a
-- row with only `attempt` set (its id), for the caller to write its jobs
-- out after the commit (`mcq_claim_staged(worker, tenant, 0, 256, …)`).
-- Without it (the ten arguments of earlier workers) the claim writes them
-- out itself, as before.
--
-- Rows: one per accepted completion (`accepted` set, and `job_id` the
-- announcement key of the job it finished, as `mcq_record` returns it),
-- then the claim's rows as `mcq_claim` returns them (`accepted` NULL).
CREATE OR REPLACE FUNCTION mcq_record_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[],
    p_max bigint, p_lease_secs double precision, p_refill_later boolean)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    durability text := current_setting('synchronous_commit');
BEGIN
    RETURN QUERY
    SELECT r.accepted, NULL::bigint, r.job_id, NULL::uuid, NULL::integer, NULL::bigint,
           NULL::bigint, NULL::text
    FROM mcq_record(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished, p_results,
                    p_prices, NULL) AS r;
    IF p_refill_later THEN
        PERFORM set_config('mcq.refill', 'later', true);
    END IF;
    RETURN QUERY
    SELECT NULL::bigint, c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end,
           c.spec
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
    PERFORM set_config('mcq.refill', '', true);
    PERFORM set_config('synchronous_commit', durability, true);
END
$$;

CREATE OR REPLACE FUNCTION mcq_record_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[],
    p_max bigint, p_lease_secs double precision)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE sql VOLATILE
AS $$
    SELECT * FROM mcq_record_and_claim(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished,
                                       p_results, p_prices, p_max, p_lease_secs, false)
$$;
