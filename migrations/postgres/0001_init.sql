-- mcq queue schema, PostgreSQL. The state machine and the guard of every
-- transition are described in docs/state-machine.md.
--
-- Hot path: claiming touches only the partial indexes on runnable and
-- running tasks, so millions of finished rows cost nothing there. Columns
-- that change on every heartbeat (lease_expires_at) are not indexed, which
-- keeps lease renewals HOT updates.

CREATE TABLE batches (
    id           uuid PRIMARY KEY,
    label        text,
    total        bigint NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_submitted_at ON batches (submitted_at);

CREATE TABLE jobs (
    id           uuid PRIMARY KEY,
    batch_id     uuid REFERENCES batches (id) ON DELETE CASCADE,
    -- Submission order inside the batch: the cursor of batch paging.
    position     integer NOT NULL,
    spec         json NOT NULL,
    state        text NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    task_count   integer NOT NULL CHECK (task_count > 0),
    -- Counter bumped under the job's row lock by each successful task, so
    -- exactly one completer sees the job finish.
    tasks_done   integer NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    compute_ms   double precision NOT NULL DEFAULT 0,
    -- Copy of the result's price, so batch statistics read one table.
    price        double precision,
    error        text,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz
);
CREATE INDEX jobs_batch_position ON jobs (batch_id, position) WHERE batch_id IS NOT NULL;
CREATE INDEX jobs_unbatched_finished ON jobs (finished_at) WHERE batch_id IS NULL AND finished_at IS NOT NULL;

CREATE TABLE tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- Kernel chunk range start..end; both NULL for a whole-job task.
    chunk_start      bigint,
    chunk_end        bigint,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempt          integer NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    -- Fencing token: new on every claim, cleared when the lease ends.
    lease_token      uuid,
    lease_expires_at timestamptz,
    worker_id        uuid,
    -- The task's merged partial (multi-task jobs only), as kernel JSON.
    partial          json,
    compute_ms       double precision,
    error            text,
    finished_at      timestamptz
);
CREATE INDEX tasks_job ON tasks (job_id);
-- Runnable work, in order: the only index a fresh claim reads.
CREATE INDEX tasks_queued ON tasks (run_at, id) WHERE state = 'queued';
-- Running tasks (few), scanned for expired leases by the rescuing claim.
CREATE INDEX tasks_running ON tasks (id) WHERE state = 'running';
-- Tasks a worker holds (running, or cancelled but not yet told): heartbeats.
CREATE INDEX tasks_held ON tasks (worker_id) WHERE lease_token IS NOT NULL;

CREATE TABLE results (
    job_id     uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    result     json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workers (
    id                uuid PRIMARY KEY,
    hostname          text NOT NULL,
    pid               bigint NOT NULL,
    concurrency       integer NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    tasks_done        bigint NOT NULL DEFAULT 0,
    jobs_done         bigint NOT NULL DEFAULT 0
);

CREATE TABLE idempotency_keys (
    key          text PRIMARY KEY,
    fingerprint  text NOT NULL,
    batch_id     uuid,
    -- Job ids of an unbatched submission; a batch's ids are read from jobs.
    job_ids      uuid[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
