-- Large batches are stored as a few rows and enter the queue as they are
-- claimed.
--
-- Enqueueing wrote a job row and a task row, each with its index entries,
-- per job: 2.2-2.6 s for 100,000 jobs in one statement, of which 1.1 s
-- each table, whatever the statement's shape (docs/queue-perf.md, session
-- 8). A claim then updated both rows: a new task row version with its
-- index entries, a row lock, a job row update. Now a batch of at least
-- `QueueConfig::stage_from` single-task jobs is written as rows of 5,000
-- jobs (`staged`: their ids, specs and chunk ranges as arrays), and a claim
-- that finds fewer due queued tasks than it may take inserts the next
-- staged jobs and their tasks directly as running, under its lease. Per
-- 100,000 jobs in psql (session 9): enqueue 0.29-0.32 s instead of 2.4 s,
-- claims of 1,000 jobs 30-34 ms instead of 44-50 ms.
--
-- A staged job is a queued job (docs/state-machine.md): reads list it as
-- queued from its staged row; cancelling it, or its batch, first writes its
-- staged rows out as ordinary queued jobs and tasks (`mcq_unstage`), then
-- cancels as before. Every other transition happens to materialised rows.
-- Claims take due queued tasks first (retries, single jobs, small batches,
-- unstaged rows), then staged jobs in submission order.
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

-- Writes staged rows out as queued jobs and tasks: every row of batch
-- `p_batch`, or only the row holding job `p_job`. Returns the jobs written.
-- The jobs keep their submission time; their tasks are due from it, so they
-- keep their place in the queue.
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

-- The claim of 0006, then, if it took fewer than `p_max` tasks, the next
-- staged jobs: their job and task rows are inserted running, under new
-- leases, from one staged row (the oldest one no other claim holds).
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
