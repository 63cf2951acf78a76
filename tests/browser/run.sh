#!/usr/bin/env bash
# The dashboard's browser tests: real `mcq serve` processes (embedded
# SQLite and workers) on free ports, driven by Debian's chromium through
# the DevTools protocol (Node, no npm package): tests/browser/dashboard.mjs
# against an open server, tests/browser/keyed.mjs against one that needs
# API keys. Screenshots go to target/ci-artifacts/dashboard/.
#
#   tests/browser/run.sh                 # uses target/debug/mcq
#   MCQ_BIN=target/release/mcq tests/browser/run.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

if ! command -v chromium >/dev/null || ! command -v node >/dev/null; then
    echo "browser test: installing chromium and nodejs"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium nodejs >/dev/null
fi

mcq="${MCQ_BIN:-$root/target/debug/mcq}"
if [[ ! -x "$mcq" ]]; then
    echo "browser test: no mcq binary at $mcq; building it"
    cargo build -p mcq --locked
fi

out="$root/target/ci-artifacts/dashboard"
rm -rf "$out"
mkdir -p "$out"
work="$(mktemp -d)"
server_pids=()
cleanup() {
    for pid in "${server_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME WORKERS: serves $work/NAME.sqlite on a free port, logging to
# $out/NAME.log; sets `url` once the server has announced its address.
start() {
    local name="$1" workers="$2"
    "$mcq" serve --listen 127.0.0.1:0 --database-url "sqlite:$work/$name.sqlite" \
        --embedded-workers "$workers" >"$work/$name.stdout" 2>"$out/$name.log" &
    local pid=$!
    server_pids+=("$pid")
    url=""
    for _ in $(seq 1 600); do
        url="$(sed -n 's/^mcq listening on \(http:[^ ]*\)$/\1/p' "$work/$name.stdout")"
        [[ -n "$url" ]] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "browser test: mcq serve ($name) exited:" >&2
            cat "$out/$name.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    if [[ -z "$url" ]]; then
        echo "browser test: mcq serve ($name) did not announce its address within 60 s" >&2
        exit 1
    fi
    echo "browser test: $name server at $url"
}

start server 2
node tests/browser/dashboard.mjs "$url" "$out"

# Keys made before the server starts, as an operator would: the server
# needs one on every request from its first.
keyed_db="sqlite:$work/keyed.sqlite"
submit_key="$("$mcq" keys create --tenant lab --label "browser test" --quiet --database-url "$keyed_db")"
read_key="$("$mcq" keys create --tenant lab --role read --label "browser test, read only" --quiet --database-url "$keyed_db")"
start keyed 1
node tests/browser/keyed.mjs "$url" "$out" "$submit_key" "$read_key"
