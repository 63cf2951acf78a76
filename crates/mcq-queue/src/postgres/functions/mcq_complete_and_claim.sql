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
