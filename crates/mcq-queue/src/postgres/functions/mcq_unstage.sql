-- Writes staged rows out as queued jobs and tasks: every row of batch
-- `p_batch`, or only the row holding job `p_job`. Returns the jobs written.
-- The jobs keep their submission time; their tasks are due from it, so they
-- keep their place in the queue. Staged rows are locked in `first` order,
-- before any task or job row (the lock order of cancellation).
CREATE OR REPLACE FUNCTION mcq_unstage(p_batch uuid, p_job uuid)
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
    INSERT INTO jobs (id, batch_id, position, spec, task_count, submitted_at, tenant_id)
    SELECT u.id, s.batch_id, s.first + u.o::integer - 1, u.spec::json, 1, s.submitted_at, s.tenant_id
    FROM unnest(s.ids, s.specs) WITH ORDINALITY AS u(id, spec, o)
    WHERE u.o > s.next;
    INSERT INTO tasks (job_id, chunk_start, chunk_end, run_at, tenant_id, priority)
    SELECT u.id, u.cs, u.ce, s.submitted_at, s.tenant_id, s.priority
    FROM unnest(s.ids, s.chunk_starts, s.chunk_ends) WITH ORDINALITY AS u(id, cs, ce, o)
    WHERE u.o > s.next;
    n := n + cardinality(s.ids) - s.next;
    DELETE FROM staged st WHERE st.batch_id = s.batch_id AND st.first = s.first;
END LOOP;
RETURN n;
END
$$;
