-- Heartbeats renew the leases a worker presents, by task id (see
-- Store::heartbeat), so the per-worker index of held tasks is no longer
-- read. Dropping it saves an index insertion on every claim.
DROP INDEX tasks_held;
