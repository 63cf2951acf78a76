-- PostgreSQL only: claims riding a recording call leave writing staged
-- jobs out to a call after the commit (SQLite stages nothing). Keeps the
-- numbers of the two folders aligned.
SELECT 1;
