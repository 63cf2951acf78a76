-- PostgreSQL's completions announce finished jobs after their commit
-- (migrations/postgres/0011_announce_after_commit.sql); SQLite announces
-- within the process and its schema does not change.
SELECT 1;
