-- One reaper at a time for the whole fleet. Every worker offers to end
-- expired leases each heartbeat interval; the one whose offer finds the
-- last reap older than half an interval takes the turn (moving
-- `reaped_at` to now) and scans the running tasks, and every other offer
-- changes nothing and scans nothing. With hundreds of workers that is one
-- scan of the running tasks per interval instead of one per worker. A
-- turn is no lease: a worker killed or frozen right after taking one
-- only delays the next reap by half an interval.
CREATE TABLE reaper_turn (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    reaped_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO reaper_turn DEFAULT VALUES;
