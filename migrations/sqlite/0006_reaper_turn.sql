-- One reaper at a time for the whole fleet; the same change as
-- migrations/postgres/0006_reaper_turn.sql (see its header). `reaped_at`
-- is in microseconds since the Unix epoch, as every time column.
CREATE TABLE reaper_turn (
    only_row  INTEGER PRIMARY KEY CHECK (only_row = 1),
    reaped_at INTEGER NOT NULL
);
INSERT INTO reaper_turn (only_row, reaped_at) VALUES (1, 0);
