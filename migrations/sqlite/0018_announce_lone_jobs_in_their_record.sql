-- PostgreSQL only: a record that announces its jobs of their own lives in
-- `mcq_record`; SQLite's store wakes its readers in process. Keeps the
-- numbers of the two folders aligned.
SELECT 1;
