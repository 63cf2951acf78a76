#!/usr/bin/env bash
# The dashboard's browser test: a real `mcq serve` (embedded SQLite, two
# embedded workers) on a free port, driven by Debian's chromium through
# the DevTools protocol (tests/browser/dashboard.mjs, Node, no npm
# package). Screenshots go to target/ci-artifacts/dashboard/.
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
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

"$mcq" serve --listen 127.0.0.1:0 --database-url "sqlite:$work/mcq.sqlite" --embedded-workers 2 \
    >"$work/stdout" 2>"$out/server.log" &
server_pid=$!
url=""
for _ in $(seq 1 600); do
    url="$(sed -n 's/^mcq listening on \(http:[^ ]*\)$/\1/p' "$work/stdout")"
    [[ -n "$url" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "browser test: mcq serve exited:" >&2
        cat "$out/server.log" >&2
        exit 1
    fi
    sleep 0.1
done
if [[ -z "$url" ]]; then
    echo "browser test: mcq serve did not announce its address within 60 s" >&2
    exit 1
fi
echo "browser test: server at $url"
node tests/browser/dashboard.mjs "$url" "$out"
