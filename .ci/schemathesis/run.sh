#!/usr/bin/env bash
# schemathesis against real `mcq serve` processes, on SQLite and on a
# throwaway PostgreSQL cluster (deploy/pg-local.sh), each twice: open (no
# key exists) and keyed (keys made with `mcq keys create`, an admin's and
# a tenant's, sent with every request). Every check, every phase, positive and negative
# data, a bounded number of examples per operation, a fixed seed. Every
# part runs; a failure in any fails the stage.
#
#   .ci/schemathesis/run.sh              # uses target/debug/mcq
#   MCQ_BIN=target/release/mcq EXAMPLES=100 SEED=7 .ci/schemathesis/run.sh
#   BACKENDS=sqlite .ci/schemathesis/run.sh --include-name 'POST /v1/batches'
#
# Arguments are passed on to `schemathesis run`, for narrowing a run down.
#
# The virtual environment lives in target/schemathesis-venv. The servers
# run no workers (submitted jobs stay queued: the API is under test, not
# the kernel) and hold a long poll at most 1.5 s, so that generated waits
# of up to 60 s cost little, and take low job and body limits (below).
# The keyed part runs on the database the open
# part left, so its admin key also sees the open part's work.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

SCHEMATHESIS_VERSION=4.32.5
examples="${EXAMPLES:-40}"
seed="${SEED:-20261201}"
backends="${BACKENDS:-sqlite postgres}"
# Limits low enough that generated batches reach them, so that both 413s
# (more jobs than the limit, a body over its size) are answered for real:
# 20 specs with every field written out take about 6 KB.
max_jobs=20
max_body=8192
mcq="${MCQ_BIN:-$root/target/debug/mcq}"
if [[ ! -x "$mcq" ]]; then
    echo "schemathesis: no mcq binary at $mcq; building it"
    cargo build -p mcq --locked
fi

venv="$root/target/schemathesis-venv"
if [[ ! -x "$venv/bin/schemathesis" ]] || ! "$venv/bin/schemathesis" --version | grep -q "$SCHEMATHESIS_VERSION"; then
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

work="$(mktemp -d)"
server=""
pg_env=()
cleanup() {
    if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    if [[ ${#pg_env[@]} -gt 0 ]]; then env "${pg_env[@]}" bash deploy/pg-local.sh destroy >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts `mcq serve` on $1 and sets $server and $base.
start_server() {
    local url=$1 log="$work/server-$2.log"
    "$mcq" serve --listen 127.0.0.1:0 --database-url "$url" --embedded-workers 0 \
        --request-timeout-secs 2 --max-batch-jobs "$max_jobs" --max-body-bytes "$max_body" >"$work/server-$2.out" 2>"$log" &
    server=$!
    base=""
    for _ in $(seq 1 600); do
        base=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/server-$2.out" 2>/dev/null | head -1 || true)
        [[ -n "$base" ]] && return 0
        if ! kill -0 "$server" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "schemathesis: mcq serve did not start on $2:" >&2
    cat "$log" >&2
    return 1
}

# Stops the server and prints how often it answered each status (from
# its access log), e.g. to see that the limits were reached (413).
stop_server() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
    echo "schemathesis: statuses answered: $(grep -ho 'status=[0-9]*' "$work"/server-"$1".log |
        sort | uniq -c | awk '{printf "%s %s, ", $2, $1}' | sed 's/status=//g; s/, $//')"
}

# Runs schemathesis against the server at $base; $2, if not empty, is the
# API key every request carries; the rest are more arguments for it.
fuzz() {
    local part=$1 key=${2:-} started=$SECONDS
    shift $(($# < 2 ? $# : 2))
    local auth=() only=("$@")
    [[ -n "$key" ]] && auth=(--header "Authorization: Bearer $key")
    echo "schemathesis: $part ($examples examples per operation, seed $seed)"
    local outcome=passed
    if ! (cd "$work" && "$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" \
        run "$base/openapi.json" --checks all --mode all --max-examples "$examples" --seed "$seed" \
        --request-timeout 20 --no-color "${auth[@]}" "${only[@]}" "${extra[@]}"); then
        outcome=FAILED
        failed+=("$part")
    fi
    echo "schemathesis: $part $outcome, took $((SECONDS - started)) s"
}

# The open part, then the keyed parts on the same database: an admin key
# over every operation, and a tenant's submit key over every operation
# but the three only admins may use (which answer it 403).
both() {
    local backend=$1 url=$2 admin tenant
    start_server "$url" "$backend-open"
    fuzz "$backend, open"
    stop_server "$backend-open"
    admin=$("$mcq" keys create --database-url "$url" --tenant schemathesis --role admin --quiet)
    tenant=$("$mcq" keys create --database-url "$url" --tenant alice --role submit --quiet)
    start_server "$url" "$backend-keyed"
    fuzz "$backend, admin key" "$admin"
    fuzz "$backend, submit key" "$tenant" \
        --exclude-path /v1/workers --exclude-path /v1/queue --exclude-path /metrics
    refusals "$backend" "$tenant"
    stop_server "$backend-keyed"
}

# The document calls the key optional (an open server needs none), so
# schemathesis cannot tell that a keyed server enforces it: checked here,
# with the statuses the document gives.
refusals() {
    local backend=$1 tenant=$2 got want
    for check in "401 /v1/batches" "401 /v1/jobs/00000000-0000-0000-0000-000000000000" \
        "403 /v1/workers $tenant" "403 /v1/queue $tenant" "403 /metrics $tenant"; do
        read -r want path key <<<"$check"
        got=$(curl -s -o /dev/null -w '%{http_code}' ${key:+-H "Authorization: Bearer $key"} "$base$path")
        if [[ "$got" != "$want" ]]; then
            echo "schemathesis: $backend: GET $path ${key:+with the submit key }answered $got, not $want" >&2
            failed+=("$backend, refusals")
        fi
    done
}

extra=("$@")
failed=()
stage_started=$SECONDS
if [[ " $backends " == *" sqlite "* ]]; then
    both sqlite "sqlite:$work/mcq.sqlite"
fi
if [[ " $backends " == *" postgres "* ]]; then
    pg_env=(MCQ_PG_DIR="${TMPDIR:-/tmp}/mcq-schemathesis-pg-$$" MCQ_PG_PORT="$(free_port)")
    pg_url=$(env "${pg_env[@]}" bash deploy/pg-local.sh start | tail -1)
    both postgres "$pg_url"
fi
echo "schemathesis: all parts took $((SECONDS - stage_started)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "schemathesis: failures in: ${failed[*]}" >&2
    exit 1
fi
