-- A completion and the next claim in one round trip: `mcq_record`, then
-- `mcq_claim`, in one transaction, so a worker about to claim sends the
-- results it holds along with the claim at no call of its own. Results
-- only, as `mcq_record` takes: every job it locks was its task's alone, so
-- no transaction holding one of the claim's jobs can be waiting for it.
-- The record announces nothing (no channel): the claim runs before the
-- commit, and the store announces the finished jobs after it. `mcq_claim`
-- lets its transaction commit without waiting for the disk;
-- this one records results, so the caller's commit mode is restored
-- before returning.
--
-- With `p_refill_later`, the claim writes no staged jobs out: the few
-- milliseconds 256 jobs take would hold the results back from their
-- readers. A tenant whose queued tasks run low comes back instead as a
-- row with only `attempt` set (its id), for the caller to write its jobs
-- out after the commit (`mcq_claim_staged(worker, tenant, 0, 256, …)`).
-- Without it (the ten arguments of earlier workers) the claim writes them
-- out itself, as before.
--
-- Rows: one per accepted completion (`accepted` set, and `job_id` the
-- announcement key of the job it finished, as `mcq_record` returns it),
-- then the claim's rows as `mcq_claim` returns them (`accepted` NULL).
CREATE OR REPLACE FUNCTION mcq_record_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[],
    p_max bigint, p_lease_secs double precision, p_refill_later boolean)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    durability text := current_setting('synchronous_commit');
BEGIN
    RETURN QUERY
    SELECT r.accepted, NULL::bigint, r.job_id, NULL::uuid, NULL::integer, NULL::bigint,
           NULL::bigint, NULL::text
    FROM mcq_record(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished, p_results,
                    p_prices, NULL) AS r;
    IF p_refill_later THEN
        PERFORM set_config('mcq.refill', 'later', true);
    END IF;
    RETURN QUERY
    SELECT NULL::bigint, c.id, c.job_id, c.lease_token, c.attempt, c.chunk_start, c.chunk_end,
           c.spec
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
    PERFORM set_config('mcq.refill', '', true);
    PERFORM set_config('synchronous_commit', durability, true);
END
$$;

CREATE OR REPLACE FUNCTION mcq_record_and_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[],
    p_max bigint, p_lease_secs double precision)
RETURNS TABLE (accepted bigint, id bigint, job_id uuid, lease_token uuid, attempt integer,
               chunk_start bigint, chunk_end bigint, spec text)
LANGUAGE sql VOLATILE
AS $$
    SELECT * FROM mcq_record_and_claim(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished,
                                       p_results, p_prices, p_max, p_lease_secs, false)
$$;
