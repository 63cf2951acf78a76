-- The claim names each job's batch (migrations/postgres/0005_claim_batch.sql);
-- on SQLite the claim is in crates/mcq-queue/src/sqlite/tasks.rs and reads
-- the batch itself, so the schema does not change.
SELECT 1;
