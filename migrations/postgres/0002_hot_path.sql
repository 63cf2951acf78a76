-- Fewer writes per job on the hot path (measured in docs/queue-perf.md).

-- Heartbeats renew the leases a worker presents, by task id (see
-- Store::heartbeat), so the per-worker index of held tasks is no longer
-- read. Dropping it saves an index insertion on every claim.
DROP INDEX tasks_held;

-- Foreign keys cost a lookup and a row lock per inserted row: a third of
-- an enqueue and part of every completion. Every write goes through the
-- store, which keeps jobs, tasks and results together in one transaction
-- and deletes them together when pruning.
ALTER TABLE tasks DROP CONSTRAINT tasks_job_id_fkey;
ALTER TABLE jobs DROP CONSTRAINT jobs_batch_id_fkey;
ALTER TABLE results DROP CONSTRAINT results_job_id_fkey;

-- Pruning of unbatched jobs finds them by submission time, which never
-- changes (a job finishes after it is submitted). With no index on a
-- column that a claim or a completion writes, and room left in each page,
-- both updates of a job row can be heap-only (no new index entries).
DROP INDEX jobs_unbatched_finished;
CREATE INDEX jobs_unbatched_submitted ON jobs (submitted_at) WHERE batch_id IS NULL;
ALTER TABLE jobs SET (fillfactor = 60);
