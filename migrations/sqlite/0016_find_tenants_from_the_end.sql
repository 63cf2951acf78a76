-- PostgreSQL only: the claim finds the tenants with queued tasks from the
-- end of its index (SQLite's claim has no such walk). Keeps the numbers of
-- the two folders aligned.
SELECT 1;
