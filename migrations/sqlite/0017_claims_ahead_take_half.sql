-- PostgreSQL only: the claim's rule for tasks ahead of the free slots
-- lives in SQLite's claim itself (Rust), with no schema change. Keeps the
-- numbers of the two folders aligned.
SELECT 1;
