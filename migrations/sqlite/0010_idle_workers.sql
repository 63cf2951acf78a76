-- The same number as migrations/postgres/0010_idle_workers.sql, which marks
-- idle workers for peers that hear no NOTIFY. The embedded store announces
-- idle workers in process, so nothing changes here.
SELECT 1;
