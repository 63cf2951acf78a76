-- The claim as a function, so that its plan cannot depend on statistics.
--
-- A claim must walk the index of queued tasks in order and stop after the
-- tasks it takes. Whether the planner does so depends on statistics that
-- are stale exactly when it matters: right after a large submit (until
-- autovacuum analyzes the table, within a minute or so). In a 100,000-job
-- burn-down, 41 of 940 claims read every queued task through a bitmap scan
-- and sorted them all: 90,000 rows, spilled to disk, 110 ms per claim
-- (auto_explain, 2026-11-30; docs/queue-perf.md, session 4). With 20,000
-- queued tasks and the statistics of a five-task queue, it picks a
-- sequential scan and a sort even for a claim of 500 whose size it knows
-- (crates/mcq-queue/tests/conformance/claim_plan.rs). Sequential scans,
-- bitmap scans and sorts are therefore turned off for this function's
-- statement only; the ordered index walk is then the cheapest plan
-- whatever the statistics say. The sort of a claim's own rows by job id,
-- below, has no alternative and stays, but a disabled plan node carries a
-- huge cost, and that cost made PostgreSQL JIT-compile every claim (0.55 s
-- per claim, a burn-down at 573 jobs/s): JIT is off for the claim too.
-- It is PL/pgSQL, not SQL, because PL/pgSQL keeps the statement's plan
-- for the session: an SQL function is planned again
-- on every call, which doubled the cost of the small claims of a busy
-- fleet (1.74 against 0.95 ms per claim, `mcq bench compare` on
-- PostgreSQL).
--
-- What the claim does is unchanged (docs/state-machine.md): due queued
-- tasks in order, skipping rows another claimer holds; each claimed task
-- gets a new token, one more attempt and a lease; its job starts running
-- (job rows updated in id order). Rows with a task id are the claimed
-- tasks; rows without carry the spec of each job involved. The locked rows
-- are updated through the primary key: matching them by tuple id instead
-- let the planner, on the same stale statistics, filter a scan of every
-- queued task by tuple id.
CREATE FUNCTION mcq_claim(p_worker uuid, p_max bigint, p_lease_secs double precision)
RETURNS TABLE (id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH fresh AS (
    SELECT t.id FROM tasks t
    WHERE t.state = 'queued' AND t.run_at <= now()
    ORDER BY t.run_at, t.id
    LIMIT p_max
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE tasks t
    SET state = 'running', attempt = t.attempt + 1, lease_token = gen_random_uuid(),
        lease_expires_at = now() + make_interval(secs => p_lease_secs), worker_id = p_worker
    WHERE t.id = ANY(ARRAY(SELECT f.id FROM fresh f))
    RETURNING t.id, t.job_id, t.lease_token, t.attempt, t.chunk_start, t.chunk_end
), per_job AS (
    SELECT c.job_id, count(*)::int AS n FROM claimed c GROUP BY c.job_id ORDER BY c.job_id
), started AS (
    UPDATE jobs j
    SET state = 'running', started_at = coalesce(j.started_at, now()), attempts = j.attempts + p.n
    FROM per_job p
    WHERE j.id = p.job_id
    RETURNING j.id, j.spec::text AS spec
)
SELECT c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end, NULL::text FROM claimed c
UNION ALL
SELECT NULL, s.id, NULL, NULL, NULL, NULL, s.spec FROM started s;
END
$$;
