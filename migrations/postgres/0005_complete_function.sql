-- Completing whole-job tasks in one round trip.
--
-- A completion was a transaction of five round trips (BEGIN, the fenced
-- task transition, the job update with its result, the announcement,
-- COMMIT). When every job is one task and tasks take milliseconds, as in
-- `mcq bench compare`, each job gets a completion of its own, and the
-- round trips, not the rows, were most of what PostgreSQL did for it
-- (docs/queue-perf.md, session 5). `mcq_complete` does the same work for
-- tasks that bring a whole job's result, fenced the same way, in one
-- call. Completions that include tasks of split jobs (their partials are
-- merged by the worker) keep the transaction of several statements.
--
-- Fencing, as before: a task counts only while it is `running` under the
-- presented token; tokens are random per claim, so a row whose token is
-- among the presented ones carries the token presented with its id. The
-- accepted tasks are deleted; each one's job succeeds with its result
-- (unless the job already ended), the worker's counters move, and the
-- batches (or unbatched jobs) that finished are announced on `p_channel`
-- as `key:count`, all at commit. Returns the accepted task ids.
--
-- `p_ids` must be in ascending order, with the other arrays aligned to
-- it: accepted tasks are matched to their results by walking both sorted
-- lists once, without a join whose plan would depend on row estimates.
-- The plan is pinned as for `mcq_claim`: index access only (sequential
-- scans of `jobs` were chosen on never-analyzed tables), one generic plan
-- per session, no JIT.
CREATE FUNCTION mcq_complete(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_results text[], p_prices double precision[], p_channel text)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    acc_ids bigint[];
    acc_jobs uuid[];
    n int;
    k int := 1;
    announced bigint;
    jobs uuid[] := '{}';
    ms double precision[] := '{}';
    results text[] := '{}';
    prices double precision[] := '{}';
BEGIN
    WITH gone AS (
        DELETE FROM tasks t
        WHERE t.id = ANY(p_ids) AND t.lease_token = ANY(p_tokens) AND t.state = 'running'
        RETURNING t.id, t.job_id
    )
    SELECT array_agg(g.id ORDER BY g.id), array_agg(g.job_id ORDER BY g.id)
    INTO acc_ids, acc_jobs
    FROM gone g;
    n := coalesce(cardinality(acc_ids), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. cardinality(p_ids) LOOP
        EXIT WHEN k > n;
        IF p_ids[i] = acc_ids[k] THEN
            jobs[k] := acc_jobs[k];
            ms[k] := p_ms[i];
            results[k] := p_results[i];
            prices[k] := p_prices[i];
            k := k + 1;
        END IF;
    END LOOP;
    IF k <= n THEN
        RAISE EXCEPTION 'mcq_complete: p_ids must be in ascending order';
    END IF;
    WITH input AS (
        SELECT * FROM unnest(jobs, ms, results, prices) AS i(id, ms, result, price)
        ORDER BY i.id
    ), bumped AS (
        UPDATE jobs j
        SET tasks_done = j.tasks_done + 1, compute_ms = j.compute_ms + i.ms,
            state = CASE WHEN j.state IN ('queued', 'running') THEN 'succeeded' ELSE j.state END,
            finished_at = CASE WHEN j.state IN ('queued', 'running') THEN now() ELSE j.finished_at END,
            price = CASE WHEN j.state IN ('queued', 'running') THEN i.price ELSE j.price END
        FROM input i
        WHERE j.id = i.id
        RETURNING j.id, j.state, i.result, coalesce(j.batch_id, j.id) AS key
    ), saved AS (
        INSERT INTO results (job_id, result)
        SELECT b.id, b.result::json FROM bumped b WHERE b.state = 'succeeded'
    ), worker AS (
        UPDATE workers w
        SET tasks_done = w.tasks_done + n,
            jobs_done = w.jobs_done + (SELECT count(*) FROM bumped b WHERE b.state = 'succeeded')
        WHERE w.id = p_worker
    )
    SELECT count(pg_notify(p_channel, f.key::text || ':' || f.c)) INTO announced
    FROM (SELECT b.key, count(*) AS c FROM bumped b WHERE b.state = 'succeeded' GROUP BY b.key) f;
    RETURN QUERY SELECT unnest(acc_ids);
END
$$;
