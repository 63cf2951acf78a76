-- The PostgreSQL migration of the same number lets a claim's commit skip
-- the wait for its WAL flush. SQLite already commits without a sync in WAL
-- mode with `synchronous = NORMAL` (the embedded store's setting), so
-- nothing changes here; the file keeps the numbers aligned.
SELECT 1;
