-- The PostgreSQL migration of the same number adds a function that records
-- completions and claims in one round trip. The embedded store runs in the
-- server's process, where a call costs no round trip, so it records and
-- claims one after the other; the file keeps the numbers aligned.
SELECT 1;
