-- PostgreSQL's common completion becomes one statement
-- (migrations/postgres/0012_record_in_one_statement.sql); SQLite records
-- completions in one transaction of the process and its schema does not
-- change.
SELECT 1;
