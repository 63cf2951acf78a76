#!/usr/bin/env bash
# graphile-worker beside `mcq bench queue`, alternated pair by pair on one
# PostgreSQL cluster, a fresh database for every run, which of the two goes
# first alternating (docs/queue-perf.md, "Measuring a peer beside mcq").
#
#   tests/peers/graphile-worker/run.sh SERVER_URL [PAIRS] [JOBS] [TUNING]
#
# SERVER_URL is a cluster's URL without a database, for instance
# postgres://postgres@127.0.0.1:54329 from `deploy/pg-local.sh start`;
# PAIRS defaults to 5, JOBS to 100000, TUNING (best or defaults) to best.
# MCQ_BIN names the mcq binary (default target/release/mcq). Each pair
# prints one line: both burn-down rates, their ratio, and both enqueue
# rates. Needs node 20 or later; installs the pinned peer on first use.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
server=${1:?usage: run.sh SERVER_URL [PAIRS] [JOBS] [best|defaults]}
pairs=${2:-5}
jobs=${3:-100000}
tuning=${4:-best}
mcq=${MCQ_BIN:-$root/target/release/mcq}
case $tuning in best | defaults) ;; *) echo "TUNING must be best or defaults, not $tuning" >&2; exit 2 ;; esac
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "PAIRS must be a positive count, not $pairs" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "JOBS must be a positive count, not $jobs" >&2; exit 2; }
[ -x "$mcq" ] || { echo "no mcq binary at $mcq: cargo build --release -p mcq, or set MCQ_BIN" >&2; exit 2; }
[ -d "$here/node_modules" ] || (cd "$here" && npm ci --no-audit --no-fund >&2)

fresh() {
    PGOPTIONS="-c client_min_messages=warning" psql "$server/postgres" -qAtc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null
}
drop() {
    PGOPTIONS="-c client_min_messages=warning" psql "$server/postgres" -qAtc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null
}

peer_run() {
    fresh peer_burn
    node "$here/burn.mjs" "$server/peer_burn" "$jobs" 2 "$tuning" 2>/dev/null
    drop peer_burn
}

mcq_run() {
    fresh mcq_burn
    "$mcq" bench queue --database-url "$server/mcq_burn" --jobs "$jobs" --no-recovery \
        --latency-samples 20 --color never
    drop mcq_burn
}

echo "graphile-worker ($tuning tuning) beside $("$mcq" --version) ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')), $jobs jobs, 2 workers each, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
printf '%-5s %-6s %14s %14s %7s %14s %14s\n' pair first 'peer jobs/s' 'mcq jobs/s' mcq/peer 'peer enqueue/s' 'mcq enqueue/s'
for ((k = 1; k <= pairs; k++)); do
    if ((k % 2)); then
        first=peer; p=$(peer_run); m=$(mcq_run)
    else
        first=mcq; m=$(mcq_run); p=$(peer_run)
    fi
    peer_rate=$(sed -n 's/.*"burn_down_jobs_per_s":\([0-9]*\).*/\1/p' <<<"$p")
    peer_enq=$(sed -n 's/.*"enqueue_jobs_per_s":\([0-9]*\).*/\1/p' <<<"$p")
    mcq_rate=$(sed -n 's/^burn-down:.*first claim → last finish [0-9.]* ms = \([0-9]*\) jobs\/s.*/\1/p' <<<"$m")
    mcq_enq=$(sed -n 's/^enqueue:.* = \([0-9]*\) jobs\/s.*/\1/p' <<<"$m")
    if [ -z "$peer_rate" ] || [ -z "$mcq_rate" ]; then
        echo "pair $k: could not read a rate" >&2
        printf '%s\n%s\n' "$p" "$m" >&2
        exit 1
    fi
    printf '%-5s %-6s %14s %14s %7s %14s %14s\n' "$k" "$first" "$peer_rate" "$mcq_rate" \
        "$(awk -v a="$mcq_rate" -v b="$peer_rate" 'BEGIN { printf "%.2f", a / b }')" "$peer_enq" "$mcq_enq"
done
