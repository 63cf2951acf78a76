-- PostgreSQL only: a completion that commits before the claim it rides
-- with (SQLite records and claims in one process, without announcements
-- between processes). Keeps the numbers of the two folders aligned.
SELECT 1;
