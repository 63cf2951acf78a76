-- The minimal queue of `mcq bench scale` (crates/mcq-bench/src/scale/floor.rs):
-- a SKIP LOCKED claim of one row and a one-row completion.
UPDATE mcq_bench_floor SET claimed_at = now() WHERE id = (
    SELECT id FROM mcq_bench_floor WHERE claimed_at IS NULL ORDER BY id LIMIT 1
    FOR UPDATE SKIP LOCKED) RETURNING id AS fid \gset
UPDATE mcq_bench_floor SET done = true, finished_at = now() WHERE id = :fid AND NOT done;
