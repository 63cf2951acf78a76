-- Results that become visible, and are announced, before the claim that
-- carries them runs: `mcq_record_then_claim` commits the recording, then
-- the announcement, then the claim, in one call. `mcq_record_and_claim`
-- stays: a store whose announcements wait for the notification lock goes
-- back to it for a while, and workers of the previous release call it.
-- A completion, its announcement and the next claim in one round trip,
-- each in a transaction of its own: `mcq_record`, commit; a `pg_notify`
-- per finished job's key on `p_channel` (none when NULL), commit; then
-- `mcq_claim`, committed when the call ends. A procedure, because only a
-- procedure may commit between statements.
--
-- `mcq_record_and_claim` ran the claim in the recording's transaction, so a
-- result became visible only once the claim had run too, and the store
-- announced it in a call of its own after that: two steps of about a
-- round trip each between the result's commit and its announcement. Here
-- the announcement leaves right after the commit, from the same backend.
-- It commits apart, without waiting for the disk: a `NOTIFY` holds the
-- database's one notification lock from its commit until the commit is
-- flushed, and the recording's commit waits for the flush.
--
-- The recording commits first, whatever the claim then does: a claim that
-- fails leaves the results recorded, and the caller's retry of them is
-- refused as already done. The claim sets its own commit mode, which
-- lasts to the end of its transaction, the call's.
--
-- The notification lock is the price: under load the backends that
-- announce queue on it, and here the claim waits behind the queue, where
-- an announcement of its own holds up no claim. So the procedure says how
-- long its announcement took (`announce_ms`, lock wait included), and the
-- store leaves its announcements to the herald for a while after a slow
-- one (`herald.rs`).
--
-- No `SET` clause (a procedure with one cannot commit): `mcq_record` and
-- `mcq_claim` carry their own. Outputs, one row: `accepted` and `finished`
-- aligned, an accepted task and the announcement key of the job it
-- finished (NULL if none), as `mcq_record` returns them; `announce_ms`;
-- then the claim's rows as `mcq_claim` returns them, a column each.
CREATE PROCEDURE mcq_record_then_claim(
    p_worker uuid, p_ids bigint[], p_tokens uuid[], p_ms double precision[],
    p_started timestamptz[], p_finished timestamptz[],
    p_results text[], p_prices double precision[],
    p_channel text, p_max bigint, p_lease_secs double precision,
    INOUT accepted bigint[] DEFAULT NULL, INOUT finished uuid[] DEFAULT NULL,
    INOUT announce_ms double precision DEFAULT NULL,
    INOUT ids bigint[] DEFAULT NULL, INOUT job_ids uuid[] DEFAULT NULL,
    INOUT lease_tokens uuid[] DEFAULT NULL, INOUT attempts integer[] DEFAULT NULL,
    INOUT chunk_starts bigint[] DEFAULT NULL, INOUT chunk_ends bigint[] DEFAULT NULL,
    INOUT specs text[] DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    began timestamptz;
BEGIN
    IF cardinality(p_ids) > 0 THEN
        SELECT array_agg(r.accepted), array_agg(r.job_id)
        INTO accepted, finished
        FROM mcq_record(p_worker, p_ids, p_tokens, p_ms, p_started, p_finished, p_results,
                        p_prices) AS r;
        COMMIT;
        IF p_channel IS NOT NULL THEN
            began := clock_timestamp();
            PERFORM set_config('synchronous_commit', 'off', true);
            PERFORM pg_notify(p_channel, k.key::text || ':' || count(*))
            FROM unnest(finished) AS k(key)
            WHERE k.key IS NOT NULL
            GROUP BY k.key;
            -- Free when nothing was notified: no transaction id, no WAL.
            COMMIT;
            announce_ms := extract(epoch FROM clock_timestamp() - began) * 1e3;
        END IF;
    END IF;
    SELECT array_agg(c.id), array_agg(c.job_id), array_agg(c.lease_token), array_agg(c.attempt),
           array_agg(c.chunk_start), array_agg(c.chunk_end), array_agg(c.spec)
    INTO ids, job_ids, lease_tokens, attempts, chunk_starts, chunk_ends, specs
    FROM mcq_claim(p_worker, p_max, p_lease_secs) AS c;
END
$$;
