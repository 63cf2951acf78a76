#!/usr/bin/env bash
# schemathesis against real `mcq serve` processes, on SQLite and on a
# throwaway PostgreSQL cluster (deploy/pg-local.sh): every check, a bounded
# number of examples per operation, a fixed seed. Any failure fails.
#
#   .ci/schemathesis/run.sh              # uses target/debug/mcq
#   MCQ_BIN=target/release/mcq EXAMPLES=100 .ci/schemathesis/run.sh
#
# The virtual environment lives in target/schemathesis-venv. The servers
# run no workers (submitted jobs stay queued: the API is under test, not
# the kernel) and hold a long poll at most 1.5 s, so that generated waits
# of up to 60 s cost little.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

SCHEMATHESIS_VERSION=4.32.5
examples="${EXAMPLES:-25}"
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
        --request-timeout-secs 2 >"$work/server-$2.out" 2>"$log" &
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

stop_server() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
}

# Runs schemathesis against the server at $base.
fuzz() {
    local backend=$1 started=$SECONDS
    echo "schemathesis: $backend ($examples examples per operation)"
    (cd "$work" && "$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" \
        run "$base/openapi.json" --checks all --max-examples "$examples" --seed 20261201 \
        --request-timeout 20 --no-color)
    echo "schemathesis: $backend took $((SECONDS - started)) s"
}

start_server "sqlite:$work/mcq.sqlite" sqlite
fuzz sqlite
stop_server

pg_env=(MCQ_PG_DIR="${TMPDIR:-/tmp}/mcq-schemathesis-pg-$$" MCQ_PG_PORT="$(free_port)")
pg_url=$(env "${pg_env[@]}" bash deploy/pg-local.sh start | tail -1)
start_server "$pg_url" postgres
fuzz postgres
stop_server
