#!/usr/bin/env bash
# The Python client's checks: install it with its test extras in a virtual
# environment, lint and type-check it, and run its tests against real
# `mcq serve` processes (SQLite, and PostgreSQL through deploy/pg-local.sh).
#
#   clients/python/ci.sh            # from anywhere; uses target/debug/mcq
#   MCQ_BIN=target/release/mcq clients/python/ci.sh -k frame   # arguments go to pytest
#
# The virtual environment lives in target/python-client-venv (PYTHON picks
# the interpreter, default python3). A pytest run that collects no test
# fails, like any other failure.
set -euo pipefail
client="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$client/../.." && pwd)"
cd "$root"

export MCQ_BIN="${MCQ_BIN:-$root/target/debug/mcq}"
if [[ ! -x "$MCQ_BIN" ]]; then
    echo "python client: no mcq binary at $MCQ_BIN; building it"
    cargo build -p mcq --locked
fi

venv="$root/target/python-client-venv"
if [[ ! -x "$venv/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
# Not editable: the tests import the package as a user's install would.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$client[test,pandas]"

cd "$client"
echo "python client: ruff"
"$venv/bin/ruff" check --no-cache .
"$venv/bin/ruff" format --no-cache --check .
echo "python client: mypy --strict"
"$venv/bin/mypy" --cache-dir=/dev/null src tests

echo "python client: pytest"
status=0
"$venv/bin/pytest" -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 5 ]]; then
    echo "python client: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
