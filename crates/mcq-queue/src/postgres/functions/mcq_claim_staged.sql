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
