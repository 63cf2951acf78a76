-- A completion and the next claim in one round trip.
--
-- A worker about to claim usually holds finished tasks not yet recorded;
-- this function records them and claims in the same transaction, so the
-- claim costs no call of its own. In `mcq bench compare` (100 jobs of
-- about 6 ms, two workers) workers made 0.55-0.60 calls per job instead of
-- 0.76-0.79 (docs/queue-perf.md, session 7); where the database is on
-- another machine, every call saved is also a network round trip.
--
-- The two halves are exactly `mcq_complete` and `mcq_claim`, in that
-- order: completions are fenced and recorded as before, then due tasks are
-- claimed under new leases. `mcq_claim` lets its transaction commit
-- without waiting for the disk; here the transaction records results, so
-- the caller's commit mode is restored before returning and the commit
-- waits for the disk like any completion's (which also makes the claim
-- durable).
--
-- Rows: one per accepted completion (`accepted` set, the rest NULL), then
-- the claim's rows as `mcq_claim` returns them (`accepted` NULL).
-- Lock order is that of the two functions one after the other: the
-- completed tasks, their jobs in id order and this worker's row; then
-- queued tasks (skipping locked ones) and their jobs. A job whose only
-- task this worker completes has no task left to claim, so the claim never
-- waits on a job this transaction's completion holds.
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
    SELECT c, NULL::bigint, NULL::uuid, NULL::uuid, NULL::integer, NULL::bigint, NULL::bigint,
           NULL::text
    FROM mcq_complete(p_worker, p_ids, p_tokens, p_ms, p_results, p_prices, p_channel) AS c;
    RETURN QUERY
    SELECT NULL::bigint, c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end,
           c.spec
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
    PERFORM set_config('synchronous_commit', durability, true);
END
$$;
