-- mcq queue schema and functions, PostgreSQL. The state machine and the
-- guard of every transition are described in docs/state-machine.md; how
-- migrations and the function files in crates/mcq-queue/src/postgres/
-- relate is in migrations/README.md.
--
-- Hot path: claiming touches only the partial index of queued tasks, so
-- millions of finished rows cost nothing there. Columns that change on
-- every heartbeat (lease_expires_at) or on a claim or completion of a job
-- are not indexed, and job pages keep room (fillfactor), so those updates
-- stay heap-only (no new index entries).
--
-- There are no foreign keys: each costs a lookup and a row lock per
-- inserted row (a third of an enqueue, part of every completion). Every
-- write goes through the store, which writes jobs, tasks and results of a
-- job together and deletes them together when pruning.

CREATE TABLE batches (
    id           uuid PRIMARY KEY,
    label        text,
    total        bigint NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_submitted_at ON batches (submitted_at);

CREATE TABLE jobs (
    id           uuid PRIMARY KEY,
    batch_id     uuid,
    -- Submission order inside the batch: the cursor of batch paging.
    position     integer NOT NULL,
    spec         json NOT NULL,
    state        text NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    task_count   integer NOT NULL CHECK (task_count > 0),
    -- Counter bumped under the job's row lock by each successful task, so
    -- exactly one completer sees the job finish.
    tasks_done   integer NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    compute_ms   double precision NOT NULL DEFAULT 0,
    -- Copy of the result's price, so batch statistics read one table.
    price        double precision,
    error        text,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz
) WITH (fillfactor = 60);
CREATE INDEX jobs_batch_position ON jobs (batch_id, position) WHERE batch_id IS NOT NULL;
-- Pruning finds unbatched jobs by submission time, which never changes
-- (a job finishes after it is submitted), so no index holds a column a
-- claim or a completion writes.
CREATE INDEX jobs_unbatched_submitted ON jobs (submitted_at) WHERE batch_id IS NULL;

CREATE TABLE tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           uuid NOT NULL,
    -- Kernel chunk range start..end; both NULL for a whole-job task.
    chunk_start      bigint,
    chunk_end        bigint,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempt          integer NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    -- Fencing token: new on every claim, cleared when the lease ends.
    lease_token      uuid,
    lease_expires_at timestamptz,
    worker_id        uuid,
    -- The task's partial (split jobs only), as kernel JSON.
    partial          json,
    compute_ms       double precision,
    error            text,
    finished_at      timestamptz
);
CREATE INDEX tasks_job ON tasks (job_id);
-- Runnable work, in order: the only index a fresh claim reads.
CREATE INDEX tasks_queued ON tasks (run_at, id) WHERE state = 'queued';
-- Running tasks (few), scanned for expired leases by the reaper.
CREATE INDEX tasks_running ON tasks (id) WHERE state = 'running';

CREATE TABLE results (
    job_id     uuid PRIMARY KEY,
    result     json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workers (
    id                uuid PRIMARY KEY,
    hostname          text NOT NULL,
    pid               bigint NOT NULL,
    concurrency       integer NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    tasks_done        bigint NOT NULL DEFAULT 0,
    jobs_done         bigint NOT NULL DEFAULT 0
);

CREATE TABLE idempotency_keys (
    key          text PRIMARY KEY,
    fingerprint  text NOT NULL,
    batch_id     uuid,
    -- Job ids of an unbatched submission; a batch's ids are read from jobs.
    job_ids      uuid[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Large batches of single-task jobs, stored as rows of 5,000 jobs that
-- claims turn into running jobs and tasks (`mcq_claim`): one row per
-- 5,000 jobs at submission instead of a job and a task row per job. A
-- staged job is a queued job (docs/state-machine.md); cancelling it writes
-- its row out as queued jobs and tasks first (`mcq_unstage`).
CREATE TABLE staged (
    batch_id     uuid NOT NULL,
    -- Position in the batch of the row's first job.
    first        integer NOT NULL,
    -- Jobs of this row already materialised (the first `next`).
    next         integer NOT NULL DEFAULT 0,
    ids          uuid[] NOT NULL,
    specs        text[] NOT NULL,
    chunk_starts bigint[] NOT NULL,
    chunk_ends   bigint[] NOT NULL,
    -- The least and greatest id of `ids`: finds a job's row by its id.
    min_id       uuid NOT NULL,
    max_id       uuid NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch_id, first),
    CHECK (next >= 0 AND next < cardinality(ids)
           AND cardinality(specs) = cardinality(ids)
           AND cardinality(chunk_starts) = cardinality(ids)
           AND cardinality(chunk_ends) = cardinality(ids))
);
CREATE INDEX staged_order ON staged (submitted_at, batch_id, first);
CREATE INDEX staged_ids ON staged (min_id, max_id);

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

-- Writes staged rows out as queued jobs and tasks: every row of batch
-- `p_batch`, or only the row holding job `p_job`. Returns the jobs written.
-- The jobs keep their submission time; their tasks are due from it, so they
-- keep their place in the queue. Staged rows are locked in `first` order,
-- before any task or job row (the lock order of cancellation).
CREATE FUNCTION mcq_unstage(p_batch uuid, p_job uuid)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $$
DECLARE
    s record;
    n bigint := 0;
BEGIN
FOR s IN
    SELECT st.* FROM staged st
    WHERE st.batch_id = p_batch
      AND (p_job IS NULL OR (st.min_id <= p_job AND st.max_id >= p_job AND p_job = ANY(st.ids)))
    ORDER BY st.first
    FOR UPDATE
LOOP
    INSERT INTO jobs (id, batch_id, position, spec, task_count, submitted_at)
    SELECT u.id, s.batch_id, s.first + u.o::integer - 1, u.spec::json, 1, s.submitted_at
    FROM unnest(s.ids, s.specs) WITH ORDINALITY AS u(id, spec, o)
    WHERE u.o > s.next;
    INSERT INTO tasks (job_id, chunk_start, chunk_end, run_at)
    SELECT u.id, u.cs, u.ce, s.submitted_at
    FROM unnest(s.ids, s.chunk_starts, s.chunk_ends) WITH ORDINALITY AS u(id, cs, ce, o)
    WHERE u.o > s.next;
    n := n + cardinality(s.ids) - s.next;
    DELETE FROM staged st WHERE st.batch_id = s.batch_id AND st.first = s.first;
END LOOP;
RETURN n;
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
-- Rows: one per accepted task (`accepted`), then one per held task
-- (`accepted` NULL). The finished batches (or unbatched jobs) are
-- announced on `p_channel` as `key:count`, at commit. The plan is pinned as
-- for `mcq_claim`: index access only, one generic plan per session, no JIT.
CREATE FUNCTION mcq_complete(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
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
    r_results text[] := p_results;
    r_prices double precision[] := p_prices;
    s_ids bigint[] := '{}';
    s_tokens uuid[] := '{}';
    s_ms double precision[] := '{}';
    s_partials text[] := '{}';
    nr int := 0;
    ns int := 0;
    -- Accepted result tasks, and their inputs aligned to them.
    acc_ids bigint[];
    acc_jobs uuid[];
    n int := 0;
    k int := 1;
    jobs_in uuid[] := '{}';
    ms_in double precision[] := '{}';
    results_in text[] := '{}';
    prices_in double precision[] := '{}';
    -- Accepted partial tasks, aligned the same way, and those held back.
    part_ids bigint[];
    part_jobs uuid[];
    pa_ids bigint[] := '{}';
    pa_jobs uuid[] := '{}';
    pa_ms double precision[] := '{}';
    pa_partials text[] := '{}';
    held_ids bigint[] := '{}';
    counted int := 0;
    announced bigint;
BEGIN
    IF p_partials IS NOT NULL THEN
        r_ids := '{}'; r_tokens := '{}'; r_ms := '{}'; r_results := '{}'; r_prices := '{}';
        FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
            IF i > 1 AND p_ids[i] <= p_ids[i - 1] THEN
                RAISE EXCEPTION 'mcq_complete: p_ids must be in ascending order';
            END IF;
            IF p_partials[i] IS NULL THEN
                nr := nr + 1;
                r_ids[nr] := p_ids[i];
                r_tokens[nr] := p_tokens[i];
                r_ms[nr] := p_ms[i];
                r_results[nr] := p_results[i];
                r_prices[nr] := p_prices[i];
            ELSE
                ns := ns + 1;
                s_ids[ns] := p_ids[i];
                s_tokens[ns] := p_tokens[i];
                s_ms[ns] := p_ms[i];
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
        RETURNING t.id, t.job_id
    )
    SELECT array_agg(g.id ORDER BY g.id), array_agg(g.job_id ORDER BY g.id)
    INTO acc_ids, acc_jobs
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
                k := k + 1;
            END IF;
        END LOOP;
        IF k <= n THEN
            RAISE EXCEPTION 'mcq_complete: p_ids must be in ascending order';
        END IF;
    END IF;

    IF ns > 0 THEN
        SELECT array_agg(t.id ORDER BY t.id), array_agg(t.job_id ORDER BY t.id)
        INTO part_ids, part_jobs
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
        UPDATE jobs j SET tasks_done = j.tasks_done + p.n, compute_ms = j.compute_ms + p.ms
        FROM (SELECT a.job_id, count(*)::int AS n, sum(a.ms) AS ms
              FROM unnest(pa_ids, pa_jobs, pa_ms) AS a(id, job_id, ms)
              WHERE a.id <> ALL(held_ids)
              GROUP BY a.job_id) p
        WHERE j.id = p.job_id;
        counted := cardinality(pa_ids) - cardinality(held_ids);
    END IF;

    IF n + counted = 0 AND cardinality(held_ids) = 0 THEN
        RETURN;
    END IF;
    WITH input AS (
        SELECT * FROM unnest(jobs_in, ms_in, results_in, prices_in) AS i(id, ms, result, price)
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
    FROM mcq_complete(p_worker, p_ids, p_tokens, p_ms, p_results, p_prices, NULL, p_channel) AS c;
    RETURN QUERY
    SELECT NULL::bigint, c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end,
           c.spec
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
    PERFORM set_config('synchronous_commit', durability, true);
END
$$;
