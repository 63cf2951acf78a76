-- The PostgreSQL migration of the same number stores large batches as a
-- few rows that claims materialise. The embedded store writes every job
-- and task at once, as before (an insert there costs no round trip and no
-- server process); the file keeps the numbers aligned.
SELECT 1;
