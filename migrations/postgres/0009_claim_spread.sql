-- Claims in a large fleet: a staged row is taken by one claim at a time,
-- so a small claim that opens one moves a share of its jobs out as queued
-- tasks for the claims after it, and a claim that finds every staged row
-- of a tenant held by others says so (a row of NULLs), for its worker to
-- claim again shortly instead of waiting for the poll. The current text
-- of both functions is in crates/mcq-queue/src/postgres/functions/. The
-- staged part takes one more argument, so it is a new function; the claim
-- is its only caller, and the old one goes in the same transaction.

-- Part of the claim (`mcq_claim`): up to `p_max` staged jobs of tenant
-- `p_tenant`, from its oldest staged row no other claim holds, inserted as
-- running job and task rows under new leases. Each job comes back as two
-- rows, its task's (with a task id) and its own (with its spec, and its
-- batch in `lease_token` as `mcq_claim` says), so the caller counts the
-- jobs taken as half the rows. The tasks are claimed as they are written
-- (`claimed_at`).
--
-- A staged row is taken by one claim at a time, so at least `p_spread`
-- jobs leave it each time: those beyond what the claim takes are written
-- out as queued jobs and tasks (due from the submission, as `mcq_unstage`
-- writes them), which the next claims take row by row, in parallel,
-- instead of each waiting its turn on the staged row.
--
-- When every staged row of the tenant is held by other claims, the one
-- row that comes back has every column NULL (neither a task nor a job):
-- work is waiting, and claiming again shortly can find it, where waiting
-- for a work signal would wait out the poll. Alone it counts as no job.
CREATE FUNCTION mcq_claim_staged(p_worker uuid, p_tenant integer, p_max bigint, p_spread bigint,
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
    w integer;
BEGIN
SELECT st.batch_id, st.first, st.next, st.ids, st.specs, st.chunk_starts, st.chunk_ends,
       st.submitted_at, st.tenant_id, st.priority
INTO s FROM staged st
WHERE st.tenant_id = p_tenant
ORDER BY st.tenant_id, st.priority DESC, st.submitted_at, st.batch_id, st.first
LIMIT 1
FOR UPDATE SKIP LOCKED;
IF NOT FOUND THEN
    IF EXISTS (SELECT 1 FROM staged st WHERE st.tenant_id = p_tenant) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::uuid, NULL::uuid, NULL::integer, NULL::bigint,
                            NULL::bigint, NULL::text;
    END IF;
    RETURN;
END IF;
k := least(p_max, cardinality(s.ids) - s.next)::integer;
w := least(greatest(p_spread - k, 0), cardinality(s.ids) - s.next - k)::integer;
IF s.next + k + w >= cardinality(s.ids) THEN
    DELETE FROM staged st WHERE st.batch_id = s.batch_id AND st.first = s.first;
ELSE
    UPDATE staged st SET next = st.next + k + w
    WHERE st.batch_id = s.batch_id AND st.first = s.first;
END IF;
IF w > 0 THEN
    INSERT INTO jobs (id, batch_id, position, spec, task_count, submitted_at, tenant_id)
    SELECT u.id, s.batch_id, s.first + s.next + k + u.o::integer - 1, u.spec::json, 1,
           s.submitted_at, s.tenant_id
    FROM unnest(s.ids[s.next + k + 1 : s.next + k + w], s.specs[s.next + k + 1 : s.next + k + w])
         WITH ORDINALITY AS u(id, spec, o);
    INSERT INTO tasks (job_id, chunk_start, chunk_end, run_at, tenant_id, priority)
    SELECT u.id, u.cs, u.ce, s.submitted_at, s.tenant_id, s.priority
    FROM unnest(s.ids[s.next + k + 1 : s.next + k + w],
                s.chunk_starts[s.next + k + 1 : s.next + k + w],
                s.chunk_ends[s.next + k + 1 : s.next + k + w]) AS u(id, cs, ce);
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
-- A small claim (under 256 tasks: a worker of a few slots in a large
-- fleet) that opens a staged row moves 256 jobs out of it, the rest
-- written out as queued tasks (`mcq_claim_staged`), so the fleet's next
-- claims find queued tasks rather than one staged row taken by one claim
-- at a time. Larger claims take only what they ask for: they are few,
-- and each amortises its visit to the row. A staged row held by another
-- claim comes back as a row of NULLs (see `mcq_claim_staged`).
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
    spread bigint := CASE WHEN p_max < 256 THEN 256 ELSE 0 END;
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
            SELECT * FROM mcq_claim_staged(p_worker, tenant, part - taken, spread, p_lease_secs);
            GET DIAGNOSTICS staged_rows = ROW_COUNT;
            -- Two rows per job; a row of NULLs, alone, counts none.
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

DROP FUNCTION mcq_claim_staged(uuid, integer, bigint, double precision);
