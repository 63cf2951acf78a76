-- PostgreSQL only: its staged rows keep their count of jobs for the claim's
-- share of the work left. SQLite stages nothing, and its claim's rule for
-- tasks ahead of the free slots lives in the claim itself (Rust). Keeps the
-- numbers of the two folders aligned.
SELECT 1;
