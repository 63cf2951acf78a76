-- The same number as migrations/postgres/0009_claim_spread.sql, which changes
-- PostgreSQL's claim of staged batches. SQLite stages nothing and its
-- claims take turns on its one writer, so nothing changes here.
SELECT 1;
