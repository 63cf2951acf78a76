-- One task per transaction through `mcq_complete_and_claim`: the previous
-- transaction's task is completed and the next one claimed, as a
-- one-slot worker does. `tid` and `tok` start as a task that is not held.
SELECT max(id) AS tid, max(lease_token::text) FILTER (WHERE id IS NOT NULL) AS tok
FROM mcq_complete_and_claim(format('00000000-0000-0000-0000-%s', lpad(:client_id::text, 12, '0'))::uuid,
    ARRAY[:tid]::bigint[], ARRAY[:tok]::uuid[], ARRAY[0.1]::float8[], ARRAY[now()]::timestamptz[],
    ARRAY[now()]::timestamptz[], ARRAY['{"price":1.5,"std_error":0.1}'], ARRAY[1.5]::float8[],
    NULL::text, 1, 10) \gset
