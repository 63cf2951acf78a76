-- When a worker last announced itself idle, for peers that hear no NOTIFY
-- (processes through a transaction-mode pool hold no LISTEN): such a busy
-- worker's heartbeat asks whether a live peer is idle, and hands it half of
-- what it has not started, as an announcement would have made it do. The
-- idle worker's first heartbeat that holds tasks clears the mark. NULL:
-- not idle (every worker of an older release).
ALTER TABLE workers ADD COLUMN idle_since timestamptz;
CREATE INDEX workers_idle ON workers (idle_since) WHERE idle_since IS NOT NULL;
