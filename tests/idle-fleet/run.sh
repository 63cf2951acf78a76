#!/usr/bin/env bash
# What single requests cost the database while a fleet of real `mcq
# worker` processes waits for work: N one-slot workers and an API server
# start against a fresh database, go idle, rest for REST seconds, and then
# JOBS single jobs are submitted through the HTTP API at RATE per second.
# Prints what the resting fleet costs the database (CPU milliseconds per
# second), the database's CPU per job (the idle workers' polling over the
# same time included), both read from /proc as `mcq bench scale` reads
# it, and, where the server has pg_stat_statements loaded, how many claims
# the fleet made and how many tasks they returned. Results:
# docs/results.md ("A fleet at rest", "Single jobs into an idle fleet").
#
#   deploy/pg-local.sh start                  # a local PostgreSQL
#   cargo build --release -p mcq
#   tests/idle-fleet/run.sh                   # 64 workers, 100 jobs at 10/s
#   WORKERS=128 JOBS=100 RATE=10 MCQ=target/release/mcq tests/idle-fleet/run.sh
#   WORKERS=256 JOBS=0 REST=10 tests/idle-fleet/run.sh   # the resting fleet only
#
# Needs psql and curl on PATH, and the server's data directory readable
# (MCQ_PG_DIR, as for deploy/pg-local.sh) for its postmaster's pid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
port=${MCQ_PG_PORT:-54329}
data=${MCQ_PG_DIR:-/tmp/mcq-pg-local}/data
workers=${WORKERS:-64}
jobs=${JOBS:-100}
rate=${RATE:-10}
rest=${REST:-10}
mcq=${MCQ:-$repo/target/release/mcq}
listen=${LISTEN:-127.0.0.1:18099}
base=postgres://postgres@127.0.0.1:$port
db=mcq_idle_fleet
# Bad settings stop the run before anything starts, saying which.
whole() { [[ $2 =~ ^[0-9]+$ ]] || { echo "run.sh: $1 must be a whole number, not '$2'" >&2; exit 2; }; }
whole WORKERS "$workers"
whole JOBS "$jobs"
whole REST "$rest"
[ "$workers" -gt 0 ] || { echo "run.sh: WORKERS must be at least 1" >&2; exit 2; }
[[ $rate =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v r="$rate" 'BEGIN { exit !(r > 0) }' ||
    { echo "run.sh: RATE must be a number of jobs per second above 0, not '$rate'" >&2; exit 2; }
psql_() { PGOPTIONS="-c client_min_messages=warning" psql -q -X -h 127.0.0.1 -p "$port" -U postgres "$@"; }

# `cpu_us`: the database's CPU so far.
# shellcheck source=../pg-cpu.sh
source "$here/../pg-cpu.sh"

pids=()
cleanup() {
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    wait 2>/dev/null
    psql_ -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

psql_ -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
statements=false
if psql_ -d "$db" -c "CREATE EXTENSION pg_stat_statements" -c "SELECT pg_stat_statements_reset()" \
    >/dev/null 2>&1; then
    statements=true
fi
"$mcq" migrate --database-url "$base/$db" >/dev/null
"$mcq" serve --database-url "$base/$db" --listen "$listen" --insecure-open \
    --embedded-workers 0 --no-migrate >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq "$workers"); do
    "$mcq" worker --database-url "$base/$db" --concurrency 1 --threads 1 >/dev/null 2>&1 &
    pids+=($!)
done
# Every worker registered, claimed nothing and marked itself idle.
for _ in $(seq 1800); do
    idle=$(psql_ -d "$db" -Atc "SELECT count(*) FROM workers WHERE idle_since IS NOT NULL")
    [ "$idle" -ge "$workers" ] && curl -fsS "http://$listen/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
[ "$idle" -ge "$workers" ] || { echo "run.sh: only $idle of $workers workers went idle" >&2; exit 1; }
if [ "$rest" -gt 0 ]; then
    before=$(cpu_us)
    sleep "$rest"
    after=$(cpu_us)
    echo "workers $workers  at rest for ${rest} s  database CPU ms per second" \
        "$(awk -v t=$((after - before)) -v s="$rest" 'BEGIN { printf "%.1f", t / 1000 / s }')"
fi
[ "$jobs" -gt 0 ] || exit 0
$statements && psql_ -d "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
before=$(cpu_us)
started=$(date +%s.%N)
gap=$(awk -v r="$rate" 'BEGIN { printf "%.4f", 1 / r }')
for j in $(seq "$jobs"); do
    curl -fsS "http://$listen/v1/jobs" -H 'content-type: application/json' \
        -d "{\"runs\": 1000, \"seed\": $j}" >/dev/null
    sleep "$gap"
done
# The last job's worker finishes, records and goes idle again.
sleep 2
after=$(cpu_us)
seconds=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
done_jobs=$(psql_ -d "$db" -Atc "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
# Submission to claim, both on the database's clock.
pickup=$(psql_ -d "$db" -Atc "SELECT format('%s / %s ms',
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY w)::numeric, 1),
        round(percentile_cont(0.99) WITHIN GROUP (ORDER BY w)::numeric, 1))
    FROM (SELECT extract(epoch FROM claimed_at - submitted_at) * 1000 AS w FROM jobs) p")
echo "workers $workers  jobs $jobs ($done_jobs succeeded) at $rate/s over ${seconds} s" \
    " database CPU ms per job $(awk -v t=$((after - before)) -v n="$jobs" \
        'BEGIN { printf "%.1f", t / 1000 / n }')  pickup p50 / p99 $pickup"
if $statements; then
    psql_ -d "$db" -Atc "SELECT 'claims ' || coalesce(sum(calls), 0) || '  rows returned ' ||
        coalesce(sum(rows), 0) FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND (query LIKE '%FROM mcq_claim(%' OR query LIKE '%FROM mcq_record_and_claim(%')
          AND toplevel"
fi
