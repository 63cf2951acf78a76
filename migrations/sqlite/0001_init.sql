-- mcq queue schema, SQLite. Same tables and meaning as
-- migrations/postgres/0001_init.sql; the dialect differs:
-- ids are 16-byte BLOBs, times are INTEGER microseconds since the Unix
-- epoch (one machine, so its clock is the database clock), JSON is TEXT.
-- Foreign keys stay: in process they cost little. There are no functions
-- (the queue's statements live in crates/mcq-queue/src/sqlite/) and no
-- staged batches: the embedded store writes every job and task at once.

CREATE TABLE batches (
    id           BLOB PRIMARY KEY,
    label        TEXT,
    total        INTEGER NOT NULL,
    submitted_at INTEGER NOT NULL
);
CREATE INDEX batches_submitted_at ON batches (submitted_at);

CREATE TABLE jobs (
    id           BLOB PRIMARY KEY,
    batch_id     BLOB REFERENCES batches (id) ON DELETE CASCADE,
    position     INTEGER NOT NULL,
    spec         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    task_count   INTEGER NOT NULL CHECK (task_count > 0),
    tasks_done   INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    compute_ms   REAL NOT NULL DEFAULT 0,
    price        REAL,
    error        TEXT,
    submitted_at INTEGER NOT NULL,
    started_at   INTEGER,
    finished_at  INTEGER
);
CREATE INDEX jobs_batch_position ON jobs (batch_id, position) WHERE batch_id IS NOT NULL;
CREATE INDEX jobs_unbatched_finished ON jobs (finished_at) WHERE batch_id IS NULL AND finished_at IS NOT NULL;

CREATE TABLE tasks (
    id               INTEGER PRIMARY KEY,
    job_id           BLOB NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    chunk_start      INTEGER,
    chunk_end        INTEGER,
    state            TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    lease_token      BLOB,
    lease_expires_at INTEGER,
    worker_id        BLOB,
    partial          TEXT,
    compute_ms       REAL,
    error            TEXT,
    finished_at      INTEGER
);
CREATE INDEX tasks_job ON tasks (job_id);
CREATE INDEX tasks_queued ON tasks (run_at, id) WHERE state = 'queued';
CREATE INDEX tasks_running ON tasks (id) WHERE state = 'running';

CREATE TABLE results (
    job_id     BLOB PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    result     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE workers (
    id                BLOB PRIMARY KEY,
    hostname          TEXT NOT NULL,
    pid               INTEGER NOT NULL,
    concurrency       INTEGER NOT NULL,
    started_at        INTEGER NOT NULL,
    last_heartbeat_at INTEGER NOT NULL,
    tasks_done        INTEGER NOT NULL DEFAULT 0,
    jobs_done         INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE idempotency_keys (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    batch_id    BLOB,
    -- JSON array of job ids of an unbatched submission.
    job_ids     TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
