-- PostgreSQL only: its claim takes requeued tasks while any transaction
-- is open. SQLite's claim marks no rows. Keeps the numbers of the two
-- folders aligned.
SELECT 1;
