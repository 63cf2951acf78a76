-- What the worker list shows beside each worker's heartbeat: whether it is
-- shutting down, and how many tasks it recorded in the minute before its
-- last heartbeat. Both come with its heartbeats; a worker of an older
-- release leaves them at their defaults.
ALTER TABLE workers
    ADD COLUMN draining boolean NOT NULL DEFAULT false,
    ADD COLUMN tasks_last_minute bigint NOT NULL DEFAULT 0;
