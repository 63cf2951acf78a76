#!/usr/bin/env bash
# Installs promtool, Prometheus' rule checker and rule unit tester, into a
# prefix (default /opt/promtool) for deploy/check.sh, which checks
# deploy/prometheus/alerts.yml with it.
#
#   deploy/promtool-install.sh             # installs unless the prefix has it
#   PROMTOOL_PREFIX=/usr/local deploy/promtool-install.sh
#
# promtool comes from Debian's `prometheus` package, fetched with
# `apt-get download` (apt checks the package against the signed archive
# index) and unpacked without installing: only the one static binary is
# taken, so no service, user or web assets land on the machine.
set -euo pipefail

PREFIX=${PROMTOOL_PREFIX:-/opt/promtool}
started=$SECONDS

if [ -x "$PREFIX/bin/promtool" ] && "$PREFIX/bin/promtool" --version >/dev/null 2>&1; then
    echo "promtool-install: $PREFIX/bin/promtool is there already"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "promtool-install: run as root, or install promtool yourself (Debian package prometheus)" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# The package lists may be missing on a fresh machine: refresh once if so.
apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }
dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool
install -D -m 0755 usr/bin/promtool "$PREFIX/bin/promtool"
echo "promtool-install: $("$PREFIX/bin/promtool" --version 2>&1 | head -1) in $PREFIX/bin ($((SECONDS - started)) s)"
