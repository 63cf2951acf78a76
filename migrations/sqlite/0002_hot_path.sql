-- Heartbeats renew the leases a worker presents, by task id (see
-- Store::heartbeat), so the per-worker index of held tasks is no longer
-- read. (The PostgreSQL migration of the same number also drops foreign
-- keys and changes an index for write volume; on SQLite, in process,
-- they cost little and stay.)
DROP INDEX tasks_held;
