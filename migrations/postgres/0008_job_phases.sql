-- Phases of each job: when its work was claimed, when the compute started
-- and finished on the worker, and which worker finished it, beside its
-- submission (`submitted_at`, the queued phase) and the writing of its
-- result (`finished_at`, the recorded phase). docs/state-machine.md says
-- what each phase of a job of several tasks means.
--
-- A task keeps the time of its claim until it completes; its completion
-- copies the phases into its job row, in the statements that count the
-- job's tasks. Nullable columns without a default: nothing is rewritten,
-- and rows written before this migration (or by a worker that sends no
-- compute times) read as phases unknown.
--
-- The completion takes two more arrays, the compute start and finish of
-- each task: a new signature, so `mcq_complete` and
-- `mcq_complete_and_claim` gain an overload, and the old signatures become
-- wrappers that pass no compute times, for workers of an older release
-- during a rollout. The claim records `claimed_at`. The text of each
-- function is in crates/mcq-queue/src/postgres/functions/.

ALTER TABLE tasks ADD COLUMN claimed_at timestamptz;
ALTER TABLE jobs
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN compute_started_at timestamptz,
    ADD COLUMN compute_finished_at timestamptz,
    ADD COLUMN worker_id uuid;

-- Part of the claim (`mcq_claim`): up to `p_max` staged jobs of tenant
-- `p_tenant`, from its oldest staged row no other claim holds, inserted as
-- running job and task rows under new leases. Each job comes back as two
-- rows, its task's (with a task id) and its own (with its spec, and its
-- batch in `lease_token` as `mcq_claim` says), so the caller counts the
-- jobs taken as half the rows. The tasks are claimed as they are written
-- (`claimed_at`).
CREATE OR REPLACE FUNCTION mcq_claim_staged(p_worker uuid, p_tenant integer, p_max bigint,
                                            p_lease_secs double precision)
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
    s record;
    k integer;
BEGIN
SELECT st.batch_id, st.first, st.next, st.ids, st.specs, st.chunk_starts, st.chunk_ends,
       st.submitted_at, st.tenant_id, st.priority
INTO s FROM staged st
WHERE st.tenant_id = p_tenant
ORDER BY st.tenant_id, st.priority DESC, st.submitted_at, st.batch_id, st.first
LIMIT 1
FOR UPDATE SKIP LOCKED;
IF NOT FOUND THEN
    RETURN;
END IF;
k := least(p_max, cardinality(s.ids) - s.next)::integer;
IF s.next + k >= cardinality(s.ids) THEN
    DELETE FROM staged st WHERE st.batch_id = s.batch_id AND st.first = s.first;
ELSE
    UPDATE staged st SET next = st.next + k WHERE st.batch_id = s.batch_id AND st.first = s.first;
END IF;
RETURN QUERY
WITH j AS (
    INSERT INTO jobs (id, batch_id, position, spec, task_count, state, started_at, attempts, submitted_at,
                      tenant_id)
    SELECT u.id, s.batch_id, s.first + s.next + u.o::integer - 1, u.spec::json, 1, 'running', now(), 1,
           s.submitted_at, s.tenant_id
    FROM unnest(s.ids[s.next + 1 : s.next + k], s.specs[s.next + 1 : s.next + k])
         WITH ORDINALITY AS u(id, spec, o)
    RETURNING jobs.id, jobs.spec::text AS spec
), t AS (
    INSERT INTO tasks (job_id, chunk_start, chunk_end, state, attempt, lease_token,
                       lease_expires_at, worker_id, tenant_id, priority, claimed_at)
    SELECT u.id, u.cs, u.ce, 'running', 1, gen_random_uuid(),
           now() + make_interval(secs => p_lease_secs), p_worker, s.tenant_id, s.priority, now()
    FROM unnest(s.ids[s.next + 1 : s.next + k], s.chunk_starts[s.next + 1 : s.next + k],
                s.chunk_ends[s.next + 1 : s.next + k]) AS u(id, cs, ce)
    RETURNING tasks.id, tasks.job_id, tasks.lease_token, tasks.attempt, tasks.chunk_start,
              tasks.chunk_end
)
SELECT t.id, t.job_id, t.lease_token, t.attempt, t.chunk_start, t.chunk_end, NULL::text FROM t
UNION ALL
SELECT NULL, j.id, s.batch_id, NULL, NULL, NULL, j.spec FROM j;
END
$$;

-- The claim: up to `p_max` tasks under new leases, shared fairly between
-- the tenants with work waiting. Each tenant's work is its due queued
-- tasks (by priority, then in order), then its staged jobs
-- (`mcq_claim_staged`). Rows with a task id are the claimed tasks; rows
-- without carry the spec of each job involved and, in `lease_token`, the
-- job's batch (NULL for a single job), which the worker's log names with
-- every event of the task: the columns of a function are its signature,
-- which a rollout cannot change under running workers. Each claimed task
-- keeps the time of its claim (`claimed_at`) for its completion to copy
-- into its job.
--
-- Fair share, work-conserving: the tenants with queued tasks or staged
-- rows are found by a skip scan (one index probe per tenant). A first pass
-- gives each an equal part of what is left, in an order that starts one
-- tenant further on every claim (the sequence `mcq_claim_turn`), so that
-- with fewer slots than tenants each still gets its turn; a second pass
-- gives what is still left to the tenants that filled their part, in the
-- same order. So a tenant that submits one job behind another's 20,000 is
-- served by the first claim that sees it, or, when a claim takes fewer
-- tasks than there are tenants, within as many claims as there are
-- tenants. With one tenant it is the plain ordered claim.
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
-- Queued tasks are only locked (SKIP LOCKED, never waiting) while the
-- tenants are visited; they are updated, with their jobs in id order, by
-- one statement at the end, through the primary key, never by tuple id
-- (which let the planner filter a scan of every queued task).
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
DECLARE
    due bigint[] := '{}';
    got bigint[];
    waiting integer[];
    filled integer[] := '{}';
    n integer;
    turn bigint;
    tenant integer;
    part bigint;
    left_over bigint := p_max;
    taken bigint;
    staged_rows bigint;
BEGIN
-- Until the end of the calling transaction (a claim is its own).
PERFORM set_config('synchronous_commit', 'off', true);
WITH RECURSIVE q AS (
    (SELECT t.tenant_id FROM tasks t WHERE t.state = 'queued' ORDER BY t.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.tenant_id FROM tasks t
            WHERE t.state = 'queued' AND t.tenant_id > q.tenant_id
            ORDER BY t.tenant_id LIMIT 1)
    FROM q WHERE q.tenant_id IS NOT NULL
), r AS (
    (SELECT st.tenant_id FROM staged st ORDER BY st.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT st.tenant_id FROM staged st WHERE st.tenant_id > r.tenant_id
            ORDER BY st.tenant_id LIMIT 1)
    FROM r WHERE r.tenant_id IS NOT NULL
)
SELECT array_agg(DISTINCT w.tenant_id) INTO waiting
FROM (SELECT q.tenant_id FROM q UNION ALL SELECT r.tenant_id FROM r) w
WHERE w.tenant_id IS NOT NULL;
n := coalesce(cardinality(waiting), 0);
IF n = 0 THEN
    RETURN;
END IF;
turn := CASE WHEN n > 1 THEN nextval('mcq_claim_turn') ELSE 0 END;
FOR pass IN 1 .. 2 LOOP
    FOR i IN 0 .. n - 1 LOOP
        EXIT WHEN left_over <= 0;
        tenant := waiting[((turn + i) % n) + 1];
        IF pass = 1 THEN
            -- An equal part of what is left (rounded up).
            part := (left_over + n - i - 1) / (n - i);
        ELSIF tenant = ANY(filled) THEN
            part := left_over;
        ELSE
            CONTINUE;
        END IF;
        SELECT array_agg(f.id) INTO got FROM (
            SELECT t.id FROM tasks t
            WHERE t.state = 'queued' AND t.tenant_id = tenant AND t.run_at <= now()
            ORDER BY t.tenant_id, t.priority DESC, t.run_at, t.id
            LIMIT part
            FOR UPDATE SKIP LOCKED
        ) f;
        taken := coalesce(cardinality(got), 0);
        due := due || coalesce(got, '{}');
        IF taken < part THEN
            RETURN QUERY
            SELECT * FROM mcq_claim_staged(p_worker, tenant, part - taken, p_lease_secs);
            GET DIAGNOSTICS staged_rows = ROW_COUNT;
            taken := taken + staged_rows / 2;
        END IF;
        left_over := left_over - taken;
        IF pass = 1 AND taken = part THEN
            filled := filled || tenant;
        END IF;
    END LOOP;
END LOOP;
IF cardinality(due) > 0 THEN
    RETURN QUERY
    WITH claimed AS (
        UPDATE tasks t
        SET state = 'running', attempt = t.attempt + 1, lease_token = gen_random_uuid(),
            lease_expires_at = now() + make_interval(secs => p_lease_secs), worker_id = p_worker,
            claimed_at = now()
        WHERE t.id = ANY(due)
        RETURNING t.id, t.job_id, t.lease_token, t.attempt, t.chunk_start, t.chunk_end
    ), per_job AS (
        SELECT c.job_id, count(*)::int AS n FROM claimed c GROUP BY c.job_id ORDER BY c.job_id
    ), started AS (
        UPDATE jobs j
        SET state = 'running', started_at = coalesce(j.started_at, now()), attempts = j.attempts + p.n
        FROM per_job p
        WHERE j.id = p.job_id
        RETURNING j.id, j.spec::text AS spec, j.batch_id
    )
    SELECT c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end, NULL::text FROM claimed c
    UNION ALL
    SELECT NULL, s.id, s.batch_id, NULL, NULL, NULL, s.spec FROM started s;
END IF;
END
$$;

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
-- (`accepted` NULL). The finished batches (or unbatched jobs) are
-- announced on `p_channel` as `key:count`, at commit. The plan is pinned as
-- for `mcq_claim`: index access only, one generic plan per session, no JIT.
CREATE FUNCTION mcq_complete(
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
    )
    SELECT count(pg_notify(p_channel, f.key::text || ':' || f.c)) INTO announced
    FROM (SELECT b.key, count(*) AS c FROM bumped b WHERE b.state = 'succeeded' GROUP BY b.key) f;

    RETURN QUERY
    SELECT a.id, NULL::uuid, NULL::bigint, NULL::text, NULL::double precision, NULL::text[]
    FROM unnest(coalesce(acc_ids, '{}') || pa_ids) AS a(id)
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
-- Rows: one per accepted completion (`accepted` set, the rest NULL), then
-- the claim's rows as `mcq_claim` returns them (`accepted` NULL).
CREATE FUNCTION mcq_complete_and_claim(
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
    SELECT c.accepted, NULL::bigint, NULL::uuid, NULL::uuid, NULL::integer, NULL::bigint,
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
