-- Same change as migrations/postgres/0002_worker_state.sql: the workers'
-- draining flag and recent throughput, from their heartbeats.
ALTER TABLE workers ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN tasks_last_minute INTEGER NOT NULL DEFAULT 0;
