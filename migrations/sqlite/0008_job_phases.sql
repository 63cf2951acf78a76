-- Phases of each job; the same change as migrations/postgres/0008_job_phases.sql
-- (see its header). The claim and the completion that fill them are in
-- crates/mcq-queue/src/sqlite/.

ALTER TABLE tasks ADD COLUMN claimed_at INTEGER;
ALTER TABLE jobs ADD COLUMN claimed_at INTEGER;
ALTER TABLE jobs ADD COLUMN compute_started_at INTEGER;
ALTER TABLE jobs ADD COLUMN compute_finished_at INTEGER;
ALTER TABLE jobs ADD COLUMN worker_id BLOB;
