-- PostgreSQL only: how the claim writes staged jobs out (SQLite stages no
-- batch). Keeps the numbers of the two folders aligned.
SELECT 1;
