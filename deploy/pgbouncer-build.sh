#!/usr/bin/env bash
# Builds PgBouncer 1.24.1 from Debian's source archive into a prefix
# (default /opt/pgbouncer-1.24), for machines whose distribution ships an
# older one. mcq through a transaction-mode pool needs PgBouncer 1.21 or
# later: earlier ones cannot carry the driver's prepared statements from one
# server connection to the next (`max_prepared_statements`). Debian 12 ships
# 1.18.
#
#   deploy/pgbouncer-build.sh            # builds unless the prefix has it
#   PGBOUNCER_PREFIX=/usr/local deploy/pgbouncer-build.sh
#
# Needs curl, a C compiler, make, pkg-config and libevent's and OpenSSL's
# headers (Debian: libevent-dev libssl-dev pkg-config); installs them with
# apt-get when it runs as root and they are missing. The tarball is
# Debian's copy of the upstream release, checked against the SHA-256 of
# Debian trixie's source index.
set -euo pipefail

VERSION=1.24.1
SHA256=da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0
URL="http://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_${VERSION}.orig.tar.gz"
PREFIX=${PGBOUNCER_PREFIX:-/opt/pgbouncer-1.24}

if [ -x "$PREFIX/bin/pgbouncer" ] && "$PREFIX/bin/pgbouncer" --version | grep -q "PgBouncer $VERSION"; then
    echo "pgbouncer-build: $PREFIX/bin/pgbouncer is $VERSION already"
    exit 0
fi

missing=()
command -v cc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists libevent 2>/dev/null || missing+=(libevent-dev)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "pgbouncer-build: missing ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsS --retry 3 -m 120 -o "$work/src.tar.gz" "$URL"
echo "$SHA256  $work/src.tar.gz" | sha256sum -c --quiet -
tar -xzf "$work/src.tar.gz" -C "$work"
cd "$work/pgbouncer-$VERSION"
./configure --prefix="$PREFIX" --with-openssl --without-cares --without-pam --without-systemd >"$work/configure.log" 2>&1 ||
    { tail -30 "$work/configure.log" >&2; exit 1; }
make -s -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
# The manual pages need pandoc; the binary is all the tests and mcq use.
install -D -m 0755 pgbouncer "$PREFIX/bin/pgbouncer"
"$PREFIX/bin/pgbouncer" --version | head -1
