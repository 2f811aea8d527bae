#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster on loopback for the test suite.
# Usage: source .ci/postgres.sh   (exports RAYTSYSTEM_TEST_PG_URL; call pg_stop_cluster to stop)
# Installs Debian's postgresql package when the server binaries are missing.
set -euo pipefail

PG_PORT="${PG_PORT:-54329}"
pg_stop_cluster() { :; }
pg_bin=""
for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/postgres" ] && pg_bin="$dir"
done
if [ -z "$pg_bin" ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "CI: installing PostgreSQL from Debian's packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/postgres" ] && pg_bin="$dir"
    done
fi
if [ -z "$pg_bin" ]; then
    echo "CI: no PostgreSQL server and no way to install one: the PostgreSQL tests will be skipped" >&2
    return 0 2>/dev/null || exit 0
fi

PG_DATA="$(mktemp -d /tmp/raytsystem-pg.XXXXXX)"
run_pg() {
    if [ "$(id -u)" = "0" ]; then
        chown -R postgres:postgres "$PG_DATA"
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}
run_pg "$pg_bin/initdb" -D "$PG_DATA/data" -U raytsystem -A trust --no-sync -E UTF8 >/dev/null
run_pg "$pg_bin/pg_ctl" -D "$PG_DATA/data" -l "$PG_DATA/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DATA -c fsync=off -c max_connections=200" start >/dev/null
export RAYTSYSTEM_TEST_PG_URL="postgresql+psycopg://raytsystem@127.0.0.1:${PG_PORT}/postgres"
echo "CI: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT" >&2

pg_stop_cluster() {
    run_pg "$pg_bin/pg_ctl" -D "$PG_DATA/data" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$PG_DATA"
}
