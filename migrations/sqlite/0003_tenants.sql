-- Tenants and API keys; the same change as migrations/postgres/0003_tenants.sql
-- (see its header). SQLite cannot change a primary key in place, so the
-- idempotency keys move to a new table keyed by (tenant_id, key).

CREATE TABLE tenants (
    id                INTEGER PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    max_active_jobs   INTEGER CHECK (max_active_jobs > 0),
    max_paths_per_job INTEGER CHECK (max_paths_per_job > 0),
    created_at        INTEGER NOT NULL
);
INSERT INTO tenants (id, name, created_at)
VALUES (0, 'default', CAST(unixepoch('subsec') * 1000000 AS INTEGER));

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   INTEGER NOT NULL REFERENCES tenants (id),
    role        TEXT NOT NULL CHECK (role IN ('read', 'submit', 'admin')),
    label       TEXT,
    secret_hash BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

ALTER TABLE batches ADD COLUMN tenant_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN tenant_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN tenant_id INTEGER NOT NULL DEFAULT 0;

CREATE TABLE idempotency_keys_by_tenant (
    tenant_id   INTEGER NOT NULL DEFAULT 0,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    batch_id    BLOB,
    job_ids     TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
INSERT INTO idempotency_keys_by_tenant (tenant_id, key, fingerprint, batch_id, job_ids, created_at)
SELECT 0, key, fingerprint, batch_id, job_ids, created_at FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_by_tenant RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
