#!/usr/bin/env bash
# Sustained load against `mcq serve` with workers: `oha` sends job and
# batch submissions and result polls at the same time for a given
# duration, then this prints each stream's throughput, p50/p99 latency
# and errors, and fails if any request failed other than a deliberate 429.
#
#   tests/load/run.sh [--backend postgres|sqlite] [--duration SECONDS] [--workers N]
#
# Requests still in flight when the duration ends ("aborted due to
# deadline" in oha's report) are cut by oha, not failed by the server.
#
# postgres (default): a throwaway cluster with PostgreSQL's default
# settings (deploy/pg-local.sh, fsync on), `mcq serve --embedded-workers 0`
# and N `mcq worker` processes (2 by default). sqlite: `mcq serve` on a
# fresh file with its embedded workers (SQLite serialises writes: past one
# machine, PostgreSQL).
#
# Streams (each its own oha process, all for the whole duration):
#   jobs     POST /v1/jobs, one job of 1,000 paths; 4 connections, 100 req/s
#   batches  POST /v1/batches, 20 such jobs; 2 connections, 10 req/s
#   polls    GET /v1/jobs/{id} and GET /v1/batches/{id} of work submitted
#            before the start; 8 connections, as fast as answered
#
# MCQ_BIN picks the binary (default target/release/mcq, else
# target/debug/mcq); OHA the load generator (`cargo install oha`).
# The machine's load average before and after is printed: on a shared
# machine it says what else was running.
set -euo pipefail
cd "$(dirname "$0")/../.."

backend=postgres
duration=60
workers=2
while [[ $# -gt 0 ]]; do
    case "$1" in
        --backend) backend=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        *) echo "usage: $0 [--backend postgres|sqlite] [--duration SECONDS] [--workers N]" >&2; exit 2 ;;
    esac
done
[[ "$backend" == postgres || "$backend" == sqlite ]] || { echo "load: --backend is postgres or sqlite" >&2; exit 2; }
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || { echo "load: --duration is a whole number of seconds" >&2; exit 2; }
[[ "$workers" =~ ^[0-9]+$ ]] || { echo "load: --workers is a number" >&2; exit 2; }

mcq=${MCQ_BIN:-}
if [[ -z "$mcq" ]]; then
    if [[ -x target/release/mcq ]]; then mcq=target/release/mcq; else mcq=target/debug/mcq; fi
fi
[[ -x "$mcq" ]] || { echo "load: no mcq binary at $mcq (cargo build --release -p mcq, or set MCQ_BIN)" >&2; exit 1; }
oha=${OHA:-oha}
command -v "$oha" >/dev/null || { echo "load: no $oha (cargo install oha, or set OHA)" >&2; exit 1; }
command -v jq >/dev/null || { echo "load: needs jq" >&2; exit 1; }
command -v curl >/dev/null || { echo "load: needs curl" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

work=$(mktemp -d "${TMPDIR:-/tmp}/mcq-load.XXXXXX")
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ "$backend" == postgres ]]; then
        MCQ_PG_DIR="$work/pg" MCQ_PG_PORT="$pg_port" deploy/pg-local.sh destroy >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
pg_port=0
trap cleanup EXIT

if [[ "$backend" == postgres ]]; then
    pg_port=$(free_port)
    url=$(MCQ_PG_DIR="$work/pg" MCQ_PG_PORT="$pg_port" deploy/pg-local.sh start)
    embedded=0
else
    url="sqlite:$work/load.sqlite"
    embedded=$(nproc)
    workers=0
fi
port=$(free_port)
base="http://127.0.0.1:$port"
"$mcq" serve --listen "127.0.0.1:$port" --database-url "$url" --embedded-workers "$embedded" \
    >"$work/server.out" 2>"$work/server.log" &
pids+=($!)
for _ in $(seq 600); do
    curl -sf "$base/readyz" >/dev/null && break
    sleep 0.1
done
curl -sf "$base/readyz" >/dev/null || { echo "load: the server did not get ready" >&2; tail "$work/server.log" >&2; exit 1; }
for i in $(seq "$workers"); do
    "$mcq" worker --database-url "$url" >"$work/worker$i.out" 2>"$work/worker$i.log" &
    pids+=($!)
done

job='{"runs": 1000, "seed": 7}'
batch=$(jq -cn --argjson job "$job" '{label: "load", jobs: [range(20) | $job]}')
# Work to poll, submitted (and mostly finished) before the load starts.
seeded=$(curl -sf "$base/v1/batches" -H 'content-type: application/json' \
    -d "$(jq -cn --argjson job "$job" '{label: "polled", jobs: [range(100) | $job]}')")
batch_id=$(jq -r .id <<<"$seeded")
{
    jq -r --arg base "$base" '.job_ids[] | "\($base)/v1/jobs/\(.)"' <<<"$seeded"
    echo "$base/v1/batches/$batch_id"
} >"$work/polls.txt"
curl -sf "$base/v1/batches/$batch_id?wait=30s" >/dev/null

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%FT%TZ)
json=(--no-tui --output-format json -z "${duration}s")
"$oha" "${json[@]}" -c 4 -q 100 -m POST -H 'content-type: application/json' -d "$job" \
    "$base/v1/jobs" >"$work/jobs.json" &
load_jobs=$!
"$oha" "${json[@]}" -c 2 -q 10 -m POST -H 'content-type: application/json' -d "$batch" \
    "$base/v1/batches" >"$work/batches.json" &
load_batches=$!
"$oha" "${json[@]}" -c 8 --urls-from-file "$work/polls.txt" >"$work/polls.json" &
load_polls=$!
wait "$load_jobs" "$load_batches" "$load_polls"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "load: $backend, ${duration} s from $started, $workers worker processes (embedded $embedded), $(nproc) cores, $(hostname)"
echo "load: mcq $("$mcq" --version 2>/dev/null | head -1), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "load: load average before $load_before, after $load_after"
printf '%-8s %10s %9s %9s %9s %7s %7s\n' stream requests 'req/s' 'p50 ms' 'p99 ms' 429s errors
failed=0
for stream in jobs batches polls; do
    read -r total rps p50 p99 throttled errors < <(jq -r '
        (.statusCodeDistribution // {}) as $codes
        | ($codes | to_entries | map(.value) | add // 0) as $answered
        | ($codes["429"] // 0) as $throttled
        | ($codes | to_entries | map(select(.key | test("^2")) | .value) | add // 0) as $ok
        | ((.errorDistribution // {}) | to_entries
           | map(select(.key != "aborted due to deadline") | .value) | add // 0) as $transport
        | [$answered + $transport, .summary.requestsPerSec, .latencyPercentiles.p50 * 1000,
           .latencyPercentiles.p99 * 1000, $throttled, ($answered - $ok - $throttled) + $transport]
        | map(tostring) | join(" ")' "$work/$stream.json")
    printf '%-8s %10s %9.1f %9.2f %9.2f %7s %7s\n' "$stream" "$total" "$rps" "$p50" "$p99" "$throttled" "$errors"
    if [[ "$errors" != 0 ]]; then
        failed=1
        jq -c '{status: .statusCodeDistribution, errors: .errorDistribution}' "$work/$stream.json" >&2
    fi
done
queue=$(curl -sf "$base/v1/queue" || echo '{}')
echo "load: queue at the end: $(jq -c . <<<"$queue")"
if [[ "$failed" != 0 ]]; then
    echo "load: FAIL: requests failed (above); server log tail:" >&2
    tail -20 "$work/server.log" >&2
    exit 1
fi
