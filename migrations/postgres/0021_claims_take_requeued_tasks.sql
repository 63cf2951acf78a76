-- Requeued tasks are claimed while any transaction is open. Since 0020 a
-- claim passes over queued tasks another transaction has marked (`xmax`)
-- unless that transaction had ended before the oldest transaction still
-- running began. A transaction that locks a row and then updates it (the
-- reaper's requeue, a task's retry) leaves its lock on the new row, so
-- every requeued task looked marked, and one open transaction anywhere in
-- the cluster (a long report, a backup) kept them from every claim until
-- it ended. A mark left by the transaction that wrote the row (`xmax` =
-- `xmin`) is its own, and the row is free.

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
-- rows are found by a skip scan (one index probe per tenant) that walks
-- `tasks_queued` from its end. Claims take tasks from the front of each
-- tenant's range, and the entry of a claimed task stays in the index until
-- no snapshot older than its claim is left: a probe from the front stepped
-- over every one of them (hundreds a probe under 256 busy workers), one
-- from the end finds a task just written out. A first pass
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
-- claim comes back as a row of NULLs (see `mcq_claim_staged`). A small
-- claim that leaves a tenant with staged jobs and at most 64 (a quarter
-- of the 256) due queued tasks, counted from the end of its range for the
-- same reason, writes the next 256 out before it returns, so
-- the queued tasks do not run dry under a fleet: when they did, every
-- claim behind the one writing out found nothing, and the fleet spent a
-- claim and a retry per worker each time. Writing 256 jobs out takes a
-- few milliseconds, so a claim in the transaction of a recording call
-- only names the tenant, and the caller writes them out after the commit
-- that makes the results visible.
--
-- A claim ahead of the worker's free slots (a prefetch; the caller says
-- how many of `p_max` are ahead through `mcq_claim_ahead`, which sets
-- `mcq.claim_ahead` for this call) takes at most the worker's share of
-- the work left beyond those slots: the due queued tasks and the staged
-- jobs behind them, divided among the live fleet's workers (its slots
-- over this worker's; at least two). A worker that finishes its first
-- task of a small batch otherwise took all the rest ahead; and at the end
-- of a large batch each worker of a fleet held what its last claim took,
-- up to its whole prefetch window, so the workers whose last claims came
-- late ran on for most of a window after the others had run dry. With
-- shares, the claims shrink as the work left nears what the fleet would
-- hold, so the batch ends on every worker at about the same time. The
-- fleet's slots are read at most once a second by each session (a sum
-- over the workers' rows); the work left is counted only as far as it
-- takes: the staged rows' counts first (a few rows), then, when they are
-- fewer than what makes the whole ask fair, `tasks_queued` walked from
-- its end, as the low-water probe does, up to that and at most 1,024
-- tasks (beyond that the claim takes its whole ask); below that (a queue
-- nearly drained) the walk also steps over the entries of tasks claimed
-- since the oldest open snapshot.
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
-- (which let the planner filter a scan of every queued task). A visit
-- passes over the tasks another transaction has marked (`xmax`) unless
-- that transaction wrote the task's row or had ended before the
-- statement's snapshot: a task that another claim holds, or has taken
-- since the snapshot, still looks queued to it, and locking it would
-- lock the running task's row version until this claim commits, while
-- its worker waits there to record it. A claim's own marks are on tasks
-- it has locked already.
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
    staged_for integer[];
    filled integer[] := '{}';
    n integer;
    turn bigint;
    tenant integer;
    part bigint;
    left_over bigint := p_max;
    taken bigint;
    staged_rows bigint;
    spread bigint := CASE WHEN p_max < 256 THEN 256 ELSE 0 END;
    low_water bigint := 64;
    ahead bigint := coalesce(nullif(current_setting('mcq.claim_ahead', true), ''), '0')::bigint;
    seen bigint;
    behind bigint;
    fleet double precision;
    fleet_read text;
    slots bigint;
    fair bigint;
BEGIN
-- Until the end of the calling transaction (a claim is its own).
PERFORM set_config('synchronous_commit', 'off', true);
WITH RECURSIVE q AS (
    (SELECT t.tenant_id FROM tasks t WHERE t.state = 'queued' ORDER BY t.tenant_id DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT t.tenant_id FROM tasks t
            WHERE t.state = 'queued' AND t.tenant_id < q.tenant_id
            ORDER BY t.tenant_id DESC LIMIT 1)
    FROM q WHERE q.tenant_id IS NOT NULL
), r AS (
    (SELECT st.tenant_id FROM staged st ORDER BY st.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT st.tenant_id FROM staged st WHERE st.tenant_id > r.tenant_id
            ORDER BY st.tenant_id LIMIT 1)
    FROM r WHERE r.tenant_id IS NOT NULL
)
SELECT array_agg(DISTINCT w.tenant_id), array_agg(DISTINCT w.tenant_id) FILTER (WHERE w.staged)
INTO waiting, staged_for
FROM (SELECT q.tenant_id, false AS staged FROM q UNION ALL SELECT r.tenant_id, true FROM r) w
WHERE w.tenant_id IS NOT NULL;
n := coalesce(cardinality(waiting), 0);
IF ahead <> 0 THEN
    -- Read once: a later claim in the same transaction says its own.
    PERFORM set_config('mcq.claim_ahead', '', true);
END IF;
IF n = 0 THEN
    RETURN;
END IF;
ahead := least(greatest(ahead, 0), p_max);
IF ahead > 0 THEN
    -- The live fleet's slots, read at most once a second by each session
    -- (`mcq.fleet`: when read, in epoch seconds, and the slots), in workers
    -- of this one's size, at least two.
    fleet_read := coalesce(nullif(current_setting('mcq.fleet', true), ''), '0:0');
    slots := split_part(fleet_read, ':', 2)::bigint;
    IF split_part(fleet_read, ':', 1)::double precision < extract(epoch FROM now()) - 1 THEN
        SELECT coalesce(sum(w.concurrency), 0) INTO slots
        FROM workers w
        WHERE NOT w.draining AND w.last_heartbeat_at > now() - make_interval(secs => p_lease_secs);
        PERFORM set_config('mcq.fleet', extract(epoch FROM now())::text || ':' || slots, false);
    END IF;
    SELECT slots::double precision / greatest(w.concurrency, 1) INTO fleet
    FROM workers w WHERE w.id = p_worker;
    fleet := greatest(coalesce(fleet, slots), 2);
    -- The free slots' tasks, then a share of the fleet's at most `ahead`.
    fair := (p_max - ahead) + ceil(fleet * ahead)::bigint;
    behind := 0;
    IF coalesce(cardinality(staged_for), 0) > 0 THEN
        SELECT coalesce(sum(coalesce(st.jobs, cardinality(st.ids)) - st.next), 0) INTO behind
        FROM (SELECT st.jobs, st.ids, st.next FROM staged st LIMIT 32) st;
    END IF;
    IF behind < fair THEN
        SELECT count(*) INTO seen FROM (
            SELECT t.id FROM tasks t
            WHERE t.state = 'queued' AND t.run_at <= now()
            ORDER BY t.tenant_id DESC, t.priority, t.run_at DESC, t.id DESC
            LIMIT least(fair - behind, 1024)
        ) s;
        IF seen < least(fair - behind, 1024) THEN
            left_over := (p_max - ahead)
                + least(ahead,
                        ceil(greatest(seen + behind - (p_max - ahead), 0) / fleet)::bigint);
        END IF;
    END IF;
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
        -- Only tasks no transaction has marked (`xmax` 0), marked by the
        -- transaction that wrote them (which locked the row it replaced:
        -- a reap, a retry), or marked by one that had ended when this
        -- statement's snapshot was taken (older than its xmin: a claim
        -- that rolled back). A task another claim holds, or has taken
        -- since the snapshot, is marked by that claim, and locking it
        -- would lock the running task's row version.
        SELECT array_agg(f.id) INTO got FROM (
            SELECT t.id FROM tasks t
            WHERE t.state = 'queued' AND t.tenant_id = tenant AND t.run_at <= now()
              AND (t.xmax = 0 OR t.xmax = t.xmin
                   OR age(t.xmax) > age((SELECT pg_snapshot_xmin(pg_current_snapshot())::xid)))
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
        ELSIF spread > 0 AND tenant = ANY(staged_for) AND NOT EXISTS (
            SELECT 1 FROM tasks t
            WHERE t.state = 'queued' AND t.tenant_id = tenant AND t.run_at <= now()
            ORDER BY t.tenant_id DESC, t.priority, t.run_at DESC, t.id DESC
            OFFSET low_water LIMIT 1
        ) THEN
            -- Running low: write the next jobs out now, taking none. A
            -- staged row held by another claim is being written out.
            -- A claim that rides a recording call leaves that to a call
            -- after its commit (`mcq.refill` is `later`, see
            -- `mcq_record_and_claim`) and names the tenant in a row of
            -- its own: only `attempt` set, to the tenant's id.
            IF current_setting('mcq.refill', true) = 'later' THEN
                RETURN QUERY
                SELECT NULL::bigint, NULL::uuid, NULL::uuid, tenant, NULL::bigint, NULL::bigint,
                       NULL::text;
            ELSE
                PERFORM 1 FROM mcq_claim_staged(p_worker, tenant, 0, spread, p_lease_secs);
            END IF;
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
