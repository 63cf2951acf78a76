-- A claim does not wait for its commit to reach the disk.
--
-- With the default `synchronous_commit = on`, every commit waits until
-- its WAL is flushed. A claim's commit need not: if the server crashes
-- before the claim's WAL is on disk, the claim is undone by recovery, the
-- task is queued again as if never claimed, and the worker that started
-- it cannot record anything under the lost lease: its completion presents
-- a token no row carries and is refused (fenced), like any late
-- completion. A client may have seen the job running; after recovery it
-- is queued again and claimed anew. Nothing is lost: submissions,
-- results, failures and cancellations still commit synchronously, and a
-- synchronous commit flushes every earlier WAL record with its own, so a
-- completion never becomes durable before the claim it completes.
-- `set_config(…, true)` lasts until the end of the transaction, i.e.
-- through the claim's commit; a function's `SET` clause would be undone
-- when the function returns, before the commit.
--
-- Measured with `pgbench` (one-task claim, then a one-task completion,
-- against a queue of 192,000 tasks, three interleaved pairs while a build
-- ran; docs/queue-perf.md, session 6): PostgreSQL CPU per job 1.2–1.6 ms
-- against 1.7–2.1 ms, latency per job 3.1–4.9 ms against 5.3–7.4 ms.
--
-- The function is otherwise that of 0003 with the plan setting of 0004.
CREATE OR REPLACE FUNCTION mcq_claim(p_worker uuid, p_max bigint, p_lease_secs double precision)
RETURNS TABLE (id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
-- Until the end of the calling transaction (a claim is its own).
PERFORM set_config('synchronous_commit', 'off', true);
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
