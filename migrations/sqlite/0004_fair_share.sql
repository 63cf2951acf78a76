-- Fair share between tenants, and priorities within one; the same change
-- as migrations/postgres/0004_fair_share.sql (see its header). The claim
-- itself is in crates/mcq-queue/src/sqlite/tasks.rs.

ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

DROP INDEX tasks_queued;
CREATE INDEX tasks_queued ON tasks (tenant_id, priority DESC, run_at, id) WHERE state = 'queued';
