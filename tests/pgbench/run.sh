#!/usr/bin/env bash
# The queue's claim and completion at the SQL level, beside the minimal
# SKIP LOCKED queue of `mcq bench scale`: pgbench runs each script against
# a fresh database of staged single-task jobs, and the database's CPU per
# transaction is read from /proc as the scale benchmark reads it. The
# scripts alternate, round after round, so that a shared machine's drift
# falls on all of them. Results: docs/results.md ("A completion in one
# statement").
#
#   deploy/pg-local.sh start        # a local PostgreSQL with default settings
#   tests/pgbench/run.sh            # 3 rounds of 8 clients for 8 s each
#   ROUNDS=5 CLIENTS=8 SECONDS_EACH=8 tests/pgbench/run.sh record.sql floor.sql
#
# Needs pgbench and psql on PATH, and the server's data directory readable
# (MCQ_PG_DIR, as for deploy/pg-local.sh) for its postmaster's pid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
port=${MCQ_PG_PORT:-54329}
data=${MCQ_PG_DIR:-/tmp/mcq-pg-local}/data
rounds=${ROUNDS:-3}
clients=${CLIENTS:-8}
seconds=${SECONDS_EACH:-8}
jobs=${JOBS:-150000}
db=mcq_pgbench
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || scripts=(complete_and_claim.sql record_and_claim.sql floor.sql)
psql_() { psql -q -h 127.0.0.1 -p "$port" -U postgres "$@"; }

# A fresh database: the migrations, 300 workers, `jobs` staged jobs in
# rows of 5,000 as a large submit stores them, and the minimal queue.
fresh() {
    psql_ -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
    for f in "$repo"/migrations/postgres/*.sql; do
        psql_ -d "$db" -v ON_ERROR_STOP=1 -f "$f" >/dev/null
    done
    psql_ -d "$db" -v ON_ERROR_STOP=1 >/dev/null <<SQL
INSERT INTO workers (id, hostname, pid, concurrency)
SELECT format('00000000-0000-0000-0000-%s', lpad(i::text, 12, '0'))::uuid, 'pgbench', i, 1
FROM generate_series(1, 300) i;
INSERT INTO batches (id, total) VALUES ('11111111-1111-1111-1111-111111111111', $jobs);
INSERT INTO staged (batch_id, first, ids, specs, chunk_starts, chunk_ends, min_id, max_id)
SELECT '11111111-1111-1111-1111-111111111111', r * 5000, ids, specs, cs, ce,
       (SELECT x FROM unnest(ids) x ORDER BY x LIMIT 1),
       (SELECT x FROM unnest(ids) x ORDER BY x DESC LIMIT 1)
FROM (SELECT r, array_agg(gen_random_uuid()) ids, array_agg('{"runs":2}'::text) specs,
             array_agg(0::bigint) cs, array_agg(1::bigint) ce
      FROM generate_series(0, $jobs - 1) g, LATERAL (SELECT g / 5000 AS r) x GROUP BY r) s;
CREATE TABLE mcq_bench_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    done boolean NOT NULL DEFAULT false, claimed_at timestamptz, finished_at timestamptz);
CREATE INDEX mcq_bench_floor_queued ON mcq_bench_floor (id) WHERE claimed_at IS NULL;
INSERT INTO mcq_bench_floor (done) SELECT false FROM generate_series(1, $jobs);
ANALYZE;
SQL
}

# `cpu_us`: the database's CPU so far.
# shellcheck source=../pg-cpu.sh
source "$here/../pg-cpu.sh"

for round in $(seq "$rounds"); do
    for script in "${scripts[@]}"; do
        fresh
        before=$(cpu_us)
        out=$(pgbench -n -h 127.0.0.1 -p "$port" -U postgres -M prepared -c "$clients" -j 2 \
            -T "$seconds" -D tid=0 -D tok=00000000-0000-0000-0000-000000000000 \
            -f "$here/$script" "$db" 2>&1)
        after=$(cpu_us)
        tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
        failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
        if [ -z "$tx" ] || [ "$tx" -eq 0 ]; then
            echo "run.sh: $script processed no transaction:" >&2
            echo "$out" >&2
            exit 1
        fi
        echo "round $round  $script  transactions $tx  failed ${failed:-0}  database CPU µs per transaction $(((after - before) / tx))"
    done
done
psql_ -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null
