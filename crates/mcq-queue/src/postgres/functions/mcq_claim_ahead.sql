-- `p_max`, after telling the claim of this transaction that `p_ahead` of
-- those tasks are wanted ahead of the caller's free slots (see
-- `mcq_claim`). An argument of the claim call, evaluated before it:
-- `mcq_claim(worker, mcq_claim_ahead(max, ahead), lease)`, and the same
-- in `mcq_record_and_claim` and `mcq_complete_and_claim`, whose signatures
-- stay as running workers know them.
CREATE OR REPLACE FUNCTION mcq_claim_ahead(p_max bigint, p_ahead bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM set_config('mcq.claim_ahead', p_ahead::text, true);
    RETURN p_max;
END
$$;
