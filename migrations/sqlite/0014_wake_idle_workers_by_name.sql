-- PostgreSQL only: work announcements that name the idle workers to wake
-- (SQLite's workers share one process and its in-process signal). Keeps
-- the numbers of the two folders aligned.
SELECT 1;
