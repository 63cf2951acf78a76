#!/usr/bin/env bash
# The dry run's prediction of the original batch (100 calls of the
# original sample, 1M paths each) against real runs: for each try a fresh
# server and database, `mcq submit --count 100 --dry-run --json` (no
# history yet, so the prediction rests on the server's calibration), then
# the batch itself, and measured over predicted kernel time and wall
# time. SQLite (two embedded workers) and PostgreSQL (two `mcq worker`
# processes of one slot) alternate, so both see the machine alike.
#
#   tests/prediction/run.sh [TRIES]      # default 10 tries per backend
#
# PostgreSQL is a throwaway cluster from deploy/pg-local.sh (its own
# directory and port, MCQ_PG_DIR and MCQ_PG_PORT), one database per try.
# MCQ_BIN picks the binary (default target/release/mcq). The e2e test
# `e2e::dry_run` checks the same ratio within a factor of 2.5, beside the
# other tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mcq="${MCQ_BIN:-$root/target/release/mcq}"
tries="${1:-10}"
export MCQ_PG_DIR="${MCQ_PG_DIR:-/tmp/mcq-pg-prediction}"
export MCQ_PG_PORT="${MCQ_PG_PORT:-54391}"
"$root/deploy/pg-local.sh" start >/dev/null
base="postgres://postgres@127.0.0.1:$MCQ_PG_PORT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

compare() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
backend, dry, run = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
fleet = dry["fleet"]
compute = run["timings"]["compute_ms_total"] / 1e3
wall = run["timings"]["makespan_ms"] / 1e3
print(f"{backend:8} slots {fleet['slots']}  {dry['local']['ns_per_path_step']:.3f} ns/step  "
      f"predicted {fleet['compute_s']:.3f} s compute, {fleet['wall_s']:.3f} s wall  "
      f"measured {compute:.3f} s, {wall:.3f} s  "
      f"ratio compute {compute / fleet['compute_s']:.3f}, wall {wall / fleet['wall_s']:.3f}")
PY
}

one() {  # BACKEND TRY
    local backend=$1 dir="$work/$1-$2" url pids=()
    mkdir -p "$dir"
    if [[ $backend == sqlite ]]; then
        "$mcq" serve --listen 127.0.0.1:0 --database-url "sqlite:$dir/mcq.sqlite" \
            --embedded-workers 2 >"$dir/serve.out" 2>"$dir/serve.err" &
        pids+=($!)
    else
        url="$base/prediction_$2_$$"
        psql "$base/postgres" -qc "CREATE DATABASE prediction_$2_$$" >/dev/null
        "$mcq" migrate --database-url "$url" >/dev/null
        "$mcq" serve --listen 127.0.0.1:0 --database-url "$url" --embedded-workers 0 \
            --no-migrate >"$dir/serve.out" 2>"$dir/serve.err" &
        pids+=($!)
        for _ in 1 2; do
            "$mcq" worker --database-url "$url" --concurrency 1 --threads 1 >/dev/null 2>>"$dir/worker.err" &
            pids+=($!)
        done
    fi
    local server=""
    for _ in $(seq 100); do
        server="$(sed -n 's/.*listening on //p' "$dir/serve.out")"
        [[ -n $server ]] && break
        sleep 0.1
    done
    # Both slots live before the prediction counts them.
    for _ in $(seq 100); do
        "$mcq" submit --server "$server" --dry-run --json | grep -q '"slots": 2' && break
        sleep 0.1
    done
    "$mcq" submit --server "$server" --count 100 --dry-run --json >"$dir/dry.json"
    "$mcq" submit --server "$server" --count 100 --wait --json 2>/dev/null >"$dir/run.json"
    compare "$backend" "$dir/dry.json" "$dir/run.json"
    kill "${pids[@]}"
    wait "${pids[@]}" 2>/dev/null || true
}

for try in $(seq "$tries"); do
    one sqlite "$try"
    one postgres "$try"
done
