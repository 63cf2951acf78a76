-- The PostgreSQL migration of the same number makes its claim function
-- keep one plan per session. SQLite prepares the claim once per
-- connection already (sqlx caches the statement), so nothing changes
-- here; the file keeps the numbers aligned.
SELECT 1;
