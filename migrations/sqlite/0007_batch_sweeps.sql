-- A batch submitted as a sweep keeps the sweep (its grid and repeat count,
-- as JSON), so that reads can name the grid point of each job from its
-- position alone: nothing is stored per job. NULL for other batches.
ALTER TABLE batches ADD COLUMN sweep TEXT;
