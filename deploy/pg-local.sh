#!/usr/bin/env bash
# A throwaway local PostgreSQL cluster with the server's default settings
# (fsync on, synchronous_commit on): what the queue benchmarks measure
# against, and a quick way to try mcq on PostgreSQL.
#
#   deploy/pg-local.sh start   # initdb (first time) and start; prints the URL
#   deploy/pg-local.sh url     # prints the URL of the database `mcq`
#   deploy/pg-local.sh stop    # stops the server (the data stays)
#   deploy/pg-local.sh destroy # stops it and removes its directory
#
# MCQ_PG_DIR (default /tmp/mcq-pg-local) and MCQ_PG_PORT (default 54329)
# choose where it lives. As root, the server runs as the `postgres` user,
# because initdb refuses to run as root.
set -euo pipefail

dir="${MCQ_PG_DIR:-/tmp/mcq-pg-local}"
port="${MCQ_PG_PORT:-54329}"
url="postgres://postgres@127.0.0.1:${port}/mcq"

find_bin() {
    if [[ -n "${MCQ_PG_BIN:-}" ]]; then echo "$MCQ_PG_BIN"; return; fi
    local candidate
    for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
        if [[ -x "$candidate/initdb" && -x "$candidate/pg_ctl" ]]; then echo "$candidate"; return; fi
    done
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v initdb)"; return
    fi
    echo "pg-local: no PostgreSQL server binaries found; install them (Debian: apt-get install postgresql)" >&2
    exit 1
}

# Runs a server command as `postgres` when we are root.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        if ! id postgres >/dev/null 2>&1; then
            useradd --system --home /var/lib/postgresql --shell /bin/bash postgres
        fi
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start() {
    local bin; bin="$(find_bin)"
    mkdir -p "$dir"
    if [[ "$(id -u)" == 0 ]]; then as_owner true; chown postgres: "$dir"; fi
    if [[ ! -f "$dir/data/PG_VERSION" ]]; then
        as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log"
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        # Only where to listen is set; everything else is PostgreSQL's default.
        as_owner "$bin/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" \
            -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir" start >/dev/null
    fi
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'mcq'" | grep -q 1 \
        || as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres mcq
    echo "$url"
}

stop() {
    local bin; bin="$(find_bin)"
    if [[ -f "$dir/data/PG_VERSION" ]]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) echo "$url" ;;
    destroy) stop; rm -rf "$dir" ;;
    *) echo "usage: $0 start|stop|url|destroy" >&2; exit 2 ;;
esac
