-- The claim: due queued tasks in order under new leases, then, if it took
-- fewer than `p_max`, the next staged jobs (their job and task rows are
-- inserted running, under new leases, from the oldest staged row no other
-- claim holds). Rows with a task id are the claimed tasks; rows without
-- carry the spec of each job involved.
--
-- A function so that its plan cannot depend on statistics, which are stale
-- exactly when it matters (right after a large submit): sequential scans,
-- bitmap scans and sorts are off for its statements, so the ordered walk of
-- `tasks_queued` is the cheapest plan whatever they say; JIT is off because
-- the cost of a disabled node would make PostgreSQL compile every claim.
-- PL/pgSQL with a forced generic plan plans the statements once per
-- session: planning cost more than running a small claim.
--
-- The claim's commit does not wait for the disk: a claim lost in a crash
-- only puts its tasks back in the queue, and the late completion of the
-- worker that started one is fenced. `set_config(…, true)` lasts through
-- the caller's commit, where a `SET` clause would end with the function.
-- The locked rows are updated through the primary key, never by tuple id
-- (which let the planner filter a scan of every queued task).
CREATE FUNCTION mcq_claim(p_worker uuid, p_max bigint, p_lease_secs double precision)
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
DECLARE
    due bigint[];
    s record;
    k integer;
BEGIN
-- Until the end of the calling transaction (a claim is its own).
PERFORM set_config('synchronous_commit', 'off', true);
WITH fresh AS (
    SELECT t.id FROM tasks t
    WHERE t.state = 'queued' AND t.run_at <= now()
    ORDER BY t.run_at, t.id
    LIMIT p_max
    FOR UPDATE SKIP LOCKED
)
SELECT array_agg(f.id) INTO due FROM fresh f;
IF due IS NOT NULL THEN
    RETURN QUERY
    WITH claimed AS (
        UPDATE tasks t
        SET state = 'running', attempt = t.attempt + 1, lease_token = gen_random_uuid(),
            lease_expires_at = now() + make_interval(secs => p_lease_secs), worker_id = p_worker
        WHERE t.id = ANY(due)
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
END IF;
k := (p_max - coalesce(cardinality(due), 0))::integer;
IF k <= 0 THEN
    RETURN;
END IF;
SELECT st.batch_id, st.first, st.next, st.ids, st.specs, st.chunk_starts, st.chunk_ends,
       st.submitted_at
INTO s FROM staged st
ORDER BY st.submitted_at, st.batch_id, st.first
LIMIT 1
FOR UPDATE SKIP LOCKED;
IF NOT FOUND THEN
    RETURN;
END IF;
k := least(k, cardinality(s.ids) - s.next);
IF s.next + k >= cardinality(s.ids) THEN
    DELETE FROM staged st WHERE st.batch_id = s.batch_id AND st.first = s.first;
ELSE
    UPDATE staged st SET next = st.next + k WHERE st.batch_id = s.batch_id AND st.first = s.first;
END IF;
RETURN QUERY
WITH j AS (
    INSERT INTO jobs (id, batch_id, position, spec, task_count, state, started_at, attempts, submitted_at)
    SELECT u.id, s.batch_id, s.first + s.next + u.o::integer - 1, u.spec::json, 1, 'running', now(), 1,
           s.submitted_at
    FROM unnest(s.ids[s.next + 1 : s.next + k], s.specs[s.next + 1 : s.next + k])
         WITH ORDINALITY AS u(id, spec, o)
    RETURNING jobs.id, jobs.spec::text AS spec
), t AS (
    INSERT INTO tasks (job_id, chunk_start, chunk_end, state, attempt, lease_token,
                       lease_expires_at, worker_id)
    SELECT u.id, u.cs, u.ce, 'running', 1, gen_random_uuid(),
           now() + make_interval(secs => p_lease_secs), p_worker
    FROM unnest(s.ids[s.next + 1 : s.next + k], s.chunk_starts[s.next + 1 : s.next + k],
                s.chunk_ends[s.next + 1 : s.next + k]) AS u(id, cs, ce)
    RETURNING tasks.id, tasks.job_id, tasks.lease_token, tasks.attempt, tasks.chunk_start,
              tasks.chunk_end
)
SELECT t.id, t.job_id, t.lease_token, t.attempt, t.chunk_start, t.chunk_end, NULL::text FROM t
UNION ALL
SELECT NULL, j.id, NULL, NULL, NULL, NULL, j.spec FROM j;
END
$$;
