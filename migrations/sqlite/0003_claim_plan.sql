-- The PostgreSQL migration of the same number moves the claim into a
-- function so that its plan cannot depend on stale statistics. SQLite
-- plans without statistics (mcq never runs ANALYZE there) and its claim
-- (crates/mcq-queue/src/sqlite/tasks.rs) reads the index of queued tasks
-- in order, so nothing changes here; the file keeps the numbers aligned.
SELECT 1;
