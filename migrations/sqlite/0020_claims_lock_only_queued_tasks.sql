-- PostgreSQL only: its claim locks only tasks still queued. SQLite's
-- writers take the database one at a time and lock no rows. Keeps the
-- numbers of the two folders aligned.
SELECT 1;
