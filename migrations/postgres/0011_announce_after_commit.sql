-- Completions announce finished jobs after their commit: a NOTIFY holds
-- one lock for the whole database from its transaction's commit until the
-- commit is on disk, so completions that notified committed one at a time
-- (a fleet of 32 to 256 one-slot workers stopped near 500 tasks/s on two
-- cores, most backends waiting on that lock). With `p_channel` NULL the
-- completion only returns each finished job's announcement key, and the
-- caller notifies in a transaction of its own that does not wait for the
-- disk. Callers that pass a channel (workers of an older release) still
-- announce at commit. Same signatures: running workers are unaffected.
-- The one completion: records finished tasks, fenced, in one statement.
--
-- Each presented task counts only while it is `running` under the
-- presented token (tokens are random per claim, so a row whose token is
-- among the presented ones carries the token presented with its id). The
-- arrays are aligned and `p_ids` strictly ascending: accepted rows are
-- matched to their inputs by walking both sorted lists once, without a
-- join whose plan would depend on row estimates.
--
-- A task that brings its job's result (`p_partials[i]` NULL) is deleted:
-- its job row records everything it did. The job succeeds with the result
-- unless it already ended. A task of a split job brings a partial
-- (`p_partials[i]` set) and succeeds with it, and its job counts it. When
-- the partials of a call complete a job, the last of its tasks is held
-- back: its partial is saved but it stays `running` under its lease, and a
-- row returns the job's spec, kernel time and every partial in chunk
-- order. The caller merges them (the kernel's merge lives in Rust) and
-- completes that task again, bringing the result. Held under a lease, the
-- job cannot be left finished without a result: if the caller is lost, the
-- lease runs out and the task is computed again.
--
-- Lock order, as in every transaction that waits for rows: tasks in id
-- order, then jobs in id order, then this worker's row. Result-only calls
-- get it from their index walks (the delete reads the presented ids in
-- index order; each job has its only task deleted first); calls with
-- partials lock every row they may change up front.
--
-- Phases (docs/state-machine.md): each accepted task brings when its
-- compute started and finished on the worker (`p_started`, `p_finished`;
-- NULL from a worker that does not say), clamped between its claim and
-- this call so that a skewed worker clock cannot order them otherwise. Its
-- job keeps the earliest claim and compute start and the latest compute
-- finish of its accepted tasks, and the worker that finished it; the
-- statements that count the tasks carry them, so phases cost no statement.
--
-- Rows: one per accepted task (`accepted`), then one per held task
-- (`accepted` NULL). The row of a task whose job this call finished
-- carries, in `job_id`, the job's announcement key: its batch, or the job
-- itself without one. With `p_channel` set, the finished batches (or
-- unbatched jobs) are also announced on it as `key:count`, at commit; a
-- caller that passes NULL announces them after the commit, from the keys,
-- in a transaction of its own. A NOTIFY takes one lock for the whole
-- database from its commit until the commit is on disk, so completions
-- that announce in their own transaction commit one at a time, each
-- waiting out the others' flushes; without it they share flushes. The
-- plan is pinned as for `mcq_claim`: index access only, one generic plan
-- per session, no JIT.
CREATE OR REPLACE FUNCTION mcq_complete(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[], p_partials text[], p_channel text)
RETURNS TABLE (accepted bigint, job_id uuid, held bigint, spec text,
               compute_ms double precision, partials text[])
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    -- Tasks that bring a result (r_) and tasks that bring a partial (s_).
    r_ids bigint[] := p_ids;
    r_tokens uuid[] := p_tokens;
    r_ms double precision[] := p_ms;
    r_started timestamptz[] := p_started;
    r_finished timestamptz[] := p_finished;
    r_results text[] := p_results;
    r_prices double precision[] := p_prices;
    s_ids bigint[] := '{}';
    s_tokens uuid[] := '{}';
    s_ms double precision[] := '{}';
    s_started timestamptz[] := '{}';
    s_finished timestamptz[] := '{}';
    s_partials text[] := '{}';
    nr int := 0;
    ns int := 0;
    -- Accepted result tasks, and their inputs aligned to them.
    acc_ids bigint[];
    acc_jobs uuid[];
    acc_claimed timestamptz[];
    n int := 0;
    k int := 1;
    jobs_in uuid[] := '{}';
    ms_in double precision[] := '{}';
    results_in text[] := '{}';
    prices_in double precision[] := '{}';
    claimed_in timestamptz[] := '{}';
    started_in timestamptz[] := '{}';
    finished_in timestamptz[] := '{}';
    -- Accepted partial tasks, aligned the same way, and those held back.
    part_ids bigint[];
    part_jobs uuid[];
    part_claimed timestamptz[];
    pa_ids bigint[] := '{}';
    pa_jobs uuid[] := '{}';
    pa_ms double precision[] := '{}';
    pa_partials text[] := '{}';
    pa_claimed timestamptz[] := '{}';
    pa_started timestamptz[] := '{}';
    pa_finished timestamptz[] := '{}';
    held_ids bigint[] := '{}';
    counted int := 0;
    announced bigint;
    -- The jobs this call finished, and their announcement keys.
    fin_jobs uuid[];
    fin_keys uuid[];
BEGIN
    IF p_partials IS NOT NULL THEN
        r_ids := '{}'; r_tokens := '{}'; r_ms := '{}'; r_results := '{}'; r_prices := '{}';
        r_started := '{}'; r_finished := '{}';
        FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
            IF i > 1 AND p_ids[i] <= p_ids[i - 1] THEN
                RAISE EXCEPTION 'mcq_complete: p_ids must be in ascending order';
            END IF;
            IF p_partials[i] IS NULL THEN
                nr := nr + 1;
                r_ids[nr] := p_ids[i];
                r_tokens[nr] := p_tokens[i];
                r_ms[nr] := p_ms[i];
                r_started[nr] := p_started[i];
                r_finished[nr] := p_finished[i];
                r_results[nr] := p_results[i];
                r_prices[nr] := p_prices[i];
            ELSE
                ns := ns + 1;
                s_ids[ns] := p_ids[i];
                s_tokens[ns] := p_tokens[i];
                s_ms[ns] := p_ms[i];
                s_started[ns] := p_started[i];
                s_finished[ns] := p_finished[i];
                s_partials[ns] := p_partials[i];
            END IF;
        END LOOP;
    END IF;
    IF ns > 0 THEN
        PERFORM 1 FROM tasks t
        WHERE t.id = ANY(p_ids) AND t.lease_token = ANY(p_tokens) AND t.state = 'running'
        ORDER BY t.id
        FOR UPDATE;
    END IF;

    WITH gone AS (
        DELETE FROM tasks t
        WHERE t.id = ANY(r_ids) AND t.lease_token = ANY(r_tokens) AND t.state = 'running'
        RETURNING t.id, t.job_id, t.claimed_at
    )
    SELECT array_agg(g.id ORDER BY g.id), array_agg(g.job_id ORDER BY g.id),
           array_agg(g.claimed_at ORDER BY g.id)
    INTO acc_ids, acc_jobs, acc_claimed
    FROM gone g;
    n := coalesce(cardinality(acc_ids), 0);
    IF n > 0 THEN
        FOR i IN 1 .. cardinality(r_ids) LOOP
            EXIT WHEN k > n;
            IF r_ids[i] = acc_ids[k] THEN
                jobs_in[k] := acc_jobs[k];
                ms_in[k] := r_ms[i];
                results_in[k] := r_results[i];
                prices_in[k] := r_prices[i];
                claimed_in[k] := acc_claimed[k];
                started_in[k] := CASE WHEN r_started[i] IS NOT NULL
                    THEN least(greatest(r_started[i], acc_claimed[k]), now()) END;
                finished_in[k] := CASE WHEN r_finished[i] IS NOT NULL
                    THEN least(greatest(r_finished[i], r_started[i], acc_claimed[k]), now()) END;
                k := k + 1;
            END IF;
        END LOOP;
        IF k <= n THEN
            RAISE EXCEPTION 'mcq_complete: p_ids must be in ascending order';
        END IF;
    END IF;

    IF ns > 0 THEN
        SELECT array_agg(t.id ORDER BY t.id), array_agg(t.job_id ORDER BY t.id),
               array_agg(t.claimed_at ORDER BY t.id)
        INTO part_ids, part_jobs, part_claimed
        FROM tasks t
        WHERE t.id = ANY(s_ids) AND t.lease_token = ANY(s_tokens) AND t.state = 'running';
        k := 1;
        FOR i IN 1 .. ns LOOP
            EXIT WHEN k > coalesce(cardinality(part_ids), 0);
            IF s_ids[i] = part_ids[k] THEN
                pa_ids[k] := part_ids[k];
                pa_jobs[k] := part_jobs[k];
                pa_ms[k] := s_ms[i];
                pa_partials[k] := s_partials[i];
                pa_claimed[k] := part_claimed[k];
                pa_started[k] := CASE WHEN s_started[i] IS NOT NULL
                    THEN least(greatest(s_started[i], part_claimed[k]), now()) END;
                pa_finished[k] := CASE WHEN s_finished[i] IS NOT NULL
                    THEN least(greatest(s_finished[i], s_started[i], part_claimed[k]), now()) END;
                k := k + 1;
            END IF;
        END LOOP;
    END IF;

    IF cardinality(pa_ids) > 0 THEN
        PERFORM 1 FROM jobs j WHERE j.id = ANY(jobs_in || pa_jobs) ORDER BY j.id FOR UPDATE;
        -- The greatest accepted task of each job these partials complete.
        SELECT coalesce(array_agg(p.last), '{}') INTO held_ids
        FROM (SELECT a.job_id, count(*)::int AS n, max(a.id) AS last
              FROM unnest(pa_ids, pa_jobs) AS a(id, job_id) GROUP BY a.job_id) p
        JOIN jobs j ON j.id = p.job_id
        WHERE j.state IN ('queued', 'running') AND j.tasks_done + p.n >= j.task_count;
        UPDATE tasks t
        SET state = 'succeeded', partial = a.partial::json, compute_ms = a.ms, finished_at = now(),
            lease_token = NULL, lease_expires_at = NULL
        FROM unnest(pa_ids, pa_ms, pa_partials) AS a(id, ms, partial)
        WHERE t.id = a.id AND t.id = ANY(pa_ids) AND t.id <> ALL(held_ids);
        UPDATE tasks t SET partial = a.partial::json, compute_ms = a.ms
        FROM unnest(pa_ids, pa_ms, pa_partials) AS a(id, ms, partial)
        WHERE t.id = a.id AND t.id = ANY(held_ids);
        UPDATE jobs j SET tasks_done = j.tasks_done + p.n, compute_ms = j.compute_ms + p.ms,
            claimed_at = least(j.claimed_at, p.claimed),
            compute_started_at = least(j.compute_started_at, p.started),
            compute_finished_at = greatest(j.compute_finished_at, p.finished)
        FROM (SELECT a.job_id, count(*)::int AS n, sum(a.ms) AS ms, min(a.claimed) AS claimed,
                     min(a.started) AS started, max(a.finished) AS finished
              FROM unnest(pa_ids, pa_jobs, pa_ms, pa_claimed, pa_started, pa_finished)
                   AS a(id, job_id, ms, claimed, started, finished)
              WHERE a.id <> ALL(held_ids)
              GROUP BY a.job_id) p
        WHERE j.id = p.job_id;
        counted := cardinality(pa_ids) - cardinality(held_ids);
    END IF;

    IF n + counted = 0 AND cardinality(held_ids) = 0 THEN
        RETURN;
    END IF;
    WITH input AS (
        SELECT * FROM unnest(jobs_in, ms_in, results_in, prices_in, claimed_in, started_in,
                             finished_in) AS i(id, ms, result, price, claimed, started, finished)
        ORDER BY i.id
    ), bumped AS (
        UPDATE jobs j
        SET tasks_done = j.tasks_done + 1, compute_ms = j.compute_ms + i.ms,
            state = CASE WHEN j.state IN ('queued', 'running') THEN 'succeeded' ELSE j.state END,
            finished_at = CASE WHEN j.state IN ('queued', 'running') THEN now() ELSE j.finished_at END,
            price = CASE WHEN j.state IN ('queued', 'running') THEN i.price ELSE j.price END,
            claimed_at = least(j.claimed_at, i.claimed),
            compute_started_at = least(j.compute_started_at, i.started),
            compute_finished_at = greatest(j.compute_finished_at, i.finished),
            worker_id = p_worker
        FROM input i
        WHERE j.id = i.id
        RETURNING j.id, j.state, i.result, coalesce(j.batch_id, j.id) AS key
    ), saved AS (
        INSERT INTO results (job_id, result)
        SELECT b.id, b.result::json FROM bumped b WHERE b.state = 'succeeded'
    ), worker AS (
        UPDATE workers w
        SET tasks_done = w.tasks_done + n + counted,
            jobs_done = w.jobs_done + (SELECT count(*) FROM bumped b WHERE b.state = 'succeeded')
        WHERE w.id = p_worker
    ), finished AS (
        SELECT b.id, b.key FROM bumped b WHERE b.state = 'succeeded'
    ), told AS (
        SELECT count(pg_notify(p_channel, f.key::text || ':' || f.c)) AS n
        FROM (SELECT d.key, count(*) AS c FROM finished d GROUP BY d.key) f
        WHERE p_channel IS NOT NULL
    )
    SELECT array_agg(d.id), array_agg(d.key), (SELECT t.n FROM told t)
    INTO fin_jobs, fin_keys, announced
    FROM finished d;

    RETURN QUERY
    SELECT a.id, f.key, NULL::bigint, NULL::text, NULL::double precision, NULL::text[]
    FROM unnest(coalesce(acc_ids, '{}'), coalesce(acc_jobs, '{}')) AS a(id, job)
    LEFT JOIN unnest(fin_jobs, fin_keys) AS f(job, key) ON f.job = a.job
    UNION ALL
    SELECT a.id, NULL::uuid, NULL::bigint, NULL::text, NULL::double precision, NULL::text[]
    FROM unnest(pa_ids) AS a(id)
    WHERE a.id <> ALL(held_ids);
    IF cardinality(held_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT NULL::bigint, t.job_id, t.id, j.spec::text, j.compute_ms + t.compute_ms,
           ARRAY(SELECT s.partial::text FROM tasks s
                 WHERE s.job_id = t.job_id AND (s.state = 'succeeded' OR s.id = t.id)
                 ORDER BY s.chunk_start)
    FROM tasks t JOIN jobs j ON j.id = t.job_id
    WHERE t.id = ANY(held_ids);
END
$$;

-- The completion as workers without phases call it: no compute times.
-- Kept while such workers may run (migrations/README.md).
CREATE OR REPLACE FUNCTION mcq_complete(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_results text[], p_prices double precision[], p_partials text[], p_channel text)
RETURNS TABLE (accepted bigint, job_id uuid, held bigint, spec text,
               compute_ms double precision, partials text[])
LANGUAGE sql VOLATILE
AS $$
SELECT * FROM mcq_complete(p_worker, p_ids, p_tokens, p_ms, NULL::timestamptz[],
                           NULL::timestamptz[], p_results, p_prices, p_partials, p_channel);
$$;

-- A completion and the next claim in one round trip: `mcq_complete` for
-- tasks that bring their job's result, then `mcq_claim`, in one
-- transaction, so a worker about to claim sends the results it holds along
-- with the claim at no call of its own.
--
-- It takes no partials: a task that only adds to a split job may share its
-- job with other workers' completions, and the claim's job updates come
-- after this completion's, outside the id order of jobs; with results only,
-- every job the completion locks was its task's alone, so no transaction
-- holding one of the claim's jobs can be waiting for it. `mcq_claim` lets
-- its transaction commit without waiting for the disk; this one records
-- results, so the caller's commit mode is restored before returning.
--
-- Rows: one per accepted completion (`accepted` set, and `job_id` the
-- announcement key of the job it finished, as `mcq_complete` returns it),
-- then the claim's rows as `mcq_claim` returns them (`accepted` NULL).
-- With `p_channel` NULL the caller announces the finished jobs itself,
-- after the commit (see `mcq_complete`).
CREATE OR REPLACE FUNCTION mcq_complete_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[], p_channel text,
    p_max bigint, p_lease_secs double precision)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    durability text := current_setting('synchronous_commit');
BEGIN
    RETURN QUERY
    SELECT c.accepted, NULL::bigint, c.job_id, NULL::uuid, NULL::integer, NULL::bigint,
           NULL::bigint, NULL::text
    FROM mcq_complete(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished, p_results,
                      p_prices, NULL, p_channel) AS c;
    RETURN QUERY
    SELECT NULL::bigint, c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end,
           c.spec
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
    PERFORM set_config('synchronous_commit', durability, true);
END
$$;

-- The same as workers without phases call it: no compute times. Kept
-- while such workers may run (migrations/README.md).
CREATE OR REPLACE FUNCTION mcq_complete_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_results text[], p_prices double precision[], p_channel text,
    p_max bigint, p_lease_secs double precision)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE sql VOLATILE
AS $$
SELECT * FROM mcq_complete_and_claim(p_worker, p_ids, p_tokens, p_ms, NULL::timestamptz[],
                                     NULL::timestamptz[], p_results, p_prices, p_channel,
                                     p_max, p_lease_secs);
$$;
